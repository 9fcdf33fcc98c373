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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/release"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/takeover"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/caphv"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// A management cluster on CAPHV v0.10.1, taken over with the commands of
// docs/migrating-from-caphv.md. CAPHV's module is not served by the Go module proxy, so its
// manager cannot run here: its CRDs, webhook configuration, Deployment and clusterctl inventory
// entry are made as its release installs them, and caphv.Manager makes what its reconcilers make
// on Harvester (VMs, claims, cloud-init Secrets, the load balancer) as its source at v0.10.1 does.
// Cluster API, clusterctl, this provider's manager as it ships, and Harvester's and KubeVirt's
// controllers run for real.
var _ = Describe("Taking a management cluster over from CAPHV", func() {
	It("refuses what it cannot take, then takes a running cluster over without re-creating or restarting anything, and scales, upgrades and deletes it under this provider", func() {
		requireTool("CLUSTERCTL")
		const namespace, name, target, version = "caphv", "prod", "h-caphv", "v0.1.0-mine"
		m, err := testBed.AddBareManagement(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, m)).To(Succeed()) })
		c := m.Env.Client
		Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
		stopCAPHV, err := m.InstallCAPHV(ctx, harvesterClient())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stopCAPHV)

		By("a cluster made by CAPHV: a control-plane machine and a MachineDeployment of one worker, each with its Node")
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		g, err := testBed.AddGuestOf(ctx, m, namespace, name)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopGuest(g)).To(Succeed()) })
		// CAPHV's users lend it a kubeconfig of their own, commonly an admin's.
		admin, err := testBed.Harvester.Env.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-identity"},
			Data: map[string][]byte{"kubeconfig": admin}})).To(Succeed())
		bootstrap := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			Data: map[string][]byte{
				"value":  bootstrapData(namespace, name),
				"format": []byte("cloud-config"),
			},
		}
		Expect(c.Create(ctx, bootstrap)).To(Succeed())
		machineSpec := map[string]any{
			"cpu": int64(2), "memory": "4Gi",
			"volumes":  []any{map[string]any{"volumeType": "image", "imageName": "default/ubuntu-24.04", "volumeSize": "40Gi", "bootOrder": int64(1)}},
			"networks": []any{"default/vlan10"},
		}
		createCAPHV(c, "HarvesterCluster", namespace, name, nil, map[string]any{
			"identitySecret":     map[string]any{"namespace": namespace, "name": name + "-identity"},
			"targetNamespace":    target,
			"loadBalancerConfig": map[string]any{"ipamType": "pool"},
		})
		createCAPHV(c, "HarvesterMachineTemplate", namespace, name+"-workers", nil, map[string]any{"template": map[string]any{"spec": machineSpec}})
		createCAPHV(c, "HarvesterMachine", namespace, name+"-cp-0", map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.MachineControlPlaneLabel: ""}, machineSpec)
		Expect(c.Create(ctx, &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: clusterv1.ClusterSpec{
				ClusterNetwork:    clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: caphv.Group, Kind: "HarvesterCluster", Name: name},
			},
		})).To(Succeed())
		Expect(c.Create(ctx, &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-cp-0", Labels: map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.MachineControlPlaneLabel: ""}},
			Spec: clusterv1.MachineSpec{
				ClusterName: name, Version: "v1.35.4",
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap.Name)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: caphv.Group, Kind: "HarvesterMachine", Name: name + "-cp-0"},
			},
		})).To(Succeed())
		md := &clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-workers"},
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: name, Replicas: ptr.To[int32](1),
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers"}},
				Template: clusterv1.MachineTemplateSpec{
					ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "workers"}},
					Spec: clusterv1.MachineSpec{
						ClusterName: name, Version: "v1.35.4",
						Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap.Name)},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: caphv.Group, Kind: "HarvesterMachineTemplate", Name: name + "-workers"},
					},
				},
			},
		}
		Expect(c.Create(ctx, md)).To(Succeed())
		// Where the in-process Cluster API of this management stands with the guest: its
		// ClusterCache must reach the guest for the Machines to get their Nodes.
		cacheState := func() string {
			if _, err := m.ClusterCache.GetClient(ctx, client.ObjectKey{Namespace: namespace, Name: name}); err != nil {
				return "ClusterCache: " + err.Error() + "\n"
			}
			return "ClusterCache: connected\n"
		}
		clusterOnly := clusterState(c, namespace, name)
		state := func() string { return clusterOnly() + cacheState() }
		machinesWithNodes := func(n int) map[string]string {
			uids := map[string]string{}
			waitProgressing(fmt.Sprintf("%d Machines with their Nodes", n), state, func(gm Gomega) {
				machines := &clusterv1.MachineList{}
				gm.Expect(c.List(ctx, machines, client.InNamespace(namespace))).To(Succeed())
				gm.Expect(machines.Items).To(HaveLen(n))
				for _, machine := range machines.Items {
					gm.Expect(machine.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", machine.Name)
					uids[machine.Name] = string(machine.UID)
				}
			})
			return uids
		}
		machines := machinesWithNodes(2)
		nodes := guestNodes(g.Env.Client, 2)
		for node, id := range nodes {
			Expect(id).To(HavePrefix("harvester://"), "node %s", node)
		}
		onHarvester := harvesterObjects(Default, target)
		Expect(onHarvester).To(HaveKey("LoadBalancer " + caphv.LoadBalancerName(namespace, name)))
		Expect(onHarvester).To(HaveKey("Secret " + name + "-cp-0-cloud-init"))
		vmis := runningVMIs(target)
		Expect(vmis).To(HaveLen(2))
		allocations := poolAllocations(target)
		Expect(allocations).To(HaveLen(1), "the load balancer's address")

		// The command as a user builds it (make caphv-takeover), on the PATH the docs' commands see.
		home, work, bin := GinkgoT().TempDir(), GinkgoT().TempDir(), GinkgoT().TempDir()
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "caphv-takeover"), "./cmd/caphv-takeover")
		build.Dir = testenv.RepoRoot()
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		kubeconfig, err := m.Env.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(home, "management.yaml"), kubeconfig, 0o600)).To(Succeed())
		env := []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "management.yaml"), "PATH=" + bin + string(os.PathListSeparator) + documentedPath(),
			"CAPHV_DIAGNOSTICS_ADDRESS=" + freeLoopbackAddress(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "GOPROXY=off"}

		By("refusing, and changing nothing, while CAPHV has a HarvesterClusterTemplate (ClusterClass)")
		createCAPHV(c, "HarvesterClusterTemplate", namespace, "unused", nil, map[string]any{"template": map[string]any{"spec": map[string]any{}}})
		for _, step := range []string{"check", "release"} {
			out, code := runDocumentedExit(documentedBlock("migrating-from-caphv.md", step), work, env...)
			Expect(code).To(Equal(2), "%s", out)
			Expect(out).To(ContainSubstring("HarvesterClusterTemplate caphv/unused"))
		}
		cluster := &clusterv1.Cluster{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		Expect(cluster.Spec.Paused).To(Or(BeNil(), Equal(ptr.To(false))), "a refused run pauses nothing")
		Expect(filepath.Join(work, "caphv-export")).NotTo(BeADirectory(), "a refused run exports nothing")
		template := &unstructured.Unstructured{}
		template.SetGroupVersionKind(caphv.Kind("HarvesterClusterTemplate"))
		template.SetNamespace(namespace)
		template.SetName("unused")
		Expect(c.Delete(ctx, template)).To(Succeed())

		By("docs/migrating-from-caphv.md: check, then pause, export and stop CAPHV; run twice, as a resumed run")
		Expect(runDocumented(documentedBlock("migrating-from-caphv.md", "check"), work, env...)).To(ContainSubstring("each can be taken over"))
		for range 2 {
			Expect(runDocumented(documentedBlock("migrating-from-caphv.md", "release"), work, env...)).To(ContainSubstring("clusterctl delete --infrastructure harvester --include-crd"))
		}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		Expect(cluster.Spec.Paused).To(Equal(ptr.To(true)))
		Expect(cluster.Annotations).To(HaveKeyWithValue(takeover.StepAnnotation, takeover.StepReleased))
		deploy := &appsv1.Deployment{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: caphv.Namespace, Name: caphv.Deployment}, deploy)).To(Succeed())
		Expect(*deploy.Spec.Replicas).To(BeZero())
		Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: caphv.Webhook}, &admissionregistrationv1.ValidatingWebhookConfiguration{}))).To(BeTrue())
		Expect(filepath.Join(work, "caphv-export", namespace, "HarvesterCluster-"+name+".yaml")).To(BeARegularFile())

		By("docs/migrating-from-caphv.md: the way back before the swap gives the cluster to CAPHV again, which runs it on; then the release again")
		Expect(runDocumented(documentedBlock("migrating-from-caphv.md", "restore"), work, env...)).To(ContainSubstring("they are CAPHV's again"))
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		Expect(cluster.Spec.Paused).To(Equal(ptr.To(false)))
		Expect(cluster.Annotations).NotTo(HaveKey(takeover.StepAnnotation))
		Expect(c.Get(ctx, client.ObjectKey{Namespace: caphv.Namespace, Name: caphv.Deployment}, deploy)).To(Succeed())
		Expect(*deploy.Spec.Replicas).To(BeEquivalentTo(1))
		restored := &unstructured.Unstructured{}
		restored.SetGroupVersionKind(caphv.Kind("HarvesterCluster"))
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, restored)).To(Succeed())
			ready, _, _ := unstructured.NestedBool(restored.Object, "status", "ready")
			g.Expect(ready).To(BeTrue(), "its status came back")
			g.Expect(restored.GetFinalizers()).To(ContainElement("harvester.infrastructure.cluster.x-k8s.io/finalizer"))
			conds, _, _ := unstructured.NestedSlice(restored.Object, "status", "conditions")
			g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Paused"), HaveKeyWithValue("status", "False"))), "CAPHV acts on it again")
		}).Should(Succeed())
		restoredMachines := &unstructured.UnstructuredList{}
		restoredMachines.SetGroupVersionKind(caphv.Kind("HarvesterMachineList"))
		Expect(c.List(ctx, restoredMachines, client.InNamespace(namespace))).To(Succeed())
		Expect(restoredMachines.Items).To(HaveLen(2))
		Expect(harvesterObjects(Default, target)).To(Equal(onHarvester), "nothing on Harvester changed hands or was made again")
		Expect(runDocumented(documentedBlock("migrating-from-caphv.md", "release"), work, env...)).To(ContainSubstring("clusterctl delete --infrastructure harvester --include-crd"))

		By("docs/migrating-from-caphv.md: clusterctl replaces CAPHV with this provider's release")
		capiEntries, err := testBed.CAPIRepository(filepath.Join(home, "capi-providers"))
		Expect(err).NotTo(HaveOccurred())
		ours := strings.ReplaceAll(strings.TrimPrefix(documentedYAML("releases.md", "local-repository-config"), "providers:\n"), "/home/me", home)
		Expect(os.MkdirAll(filepath.Join(home, ".config", "cluster-api"), 0o700)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(home, ".config", "cluster-api", "clusterctl.yaml"), []byte("providers:\n"+capiEntries+ours), 0o600)).To(Succeed())
		_, err = release.Write(filepath.Join(home, "capi-repo", "infrastructure-harvester", version), release.Options{
			Root: testenv.RepoRoot(), Image: "registry.example.com/capi/cluster-api-provider-harvester:" + version,
			CCMImage: "registry.example.com/capi/harvester-cloud-controller-manager:" + version,
		})
		Expect(err).NotTo(HaveOccurred())
		runDocumented(documentedBlock("migrating-from-caphv.md", "swap"), work, env...)
		expectInstalled(c, version, "registry.example.com/capi")
		provider := providerOptions
		provider.LogFile = ""
		Expect(m.StartInstalledProvider(ctx, provider)).To(Succeed())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() && m.Provider != nil {
				GinkgoWriter.Printf("--- the manager's log ---\n%s\n", m.Provider.LogTail(80))
			}
		})

		By("docs/migrating-from-caphv.md: the take-over, run twice; nothing on Harvester re-created or restarted, no Machine replaced")
		for range 2 {
			Expect(runDocumented(documentedBlock("migrating-from-caphv.md", "take-over"), work, env...)).To(ContainSubstring("Done"))
		}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		Expect(cluster.Spec.Paused).To(Equal(ptr.To(false)))
		Expect(cluster.Annotations).To(HaveKeyWithValue(takeover.StepAnnotation, takeover.StepDone))
		Expect(cluster.Annotations).NotTo(HaveKey(takeover.PausedAnnotation))
		hc := &infrav1.HarvesterCluster{}
		waitProgressing("the HarvesterCluster ready under this provider", state, func(gm Gomega) {
			gm.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, hc)).To(Succeed())
			ready := conditions.Get(hc, clusterv1.ReadyCondition)
			gm.Expect(ready).NotTo(BeNil())
			gm.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
		})
		Expect(hc.Annotations).To(HaveKeyWithValue(infrav1.LoadBalancerAnnotation, caphv.LoadBalancerName(namespace, name)))
		Expect(machinesWithNodes(2)).To(Equal(machines), "no Machine was replaced")
		Expect(guestNodes(g.Env.Client, 2)).To(Equal(nodes), "the Nodes keep their providerIDs")
		after := harvesterObjects(Default, target)
		for object, uid := range onHarvester {
			Expect(after).To(HaveKeyWithValue(object, uid), "%s was re-created or deleted", object)
		}
		Expect(runningVMIs(target)).To(Equal(vmis), "no VM was restarted")
		Expect(poolAllocations(target)).To(Equal(allocations), "the load balancer keeps its address")
		guest, ok := naming.GuestOf(hc, name)
		Expect(ok).To(BeTrue())
		vms := &kubevirtv1.VirtualMachineList{}
		Expect(harvesterClient().List(ctx, vms, client.InNamespace(target))).To(Succeed())
		for _, vm := range vms.Items {
			Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelCluster, guest.ID()), "VM %s carries this provider's labels", vm.Name)
			for _, cond := range vm.Status.Conditions {
				Expect(string(cond.Type)).NotTo(Equal("RestartRequired"), "VM %s", vm.Name)
			}
		}

		By("this provider scales the MachineDeployment up: its VM next to CAPHV's, their Nodes in one guest")
		Expect(c.Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
		patch := client.MergeFrom(md.DeepCopy())
		md.Spec.Replicas = ptr.To[int32](2)
		Expect(c.Patch(ctx, md, patch)).To(Succeed())
		scaled := machinesWithNodes(3)
		for machine, uid := range machines {
			Expect(scaled).To(HaveKeyWithValue(machine, uid))
		}
		Expect(runningVMIs(target)).To(HaveLen(3))

		By("a Kubernetes upgrade rolls the workers, CAPHV's included, onto this provider's VMs, and scaling down deletes one: CAPHV's worker leaves nothing behind")
		caphvWorker := ""
		for machine := range machines {
			if machine != name+"-cp-0" {
				caphvWorker = machine
			}
		}
		Expect(c.Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
		patch = client.MergeFrom(md.DeepCopy())
		md.Spec.Template.Spec.Version = "v1.35.5"
		Expect(c.Patch(ctx, md, patch)).To(Succeed())
		waitProgressing("the workers rolled to v1.35.5", state, func(gm Gomega) {
			list := &clusterv1.MachineList{}
			gm.Expect(c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name})).To(Succeed())
			gm.Expect(list.Items).To(HaveLen(2))
			for _, machine := range list.Items {
				gm.Expect(machine.Spec.Version).To(Equal("v1.35.5"))
				gm.Expect(machine.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", machine.Name)
			}
		})
		Expect(c.Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
		patch = client.MergeFrom(md.DeepCopy())
		md.Spec.Replicas = ptr.To[int32](1)
		Expect(c.Patch(ctx, md, patch)).To(Succeed())
		machinesWithNodes(2)
		waitProgressing("CAPHV's worker gone from Harvester", state, func(gm Gomega) {
			left := harvesterObjects(gm, target)
			for object := range left {
				gm.Expect(object).NotTo(ContainSubstring(caphvWorker), "CAPHV's worker %s left %s", caphvWorker, object)
			}
		})

		By("deleting the cluster under this provider leaves nothing on Harvester, CAPHV's objects included")
		Expect(c.Delete(ctx, cluster)).To(Succeed())
		waitProgressing("the Cluster gone", state, func(gm Gomega) {
			gm.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}))).To(BeTrue())
		})
		leakFree(target)
	})
})

