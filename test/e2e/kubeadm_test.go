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
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

var _ = Describe("a kubeadm cluster from the cluster templates", func() {
	// The kubeadm flavour runs every check; the topology flavour, the same templates through a
	// ClusterClass, runs those its rendering can change (machines, nodes, addons, deletion) with one
	// worker, and leaves the guest-side features the flavours share (the CCM's rollout and load
	// balancers, guest volumes, secret hygiene) to the kubeadm flavour.
	DescribeTable("comes up with CAPI's kubeadm providers, our CCM in the guest, and leaves nothing behind", func(namespace, name, firstIP, lastIP string, whole bool, files ...string) {
		workers := 2
		if !whole {
			workers = 1
		}
		target := "h-" + namespace
		Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
		Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
		// The guest apiserver listens on the load balancer's address: a loopback pool for the
		// cluster's Harvester namespace, preferred there to the VM-only default pool, and serving
		// the guest's Services too.
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: "loopback-" + namespace, Subnet: "127.77.0.0/24", RangeStart: firstIP, RangeEnd: lastIP,
			Namespace: target, Priority: testBed.Harvester.UniquePriority(),
		})).To(Succeed())
		// The platform admin lends the tenant an identity: the kubeadm flavour as
		// docs/getting-started.md says, with its commands, then widened to this test's
		// namespaces; the topology flavour as the bed does it (docs/harvester-identity.md).
		identity := namespace
		if whole {
			identity = "harvester"
			dir := GinkgoT().TempDir()
			kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(dir, "harvester.kubeconfig"), kubeconfig, 0o600)).To(Succeed())
			management, err := testBed.Management.Kubeconfig()
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(dir, "management.yaml"), management, 0o600)).To(Succeed())
			runDocumented(documentedBlock("getting-started.md", "lend-identity"), dir, "KUBECONFIG="+filepath.Join(dir, "management.yaml"))
			lent := &infrav1.HarvesterClusterIdentity{}
			Expect(mgmt().Get(ctx, client.ObjectKey{Name: identity}, lent)).To(Succeed())
			Expect(lent.Spec.AllowedNamespaces.NamespaceList).To(Equal([]string{"default"}))
			Expect(lent.Spec.TargetNamespaces).To(Equal([]string{"guests"}))
			base := lent.DeepCopy()
			lent.Spec.AllowedNamespaces.NamespaceList = append(lent.Spec.AllowedNamespaces.NamespaceList, namespace)
			lent.Spec.TargetNamespaces = append(lent.Spec.TargetNamespaces, target)
			Expect(mgmt().Patch(ctx, lent, client.MergeFrom(base))).To(Succeed())
		} else {
			Expect(testBed.LendIdentity(ctx, identity, namespace, target)).To(Succeed())
		}

		// As `clusterctl generate cluster` renders a flavour (with its ClusterClass first); the
		// kubeadm flavour is created from the files, the topology flavour applied from Git as
		// Fleet's agent applies a bundle (docs/gitops-and-rancher.md).
		variables := map[string]string{
			"CLUSTER_NAME":           name,
			"NAMESPACE":              namespace,
			"KUBERNETES_VERSION":     "v1.35.4",
			"HARVESTER_IDENTITY":     identity,
			"HARVESTER_NAMESPACE":    target,
			"HARVESTER_NETWORK":      "default/vlan20",
			"HARVESTER_IMAGE":        "default/ubuntu-24.04",
			"HARVESTER_SSH_KEYPAIRS": "[default/ops]",
			"WORKER_MACHINE_COUNT":   strconv.Itoa(workers),
			// Sizes of their own for the control plane (the topology flavour ignored them).
			"CONTROL_PLANE_MACHINE_CPU":    "3",
			"CONTROL_PLANE_MACHINE_MEMORY": "6Gi",
		}
		for _, file := range files {
			manifest, err := templates.Render(file, variables)
			Expect(err).NotTo(HaveOccurred())
			if !whole {
				// The Cluster webhook validates a topology against its reconciled ClusterClass.
				Eventually(func() error { return gitApply(mgmt(), manifest) }).Should(Succeed())
				continue
			}
			objs, err := testenv.DecodeObjects(manifest)
			Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				Eventually(func() error { return mgmt().Create(ctx, o) }).Should(Succeed(),
					"creating %s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
			}
		}

		By("the control plane comes up on the load balancer's loopback address")
		cluster := &clusterv1.Cluster{}
		state := clusterState(mgmt(), namespace, name)
		waitProgressing("the control plane to come up", state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
			g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(HavePrefix("127.77.0."))
			g.Expect(cluster.Status.Initialization.ControlPlaneInitialized).To(Equal(ptr.To(true)))
		})
		kcps := &controlplanev1.KubeadmControlPlaneList{}
		Expect(mgmt().List(ctx, kcps, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		Expect(kcps.Items).To(HaveLen(1))

		By("every Machine gets a Node, initialised by our CCM (providerID, addresses, zone)")
		waitProgressing("every Machine with its Node", state, func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(mgmt().List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(1 + workers))
			if gc := testBed.Guest(namespace, name); gc != nil {
				g.Expect(gc.CCMErr()).NotTo(HaveOccurred(), "the guest's CCM stopped")
			}
			for _, m := range machines.Items {
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", m.Name)
			}
		})
		hms := &infrav1.HarvesterMachineList{}
		Expect(mgmt().List(ctx, hms, client.InNamespace(namespace))).To(Succeed())
		Expect(hms.Items).To(HaveLen(1 + workers))
		for _, hm := range hms.Items {
			cpu, memory := 2, "4Gi"
			if _, ok := hm.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				cpu, memory = 3, "6Gi"
			}
			Expect(hm.Spec.CPU).To(BeEquivalentTo(cpu), hm.Name)
			Expect(hm.Spec.Memory.String()).To(Equal(memory), hm.Name)
		}
		gc := testBed.Guest(namespace, name)
		Expect(gc).NotTo(BeNil())
		nodes := &corev1.NodeList{}
		// The CCM writes a Node's addresses after its providerID, zone and taint.
		Eventually(func(g Gomega) {
			g.Expect(gc.CCMRunning()).To(BeTrue())
			g.Expect(gc.Env.Client.List(ctx, nodes)).To(Succeed())
			g.Expect(nodes.Items).To(HaveLen(1 + workers))
			for _, n := range nodes.Items {
				g.Expect(n.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
				g.Expect(n.Labels).To(HaveKey(corev1.LabelTopologyZone))
				g.Expect(n.Status.Addresses).To(ContainElement(HaveField("Type", corev1.NodeInternalIP)))
				g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", "node.cloudprovider.kubernetes.io/uninitialized")))
			}
		}).Should(Succeed())

		By("the addons' pods are placed by the guest's scheduler and run: the CCM on the control-plane node, kube-vip and the CSI node plugin on every node")
		cpNode := ""
		for _, n := range nodes.Items {
			if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
				cpNode = n.Name
			}
		}
		Expect(cpNode).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			g.Expect(guestPods(g, gc, "harvester-cloud-controller-manager")).To(ConsistOf(And(
				HaveField("Spec.NodeName", cpNode), HaveField("Status.Phase", corev1.PodRunning))))
			expectNodeAddonsOnEveryNode(g, gc, 1+workers)
		}).Should(Succeed())

		By("cloud-init's own schema check passes the user data of every VM (kubeadm's cloud-config under ours)")
		Expect(expectValidUserDataOf(target, name)).To(Equal(1 + workers))

		By("the template's CNI reached the guest through its ClusterResourceSet")
		Eventually(func(g Gomega) {
			g.Expect(gc.Env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-flannel", Name: "kube-flannel-ds"}, &appsv1.DaemonSet{})).To(Succeed())
		}).Should(Succeed())

		if whole {
			By("a failed worker of the default two is replaced by the template's MachineHealthCheck (its timeouts shortened)")
			remediatesAFailedWorker(namespace, name, target, gc, workers)

			By("scaling the workers to three with docs/operations.md's commands")
			runDocumentedOnManagement("operations.md", "scale-workers", "NAMESPACE="+namespace, "CLUSTER="+name)
			workers = 3
			waitProgressing("the third worker's Node", state, func(g Gomega) {
				nodes := &corev1.NodeList{}
				g.Expect(gc.Env.Client.List(ctx, nodes)).To(Succeed())
				g.Expect(nodes.Items).To(HaveLen(1 + workers))
			})
		}

		if !whole {
			By("CAPI's topology controller made the ClusterClass's health checks: the control plane's, and the workers' at half the pool")
			Eventually(func(g Gomega) {
				mhcs := &clusterv1.MachineHealthCheckList{}
				g.Expect(mgmt().List(ctx, mhcs, client.InNamespace(namespace))).To(Succeed())
				controlPlane, workerPools := 0, 0
				for _, m := range mhcs.Items {
					if m.Spec.ClusterName != name {
						continue
					}
					g.Expect(m.Spec.Checks.NodeStartupTimeoutSeconds).To(Equal(ptr.To[int32](600)), m.Name)
					g.Expect(m.Spec.Checks.UnhealthyNodeConditions).To(ConsistOf(
						And(HaveField("Status", corev1.ConditionUnknown), HaveField("TimeoutSeconds", ptr.To[int32](300))),
						And(HaveField("Status", corev1.ConditionFalse), HaveField("TimeoutSeconds", ptr.To[int32](300))),
					), m.Name)
					if _, ok := m.Spec.Selector.MatchLabels[clusterv1.MachineControlPlaneLabel]; ok {
						controlPlane++
						g.Expect(m.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo).To(BeNil(), m.Name)
						continue
					}
					workerPools++
					g.Expect(m.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo).To(Equal(ptr.To(intstr.FromString("50%"))), m.Name)
				}
				g.Expect([]int{controlPlane, workerPools}).To(Equal([]int{1, 1}))
			}).Should(Succeed())

			By("docs/operations.md's topology upgrade from Git (the version and the image variable at once, the Cluster's file applied again) replaces the control-plane machine, then the worker, each once")
			upgradesTheTopology(namespace, name, target, workers, "v1.35.5", "default/ubuntu-2404-kube-v1.35.5", func(version, image string) {
				upgraded := maps.Clone(variables)
				upgraded["KUBERNETES_VERSION"], upgraded["HARVESTER_IMAGE"] = version, image
				manifest, err := templates.Render(files[len(files)-1], upgraded)
				Expect(err).NotTo(HaveOccurred())
				applyFromGit(mgmt(), manifest)
			})
			By("docs/operations.md's topology upgrade with its commands, the same again to the next patch release")
			upgradesTheTopology(namespace, name, target, workers, "v1.35.6", "default/ubuntu-2404-kube-v1.35.6", func(version, image string) {
				runDocumentedOnManagement("operations.md", "upgrade-topology",
					"NAMESPACE="+namespace, "CLUSTER="+name, "VERSION="+version, "IMAGE="+image)
			})

			By("deleting the Cluster removes everything on Harvester")
			Expect(mgmt().Delete(ctx, cluster)).To(Succeed())
			clusterGone(mgmt(), namespace, name)
			leakFree(target)
			Eventually(gc.CCMRunning).Should(BeFalse(), "the CCM's pod has no node left to run on")
			return
		}

		By("a rollout of the CCM Deployment completes on its one eligible node: the old pod makes way for the new (host port 10258)")
		deploy := &appsv1.Deployment{}
		Expect(gc.Env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "harvester-cloud-controller-manager"}, deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.Containers[0].Ports).To(ContainElement(HaveField("HostPort", int32(10258))))
		oldPods := guestPods(Default, gc, "harvester-cloud-controller-manager")
		if deploy.Spec.Template.Annotations == nil {
			deploy.Spec.Template.Annotations = map[string]string{}
		}
		deploy.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
		Expect(gc.Env.Client.Update(ctx, deploy)).To(Succeed())
		rollout := func() string {
			pods := &corev1.PodList{}
			if err := gc.Env.Client.List(ctx, pods, client.MatchingLabels{"app.kubernetes.io/name": "harvester-cloud-controller-manager"}); err != nil {
				return err.Error()
			}
			st := deploy.Status
			out := fmt.Sprintf("deployment generation %d observed %d, %d replicas, %d updated, %d available", deploy.Generation, st.ObservedGeneration,
				st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
			for _, p := range pods.Items {
				out += fmt.Sprintf("; pod %s %s on %q deleting %v", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil)
			}
			return out
		}
		waitProgressing("the CCM's rollout", rollout, func(g Gomega) {
			g.Expect(gc.Env.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Status.ObservedGeneration).To(Equal(deploy.Generation))
			g.Expect(deploy.Status.UpdatedReplicas).To(Equal(int32(1)))
			g.Expect(deploy.Status.AvailableReplicas).To(Equal(int32(1)))
			g.Expect(deploy.Status.Replicas).To(Equal(int32(1)))
			pods := guestPods(g, gc, "harvester-cloud-controller-manager")
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].UID).NotTo(Equal(oldPods[0].UID))
			g.Expect(gc.CCMErr()).NotTo(HaveOccurred())
			g.Expect(gc.CCMRunning()).To(BeTrue())
		})

		By("a Service of type LoadBalancer in the guest gets a Harvester address from our CCM")
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		Expect(gc.Env.Client.Create(ctx, svc)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(gc.Env.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
			g.Expect(svc.Status.LoadBalancer.Ingress).To(HaveLen(1))
			g.Expect(svc.Status.LoadBalancer.Ingress[0].IP).To(HavePrefix("127.77.0."))
			g.Expect(svc.Annotations).To(HaveKeyWithValue(guestcloud.AnnotationKubeVIPLoadBalancerIPs, svc.Status.LoadBalancer.Ingress[0].IP))
		}).Should(Succeed())

		By("the volumes the guest's CSI driver makes on Harvester are recorded while the guest lives (reclaim policy Delete only)")
		// As the Harvester CSI driver provisions: a claim in the target namespace named after the
		// guest's PersistentVolume, which names it as its volume handle.
		deleted, retained := "pvc-"+string(uuid.NewUUID()), "pvc-"+string(uuid.NewUUID())
		for name, policy := range map[string]corev1.PersistentVolumeReclaimPolicy{deleted: corev1.PersistentVolumeReclaimDelete, retained: corev1.PersistentVolumeReclaimRetain} {
			Expect(harvesterClient().Create(ctx, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: name},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To("harvester-longhorn"),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			})).To(Succeed())
			Expect(gc.Env.Client.Create(ctx, &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: policy,
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
						Driver: controllers.CSIDriverName, VolumeHandle: name,
					}},
				},
			})).To(Succeed())
		}
		hc := &infrav1.HarvesterCluster{}
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster.Spec.InfrastructureRef.Name}, hc)).To(Succeed())
			g.Expect(hc.Status.GuestVolumes).To(Equal([]string{deleted}))
		}).Should(Succeed())

		By("no secret of the lifecycle reaches a log, an event or a condition")
		secrets := newSecretWatch()
		kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		secrets.addKubeconfig("the identity kubeconfig", kubeconfig)
		Eventually(func(g Gomega) { secrets.snapshot(g, namespace, name) }).Should(Succeed())

		By("deleting the Cluster with docs/operations.md's commands removes everything on Harvester, the guest Service's load balancer too")
		runDocumentedOnManagement("operations.md", "delete-cluster", "NAMESPACE="+namespace, "CLUSTER="+name)
		clusterGone(mgmt(), namespace, name)
		By("the guest's volume with reclaim policy Delete went with the cluster; the one that says Retain stays")
		Eventually(func() bool {
			return apierrors.IsNotFound(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: deleted}, &corev1.PersistentVolumeClaim{}))
		}).Should(BeTrue())
		kept := &corev1.PersistentVolumeClaim{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: retained}, kept)).To(Succeed())
		Expect(kept.DeletionTimestamp).To(BeNil())
		Expect(harvesterClient().Delete(ctx, kept)).To(Succeed())
		leakFree(target)
		Eventually(gc.CCMRunning).Should(BeFalse(), "the CCM's pod has no node left to run on")
		secrets.expectNoneIn(namespace)
	},
		Entry("kubeadm flavour", "kubeadm", "kc", "127.77.0.10", "127.77.0.19", true, "cluster-template.yaml"),
		// At full size only (make test-full): the kubeadm flavour runs the same providers in make test.
		Entry("topology flavour (ClusterClass harvester)", Label(fullOnly), "topology", "tc", "127.77.0.20", "127.77.0.29", false,
			"clusterclass-harvester.yaml", "cluster-template-topology.yaml"),
	)
})

