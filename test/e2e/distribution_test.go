/*
Copyright 2026 The cluster-api-provider-harvester Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package e2e

import (
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// distributionFlavour is a cluster template whose bootstrap and control-plane providers are not
// CAPI's kubeadm ones, and what its Nodes must look like.
type distributionFlavour struct {
	providers bed.CAPIProviderSpec
	template  string
	// variables are the flavour's own template variables (the version).
	variables map[string]string
	// controlPlane is the control-plane kind's apiVersion and kind.
	controlPlaneAPIVersion, controlPlaneKind string
	// serverLabels are on a control-plane Node, and on no worker's.
	serverLabels map[string]string
	// upgradeTo, when set, is the version docs/operations.md's upgrade-rke2-k3s block upgrades
	// the cluster to, after the checks on the bed's own management cluster.
	upgradeTo string
	// fromGit runs the cluster as Fleet does (docs/operations.md's "From Git"): its manifest is
	// server-side applied under one field manager, and the upgrade is the same manifest
	// rendered again with upgradeTo as the flavour's version variable and applied over it,
	// instead of the upgrade-rke2-k3s commands. Both must end in the same state.
	fromGit bool
}

// gitFieldManager is the field manager of the manifests a test applies as Fleet's agent would.
const gitFieldManager = "fleet-agent"

// versionVariable is the flavour's template variable that holds its Kubernetes version.
func (f distributionFlavour) versionVariable() string {
	for k := range f.variables {
		if strings.HasSuffix(k, "_VERSION") {
			return k
		}
	}
	Fail("flavour " + f.template + " has no version variable")
	return ""
}

// applyFromGit server-side applies a rendered manifest as Fleet applies a bundle: the whole
// desired state, one field manager, conflicts taken over.
func applyFromGit(c client.Client, manifest []byte) {
	GinkgoHelper()
	Expect(gitApply(c, manifest)).To(Succeed())
}

// gitApply is applyFromGit's apply, for a caller that retries it (Fleet's agent retries a bundle
// whose objects an admission webhook refuses for now).
func gitApply(c client.Client, manifest []byte) error {
	objs, err := testenv.DecodeObjects(manifest)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Patch(ctx, o, client.Apply, client.FieldOwner(gitFieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}

// onManagement is the management cluster a distribution scenario runs on.
type onManagement struct {
	client         client.Client
	startProviders func(bed.CAPIProviderSpec) (*bed.CAPIProviders, error)
	lendIdentity   func(name, namespace, target string) error
}

// theBedsManagement is the bed's own management cluster (CAPI in-process).
func theBedsManagement() onManagement {
	return onManagement{
		client: mgmt(),
		startProviders: func(spec bed.CAPIProviderSpec) (*bed.CAPIProviders, error) {
			return testBed.StartCAPIProviders(ctx, spec)
		},
		lendIdentity: func(name, namespace, target string) error {
			return testBed.LendIdentity(ctx, name, namespace, target)
		},
	}
}

// provisionsWithItsProviders provisions a flavour with one control-plane machine and one worker
// with the real providers (as processes) and our manager, checks the Machines and Nodes, deletes
// the cluster and checks nothing is left on Harvester.
func provisionsWithItsProviders(f distributionFlavour, namespace, name, firstIP, lastIP string) {
	provisionsOn(theBedsManagement(), f, namespace, name, firstIP, lastIP)
}

// provisionsOn is provisionsWithItsProviders on management cluster m.
func provisionsOn(m onManagement, f distributionFlavour, namespace, name, firstIP, lastIP string) {
	providers, err := m.startProviders(f.providers)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			for part, log := range providers.Logs() {
				GinkgoWriter.Printf("--- %s %s manager log (tail) ---\n%s\n", f.providers.Name, part, lastLines(log, 60))
			}
			GinkgoWriter.Printf("--- where the cluster stands ---\n%s\n%s", describeClusterIn(m.client, namespace, name), describeMachinesIn(m.client, namespace, name))
		}
	})

	target := "h-" + namespace
	Expect(client.IgnoreAlreadyExists(m.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
	// The guest apiserver listens on the load balancer's address: a loopback pool for the
	// cluster's Harvester namespace.
	Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
		Name: "loopback-" + namespace, Subnet: "127.77.0.0/24", RangeStart: firstIP, RangeEnd: lastIP,
		Namespace: target, Priority: testBed.Harvester.UniquePriority(),
	})).To(Succeed())
	// The platform admin lends the tenant an identity (docs/harvester-identity.md).
	Expect(m.lendIdentity(namespace, namespace, target)).To(Succeed())

	variables := map[string]string{
		"CLUSTER_NAME":                name,
		"NAMESPACE":                   namespace,
		"HARVESTER_IDENTITY":          namespace,
		"HARVESTER_NAMESPACE":         target,
		"HARVESTER_NETWORK":           "default/vlan20",
		"HARVESTER_IMAGE":             "default/ubuntu-24.04",
		"HARVESTER_SSH_KEYPAIRS":      "[default/ops]",
		"CONTROL_PLANE_MACHINE_COUNT": "1",
		"WORKER_MACHINE_COUNT":        "1",
	}
	for k, v := range f.variables {
		variables[k] = v
	}
	manifest, err := templates.Render(f.template, variables)
	Expect(err).NotTo(HaveOccurred())
	if f.fromGit {
		applyFromGit(m.client, manifest)
	} else {
		objs, err := testenv.DecodeObjects(manifest)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			Expect(m.client.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetKind(), o.GetName())
		}
	}

	By("the control-plane provider initialises the control plane on the load balancer's loopback address")
	cluster := &clusterv1.Cluster{}
	state := clusterState(m.client, namespace, name)
	waitProgressing("the control plane to be initialised", state, func(g Gomega) {
		g.Expect(m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(HavePrefix("127.77.0."))
		g.Expect(cluster.Status.Initialization.ControlPlaneInitialized).To(Equal(ptr.To(true)))
	})
	controlPlane := &unstructured.Unstructured{}
	controlPlane.SetAPIVersion(f.controlPlaneAPIVersion)
	controlPlane.SetKind(f.controlPlaneKind)
	Expect(m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, controlPlane)).To(Succeed())
	initialized, _, _ := unstructured.NestedBool(controlPlane.Object, "status", "initialized")
	Expect(initialized).To(BeTrue(), "%s status: %v", f.controlPlaneKind, controlPlane.Object["status"])

	By("both Machines are provisioned by our manager and get Nodes")
	gc := testBed.Guest(namespace, name)
	waitProgressing("both Machines provisioned with their Nodes", state, func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(m.client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(2))
		gc = testBed.Guest(namespace, name)
		g.Expect(gc).NotTo(BeNil(), "no guest control plane yet")
		g.Expect(gc.CCMErr()).NotTo(HaveOccurred(), "the guest's CCM stopped")
		for _, m := range machines.Items {
			g.Expect(m.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)), "machine %s", m.Name)
			g.Expect(m.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix), "machine %s", m.Name)
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", m.Name)
			// The kubelet the installer put there is the Machine's version (e.g. v1.35.4+rke2r1),
			// so CAPI takes the worker as up to date.
			g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "machine %s", m.Name)
			g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(m.Spec.Version), "machine %s's Node", m.Name)
			if _, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]; !controlPlane {
				g.Expect(conditions.IsTrue(&m, clusterv1.MachineUpToDateCondition)).To(BeTrue(), "worker %s: %+v", m.Name, conditions.Get(&m, clusterv1.MachineUpToDateCondition))
			}
		}
	})

	By("cloud-init's own schema check passes the user data of both VMs (the bootstrap provider's cloud-config under ours)")
	Expect(expectValidUserDataOf(target, name)).To(Equal(2))

	By("the Nodes carry the distribution's labels: the server's roles on the control plane only")
	nodes := &corev1.NodeList{}
	Expect(gc.Env.Client.List(ctx, nodes)).To(Succeed())
	Expect(nodes.Items).To(HaveLen(2))
	machines := &clusterv1.MachineList{}
	Expect(m.client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
	controlPlaneNodes := map[string]bool{}
	for _, m := range machines.Items {
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		controlPlaneNodes[m.Status.NodeRef.Name] = cp
	}
	Expect(controlPlaneNodes).To(HaveLen(2))
	for _, n := range nodes.Items {
		Expect(controlPlaneNodes).To(HaveKey(n.Name))
		// Both flavours run the kubelet with an external cloud provider: our CCM in the guest
		// set the providerID and lifted the uninitialised taint.
		Expect(n.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
		Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", guest.TaintUninitialized)))
		for k, v := range f.serverLabels {
			if controlPlaneNodes[n.Name] {
				Expect(n.Labels).To(HaveKeyWithValue(k, v), "control-plane node %s", n.Name)
			} else {
				Expect(n.Labels).NotTo(HaveKey(k), "worker node %s", n.Name)
			}
		}
	}

	By("the addons' pods are placed by the guest's scheduler against the distribution's labels: the CCM on the server, kube-vip and the CSI node plugin on both nodes")
	Eventually(func(g Gomega) {
		ccm := guestPods(g, gc, guest.CCMDeployment)
		g.Expect(ccm).To(HaveLen(1))
		g.Expect(controlPlaneNodes[ccm[0].Spec.NodeName]).To(BeTrue(), "the CCM pod runs on %q", ccm[0].Spec.NodeName)
		g.Expect(ccm[0].Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(gc.CCMRunning()).To(BeTrue())
		expectNodeAddonsOnEveryNode(g, gc, 2)
	}).Should(Succeed())

	By("the guest apiserver serves with the CAs the control-plane provider generated: its kubeconfig Secret works")
	kubeconfigSecret := &corev1.Secret{}
	Expect(m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-kubeconfig"}, kubeconfigSecret)).To(Succeed())
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfigSecret.Data["value"])
	Expect(err).NotTo(HaveOccurred())
	serverCA := &corev1.Secret{}
	Expect(m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-ca"}, serverCA)).To(Succeed())
	Expect(restConfig.CAData).To(Equal(serverCA.Data["tls.crt"]))
	providerClient, err := client.New(restConfig, client.Options{})
	Expect(err).NotTo(HaveOccurred())
	viaProvider := &corev1.NodeList{}
	Expect(providerClient.List(ctx, viaProvider)).To(Succeed())
	Expect(viaProvider.Items).To(HaveLen(2))

	inGit := manifest
	if f.upgradeTo != "" {
		upgradesAsOperationsSays(f, variables, namespace, name, gc)
		if f.fromGit {
			inGit = scalesFromGit(f, variables, namespace, name)
		}
	}

	if f.fromGit {
		By("docs/operations.md's deletion from Git: every object of the file deleted at once, as Fleet's agent removes a deleted file's resources, removes everything on Harvester")
		deleteFromGit(m.client, inGit, namespace, name)
	} else {
		By("deleting the Cluster removes everything on Harvester")
		Expect(m.client.Delete(ctx, cluster)).To(Succeed())
	}
	clusterGone(m.client, namespace, name)
	leakFree(target)
}

// deleteFromGit deletes every object of a manifest at the same moment, as Fleet's agent does with
// the resources of a file deleted from Git (a Helm uninstall, which waits for nothing), and waits
// until all of them are gone (namespace/name: the file's Cluster, for the wait's report).
func deleteFromGit(c client.Client, manifest []byte, namespace, name string) {
	GinkgoHelper()
	objs, err := testenv.DecodeObjects(manifest)
	Expect(err).NotTo(HaveOccurred())
	var wg sync.WaitGroup
	for _, o := range objs {
		wg.Go(func() {
			defer GinkgoRecover()
			Expect(client.IgnoreNotFound(c.Delete(ctx, o))).To(Succeed(), "deleting %s %s", o.GetKind(), o.GetName())
		})
	}
	wg.Wait()
	waitProgressing("every object of the file deleted", clusterState(c, namespace, name), func(g Gomega) {
		for _, o := range objs {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s is still there (%v)", o.GetKind(), o.GetName(), err)
		}
	})
}

// upgradesAsOperationsSays runs docs/operations.md's upgrade for RKE2 and K3s, with its commands or
// from Git as the flavour says: both machines are
// replaced, each new one at the new version with its Node's kubelet at it, and the guest's etcd
// is left with the new server's member alone (its provider removed the old one's).
func upgradesAsOperationsSays(f distributionFlavour, variables map[string]string, namespace, name string, gc *guest.Cluster) {
	GinkgoHelper()
	before := &clusterv1.MachineList{}
	Expect(mgmt().List(ctx, before, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
	start := time.Now()
	if f.fromGit {
		By("docs/operations.md's upgrade from Git: " + f.versionVariable() + " rendered anew as " + f.upgradeTo + " and the manifest applied over the cluster")
		upgraded := map[string]string{}
		for k, v := range variables {
			upgraded[k] = v
		}
		upgraded[f.versionVariable()] = f.upgradeTo
		manifest, err := templates.Render(f.template, upgraded)
		Expect(err).NotTo(HaveOccurred())
		applyFromGit(mgmt(), manifest)
	} else {
		By("docs/operations.md's upgrade-rke2-k3s: the server, then the agent, replaced at " + f.upgradeTo)
		runDocumentedOnManagement("operations.md", "upgrade-rke2-k3s", "NAMESPACE="+namespace, "CLUSTER="+name, "VERSION="+f.upgradeTo)
	}
	waitProgressing("both machines replaced at "+f.upgradeTo, clusterState(mgmt(), namespace, name), func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(mgmt().List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(2))
		server := ""
		for _, m := range machines.Items {
			for _, old := range before.Items {
				g.Expect(m.Name).NotTo(Equal(old.Name), "machine %s was kept", m.Name)
			}
			g.Expect(m.Spec.Version).To(Equal(f.upgradeTo), "machine %s", m.Name)
			g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "machine %s", m.Name)
			g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(f.upgradeTo), "machine %s's Node", m.Name)
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				server = m.Status.NodeRef.Name
			}
		}
		members, learners, err := gc.EtcdMembers(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(learners).To(BeEmpty())
		g.Expect(members).To(ConsistOf(HavePrefix(server+"-")), "the new server's member alone")
	})
	GinkgoWriter.Printf("%s upgrade: server and agent replaced in %s\n", f.controlPlaneKind, time.Since(start).Round(time.Second))
}

// scalesFromGit runs docs/operations.md's scaling from Git over an upgraded cluster: the manifest
// rendered anew with WORKER_MACHINE_COUNT 2 (and the version it was upgraded to) and applied over
// it; a second worker joins at that version, as `kubectl scale` ends (test/e2e/kubeadm_test.go).
// It returns the manifest it applied.
func scalesFromGit(f distributionFlavour, variables map[string]string, namespace, name string) (applied []byte) {
	GinkgoHelper()
	By("docs/operations.md's scaling from Git: WORKER_MACHINE_COUNT rendered anew as 2 and the manifest applied over the cluster")
	scaled := map[string]string{}
	for k, v := range variables {
		scaled[k] = v
	}
	scaled[f.versionVariable()] = f.upgradeTo
	scaled["WORKER_MACHINE_COUNT"] = "2"
	manifest, err := templates.Render(f.template, scaled)
	Expect(err).NotTo(HaveOccurred())
	applyFromGit(mgmt(), manifest)
	waitProgressing("a second worker with its Node", clusterState(mgmt(), namespace, name), func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(mgmt().List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(3))
		for _, m := range machines.Items {
			g.Expect(m.Spec.Version).To(Equal(f.upgradeTo), "machine %s", m.Name)
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", m.Name)
		}
	})
	return manifest
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// describeClusterIn says what a Cluster's and its HarvesterCluster's conditions that are not
// true say.
func describeClusterIn(c client.Client, namespace, name string) string {
	out := ""
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		return err.Error() + "\n"
	}
	out += fmt.Sprintf("cluster %s phase %s infrastructure provisioned %v control plane initialized %v deleting %v\n", name, cluster.Status.Phase,
		ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false), ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false),
		cluster.DeletionTimestamp != nil)
	for _, cond := range cluster.Status.Conditions {
		if cond.Status != metav1.ConditionTrue {
			out += fmt.Sprintf("  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	hc := &infrav1.HarvesterCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, hc); err != nil {
		return out + err.Error() + "\n"
	}
	out += fmt.Sprintf("harvestercluster %s provisioned %v\n", name, ptr.Deref(hc.Status.Initialization.Provisioned, false))
	for _, cond := range hc.Status.Conditions {
		if cond.Status != metav1.ConditionTrue {
			out += fmt.Sprintf("  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	return out
}

// describeMachinesIn says, a line each, where a cluster's Machines of management cluster c stand.
func describeMachinesIn(c client.Client, namespace, name string) string {
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return err.Error()
	}
	out := ""
	for _, m := range machines.Items {
		out += fmt.Sprintf("machine %s phase %s deleting %v providerID %q node %q", m.Name, m.Status.Phase, m.DeletionTimestamp != nil, m.Spec.ProviderID, m.Status.NodeRef.Name)
		for _, c := range m.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				out += fmt.Sprintf("; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		out += "\n"
	}
	return out
}