// createCAPHV creates a CAPHV object as Cluster API and its users write them (v1alpha1, which
// its contract labels name).
func createCAPHV(c client.Client, kind, namespace, name string, labels map[string]string, spec map[string]any) {
	GinkgoHelper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(caphv.Group + "/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	Expect(c.Create(ctx, u)).To(Succeed())
}

// guestNodes waits for n Nodes in a guest and returns their providerIDs by name.
func guestNodes(guest client.Client, n int) map[string]string {
	GinkgoHelper()
	ids := map[string]string{}
	Eventually(func(g Gomega) {
		nodes := &corev1.NodeList{}
		g.Expect(guest.List(ctx, nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(n))
		for _, node := range nodes.Items {
			g.Expect(node.Spec.ProviderID).NotTo(BeEmpty())
			ids[node.Name] = node.Spec.ProviderID
		}
	}).Should(Succeed())
	return ids
}

// runningVMIs are the UIDs of a namespace's running VMIs by name.
func runningVMIs(namespace string) map[string]string {
	GinkgoHelper()
	list := &kubevirtv1.VirtualMachineInstanceList{}
	Expect(harvesterClient().List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	out := map[string]string{}
	for _, vmi := range list.Items {
		if vmi.Status.Phase == kubevirtv1.Running {
			out[vmi.Name] = string(vmi.UID)
		}
	}
	return out
}

// documentedPath is the PATH runDocumented gives the docs' commands.
func documentedPath() string {
	path := filepath.Dir(os.Getenv("KUBECTL")) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, tool := range []string{"CLUSTERCTL", "JQ"} {
		if bin := os.Getenv(tool); bin != "" {
			path = filepath.Dir(bin) + string(os.PathListSeparator) + path
		}
	}
	return path
}

// runDocumentedExit runs a documented block as runDocumented does and returns its output and
// exit code, for a command expected to fail.
func runDocumentedExit(block, dir string, env ...string) (string, int) {
	GinkgoHelper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+documentedPath()), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred())
	return string(out), 0
}

// poolAllocations are the IP pools' addresses allocated to a namespace's load balancers, as
// "pool address" to the load balancer's namespace/name.
func poolAllocations(namespace string) map[string]string {
	GinkgoHelper()
	pools := &lbv1.IPPoolList{}
	Expect(harvesterClient().List(ctx, pools)).To(Succeed())
	out := map[string]string{}
	for _, p := range pools.Items {
		for ip, who := range p.Status.Allocated {
			if strings.HasPrefix(who, namespace+"/") {
				out[p.Name+" "+ip] = who
			}
		}
	}
	return out
}