// guestPods lists a guest's pods of one app (app.kubernetes.io/name).
func guestPods(g Gomega, gc *guest.Cluster, app string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(gc.Env.Client.List(ctx, pods, client.MatchingLabels{"app.kubernetes.io/name": app})).To(Succeed())
	return pods.Items
}

// expectNodeAddonsOnEveryNode checks that kube-vip's and the CSI driver's pods run on each of
// the guest's nodes.
func expectNodeAddonsOnEveryNode(g Gomega, gc *guest.Cluster, nodes int) {
	for _, app := range []string{"kube-vip", "harvester-csi-driver"} {
		onNodes := map[string]bool{}
		for _, p := range guestPods(g, gc, app) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			onNodes[p.Spec.NodeName] = true
		}
		g.Expect(onNodes).To(HaveLen(nodes), "%s pods on every node", app)
	}
}

// remediatesAFailedWorker stops one worker's VM on Harvester, as a failed host or guest would:
// its Node goes Unknown, and the cluster template's MachineHealthCheck for the workers, with only
// its timeouts shortened to fit a test, replaces the machine; the pool is whole again.
func remediatesAFailedWorker(namespace, name, target string, gc *guest.Cluster, workers int) {
	GinkgoHelper()
	mhc := &clusterv1.MachineHealthCheck{}
	Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-md-0"}, mhc)).To(Succeed())
	base := mhc.DeepCopy()
	for i := range mhc.Spec.Checks.UnhealthyNodeConditions {
		mhc.Spec.Checks.UnhealthyNodeConditions[i].TimeoutSeconds = ptr.To[int32](1)
	}
	Expect(mgmt().Patch(ctx, mhc, client.MergeFrom(base))).To(Succeed())

	machines := &clusterv1.MachineList{}
	Expect(mgmt().List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: name + "-md-0"})).To(Succeed())
	Expect(machines.Items).To(HaveLen(workers))
	failed := machines.Items[0]
	vm := &kubevirtv1.VirtualMachine{}
	Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: naming.VMName(failed.Spec.InfrastructureRef.Name)}, vm)).To(Succeed())
	base2 := vm.DeepCopy()
	vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
	vm.Spec.Running = nil
	Expect(harvesterClient().Patch(ctx, vm, client.MergeFrom(base2))).To(Succeed())

	waitProgressing("the failed worker replaced", clusterState(mgmt(), namespace, name), func(g Gomega) {
		g.Expect(mgmt().List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: name + "-md-0"})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(workers))
		for _, m := range machines.Items {
			g.Expect(m.Name).NotTo(Equal(failed.Name), "the failed machine is replaced")
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", m.Name)
		}
		nodes := &corev1.NodeList{}
		g.Expect(gc.Env.Client.List(ctx, nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(1 + workers))
	})
}

// upgradesTheTopology runs a topology upgrade (upgrade: docs/operations.md's, from Git or with its
// commands, to version and an image with it) and checks that CAPI's topology controller replaced
// every machine once: the control plane first, then the workers, which it holds back with their
// new image until the control plane is done (so they roll out once, not for the image and again
// for the version).
func upgradesTheTopology(namespace, name, target string, workers int, version, image string, upgrade func(version, image string)) {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(testBed.Harvester.AddImage(ctx, "default", strings.TrimPrefix(image, "default/"), true))).To(Succeed())
	list := func() ([]clusterv1.Machine, error) {
		machines := &clusterv1.MachineList{}
		err := mgmt().List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})
		return machines.Items, err
	}
	before, err := list()
	Expect(err).NotTo(HaveOccurred())
	Expect(before).To(HaveLen(1 + workers))

	// Every worker Machine that exists while the upgrade goes on: a rollout for the image and
	// another for the version would make two new ones.
	var mu sync.Mutex
	seenWorkers := map[string]bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if machines, err := list(); err == nil {
				mu.Lock()
				for _, m := range machines {
					if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; !cp {
						seenWorkers[m.Name] = true
					}
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	stopWatching := sync.OnceFunc(func() { close(stop); <-done })
	defer stopWatching()
	start := time.Now()
	upgrade(version, image)

	old := map[string]bool{}
	for _, m := range before {
		old[m.Name] = true
	}
	// The block's last wait is for the MachineDeployments to have rolled out; the Machines'
	// node information follows their Nodes.
	waitProgressing("the upgraded machines' Nodes and a healthy etcd", clusterState(mgmt(), namespace, name), func(g Gomega) {
		after, err := list()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(after).To(HaveLen(1 + workers))
		for _, m := range after {
			g.Expect(old).NotTo(HaveKey(m.Name), "machine %s was kept", m.Name)
			g.Expect(m.Spec.Version).To(Equal(version), "machine %s", m.Name)
			g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "machine %s", m.Name)
			g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(version), "machine %s's Node", m.Name)
			hm := &infrav1.HarvesterMachine{}
			g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.InfrastructureRef.Name}, hm)).To(Succeed())
			g.Expect(hm.Spec.Disks[0].Image).To(Equal(image), "machine %s", m.Name)
			vm := &kubevirtv1.VirtualMachine{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: naming.VMName(hm.Name)}, vm)).To(Succeed())
			g.Expect(vm.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationVolumeClaimTemplates,
				ContainSubstring(`"`+harvestersim.AnnotationImageID+`":"`+image+`"`)), "machine %s's VM", m.Name)
		}
		kcps := &controlplanev1.KubeadmControlPlaneList{}
		g.Expect(mgmt().List(ctx, kcps, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
		g.Expect(kcps.Items).To(HaveLen(1))
		kcp := &kcps.Items[0]
		g.Expect(kcp.Status.Version).To(Equal(version))
		// KCP checked the stacked etcd before and after the swap, and finds it healthy.
		g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition)).To(BeTrue(),
			"%v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition))
	})
	// Watched until the end state: an upgrade from Git returns once applied, before the rollout.
	stopWatching()
	GinkgoWriter.Printf("topology upgrade: %d machines replaced in %s\n", 1+workers, time.Since(start).Round(time.Second))
	mu.Lock()
	defer mu.Unlock()
	Expect(seenWorkers).To(HaveLen(2*workers), "each worker replaced once: %v", seenWorkers)
}
