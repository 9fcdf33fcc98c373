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
	"maps"
	"os"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// In-place updates (docs/in-place-updates.md) need CAPI's InPlaceUpdates and RuntimeSDK gates,
// which are process-wide: this scenario runs go.mod's CAPI (core, kubeadm bootstrap and control
// plane) as its own processes with them on, in a management cluster of its own, with our shipped
// manager installed with EXP_IN_PLACE_UPDATES=true and the release's ExtensionConfig applied.
// Every other scenario runs with the gates off, as clusterctl installs CAPI by default: there
// every template change rolls out, as before.
var _ = Describe("in-place updates", func() {
	It("with CAPI's in-place gates and the extension registered, grows the CPUs, memory and disks of a MachineDeployment's and the CPUs of a KubeadmControlPlane's machines in place (but those pinned to a one-host failure domain), and still rolls out a Kubernetes upgrade (docs/operations.md)", func() {
		opts := providerOptions
		opts.Variables = maps.Clone(opts.Variables)
		if opts.Variables == nil {
			opts.Variables = map[string]string{}
		}
		opts.Variables["EXP_IN_PLACE_UPDATES"] = "true"
		m, err := testBed.AddManagementOnCAPI(ctx, bed.InPlaceUpdatesCAPI, opts)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, m)).To(Succeed()) })
		c := m.Env.Client
		const namespace, name = "inplace", "inplace"
		DeferCleanup(func() {
			if !CurrentSpecReport().Failed() {
				return
			}
			if capi, err := m.StartCAPIProviders(ctx, bed.InPlaceUpdatesCAPI); err == nil {
				for part, log := range capi.Logs() {
					GinkgoWriter.Printf("--- CAPI %s manager log (tail) ---\n%s\n", part, lastLines(log, 60))
				}
			}
			if log, err := os.ReadFile(m.Provider.LogFile); err == nil {
				GinkgoWriter.Printf("--- our manager's log there (tail) ---\n%s\n", lastLines(string(log), 80))
			}
			GinkgoWriter.Printf("--- where the cluster stands ---\n%s\n%s", describeClusterIn(c, namespace, name), describeMachinesIn(c, namespace, name))
			vmis := &kubevirtv1.VirtualMachineInstanceList{}
			if err := harvesterClient().List(ctx, vmis, client.InNamespace("h-"+namespace)); err == nil {
				for _, vmi := range vmis.Items {
					GinkgoWriter.Printf("VMI %s on %s: topology %+v conditions %+v migration %+v\n", vmi.Name, vmi.Status.NodeName, vmi.Status.CurrentCPUTopology, vmi.Status.Conditions, vmi.Status.MigrationState)
				}
			}
			migrations := &kubevirtv1.VirtualMachineInstanceMigrationList{}
			if err := harvesterClient().List(ctx, migrations, client.InNamespace("h-"+namespace)); err == nil {
				for _, mig := range migrations.Items {
					GinkgoWriter.Printf("migration %s of %s: %s %+v\n", mig.Name, mig.Spec.VMIName, mig.Status.Phase, mig.Status.Conditions)
				}
			}
			pods := &corev1.PodList{}
			if err := harvesterClient().List(ctx, pods, client.InNamespace("h-"+namespace)); err == nil {
				for _, pod := range pods.Items {
					if pod.Status.Phase != corev1.PodRunning {
						GinkgoWriter.Printf("pod %s: %s %+v\n", pod.Name, pod.Status.Phase, pod.Status.Conditions)
					}
				}
			}
		})
		Expect(m.Provider.Args).To(ContainElement("--in-place-updates=true"), "EXP_IN_PLACE_UPDATES turned the manager's flag on")

		By("CAPI discovers the extension's three hooks from the release's ExtensionConfig, with the CA it injected from the certificate's Secret")
		unregister, err := m.Provider.ApplyExtensionConfigFile(ctx, "config/inplace/extensionconfig.yaml")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(unregister)
		Eventually(func(g Gomega) {
			ext := &unstructured.Unstructured{}
			ext.SetAPIVersion("runtime.cluster.x-k8s.io/v1beta2")
			ext.SetKind("ExtensionConfig")
			g.Expect(c.Get(ctx, client.ObjectKey{Name: "harvester-in-place-updates"}, ext)).To(Succeed())
			ca, _, _ := unstructured.NestedString(ext.Object, "spec", "clientConfig", "caBundle")
			g.Expect(ca).NotTo(BeEmpty(), "CAPI injected the CA")
			handlers, _, _ := unstructured.NestedSlice(ext.Object, "status", "handlers")
			var hooks []string
			for _, h := range handlers {
				hook, _, _ := unstructured.NestedString(h.(map[string]any), "requestHook", "hook")
				hooks = append(hooks, hook)
			}
			g.Expect(hooks).To(ConsistOf("CanUpdateMachine", "CanUpdateMachineSet", "UpdateMachine"))
		}).Should(Succeed())

		By("a kubeadm cluster of 3 control-plane machines (KCP with maxSurge 0, which in-place needs, and the template's stacked etcd) and a worker (maxSurge 0, maxUnavailable 1), all made with maxCPU 4 and maxMemory 8Gi")
		target := "h-" + namespace
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
		Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: "loopback-" + namespace, Subnet: "127.77.0.0/24", RangeStart: "127.77.0.70", RangeEnd: "127.77.0.79",
			Namespace: target, Priority: testBed.Harvester.UniquePriority(),
		})).To(Succeed())
		// The image a Kubernetes upgrade boots: the bed's guests report the kubelet version its
		// name carries, as a real image's kubelet would its own.
		Expect(client.IgnoreAlreadyExists(testBed.Harvester.AddImage(ctx, "default", "ubuntu-2404-kube-v1.35.5", true))).To(Succeed())
		Expect(testBed.LendIdentityIn(ctx, m, namespace, namespace, target)).To(Succeed())
		manifest, err := templates.Render("cluster-template.yaml", map[string]string{
			"CLUSTER_NAME": name, "NAMESPACE": namespace, "KUBERNETES_VERSION": "v1.35.4", "HARVESTER_IDENTITY": namespace, "HARVESTER_NAMESPACE": target,
			"HARVESTER_NETWORK": "default/vlan20", "HARVESTER_IMAGE": "default/ubuntu-24.04", "HARVESTER_SSH_KEYPAIRS": "[default/ops]",
			"CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "1",
		})
		Expect(err).NotTo(HaveOccurred())
		objs, err := testenv.DecodeObjects(manifest)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			switch o.GetKind() {
			case "HarvesterMachineTemplate":
				Expect(unstructured.SetNestedField(o.Object, int64(4), "spec", "template", "spec", "maxCPU")).To(Succeed())
				Expect(unstructured.SetNestedField(o.Object, "8Gi", "spec", "template", "spec", "maxMemory")).To(Succeed())
			case "MachineDeployment":
				// An in-place update makes a machine unavailable for a while: with the default
				// maxUnavailable 0 CAPI surges new machines instead (docs/in-place-updates.md).
				Expect(unstructured.SetNestedField(o.Object, int64(0), "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")).To(Succeed())
				Expect(unstructured.SetNestedField(o.Object, int64(1), "spec", "rollout", "strategy", "rollingUpdate", "maxUnavailable")).To(Succeed())
			case "KubeadmControlPlane":
				Expect(unstructured.SetNestedField(o.Object, int64(0), "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")).To(Succeed())
			}
			Expect(c.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetKind(), o.GetName())
		}

		machines := func(g Gomega) map[string]clusterv1.Machine {
			list := &clusterv1.MachineList{}
			g.Expect(c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
			out := map[string]clusterv1.Machine{}
			for _, m := range list.Items {
				out[m.Name] = m
			}
			return out
		}
		harvesterMachine := func(g Gomega, m clusterv1.Machine) *infrav1.HarvesterMachine {
			hm := &infrav1.HarvesterMachine{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.InfrastructureRef.Name}, hm)).To(Succeed())
			return hm
		}
		vmiSockets := func(g Gomega, hm *infrav1.HarvesterMachine) uint32 {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: hm.Status.VirtualMachine.Name}, vmi)).To(Succeed())
			g.Expect(vmi.Status.CurrentCPUTopology).NotTo(BeNil())
			return vmi.Status.CurrentCPUTopology.Sockets
		}
		isWorker := func(m clusterv1.Machine) bool { _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; return !cp }
		ready := func(g Gomega, want int) map[string]clusterv1.Machine {
			all := machines(g)
			g.Expect(all).To(HaveLen(want))
			for _, m := range all {
				g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "machine %s is being deleted", m.Name)
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", m.Name)
				g.Expect(conditions.IsTrue(&m, clusterv1.MachineUpToDateCondition)).To(BeTrue(), "machine %s: %+v", m.Name, conditions.Get(&m, clusterv1.MachineUpToDateCondition))
				g.Expect(m.Annotations).NotTo(HaveKey(clusterv1.UpdateInProgressAnnotation), "machine %s", m.Name)
			}
			return all
		}
		var before map[string]clusterv1.Machine
		state := clusterState(c, namespace, name)
		waitProgressing("four machines up to date with their Nodes", state, func(g Gomega) { before = ready(g, 4) })

		// seen records every Machine name while a change goes on: an in-place update makes none.
		seen := map[string]bool{}
		watchNames := func(g Gomega) map[string]clusterv1.Machine {
			all := machines(g)
			for n := range all {
				seen[n] = true
			}
			return all
		}
		newTemplate := func(from, to string, mutate func(*infrav1.HarvesterMachineSpec)) {
			t := &infrav1.HarvesterMachineTemplate{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: from}, t)).To(Succeed())
			next := &infrav1.HarvesterMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: to}, Spec: *t.Spec.DeepCopy()}
			mutate(&next.Spec.Template.Spec)
			Expect(c.Create(ctx, next)).To(Succeed())
		}
		pointWorkersAt := func(template string) {
			md := &clusterv1.MachineDeployment{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-md-0"}, md)).To(Succeed())
			base := md.DeepCopy()
			md.Spec.Template.Spec.InfrastructureRef.Name = template
			Expect(c.Patch(ctx, md, client.MergeFrom(base))).To(Succeed())
		}

		By("workers: a new template with 3 CPUs, 6Gi and a root disk 10Gi bigger: the same Machines, VMs, providerIDs and Nodes, their VMIs and volumes grown")
		var rootDisk resource.Quantity
		newTemplate(name+"-md-0", name+"-md-0-bigger", func(s *infrav1.HarvesterMachineSpec) {
			s.CPU, s.Memory = 3, resource.MustParse("6Gi")
			s.Disks[0].Size.Add(resource.MustParse("10Gi"))
			rootDisk = s.Disks[0].Size.DeepCopy()
		})
		start := time.Now()
		pointWorkersAt(name + "-md-0-bigger")
		waitProgressing("the worker grown in place", state, func(g Gomega) {
			watchNames(g)
			after := ready(g, 4)
			for n, m := range before {
				g.Expect(after).To(HaveKey(n))
				g.Expect(after[n].Spec.ProviderID).To(Equal(m.Spec.ProviderID), "machine %s", n)
				g.Expect(after[n].Status.NodeRef.Name).To(Equal(m.Status.NodeRef.Name), "machine %s", n)
				if !isWorker(m) {
					continue
				}
				hm := harvesterMachine(g, after[n])
				g.Expect(hm.Spec.CPU).To(Equal(int32(3)), "machine %s", n)
				g.Expect(hm.Spec.Memory.String()).To(Equal("6Gi"), "machine %s", n)
				g.Expect(conditions.IsTrue(hm, infrav1.ResourcesUpToDateCondition)).To(BeTrue(), "machine %s: %+v", n, conditions.Get(hm, infrav1.ResourcesUpToDateCondition))
				g.Expect(vmiSockets(g, hm)).To(Equal(uint32(3)), "machine %s", n)
				g.Expect(hm.Annotations[clusterv1.TemplateClonedFromNameAnnotation]).To(Equal(name+"-md-0-bigger"), "machine %s", n)
				pvc := &corev1.PersistentVolumeClaim{}
				g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: build.ClaimName(hm, hm.Spec.DiskName(0))}, pvc)).To(Succeed())
				g.Expect(pvc.Status.Capacity.Storage().Equal(rootDisk)).To(BeTrue(), "machine %s's root volume has %s", n, pvc.Status.Capacity.Storage())
			}
		})
		GinkgoWriter.Printf("in place: the worker grown (CPUs, memory, root disk) in %s\n", time.Since(start).Round(time.Second))
		Expect(slices.Sorted(maps.Keys(seen))).To(Equal(slices.Sorted(maps.Keys(before))), "no Machine was made")

		By("control plane: a new template with 3 CPUs: KCP updates its machines in zone-a (two hosts) in place, one at a time, and replaces those in zone-b (one host: a VM there cannot migrate, which KubeVirt's resize needs)")
		kcp := &unstructured.Unstructured{}
		kcp.SetAPIVersion("controlplane.cluster.x-k8s.io/v1beta2")
		kcp.SetKind("KubeadmControlPlane")
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, kcp)).To(Succeed())
		cpTemplate, _, _ := unstructured.NestedString(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "name")
		newTemplate(cpTemplate, cpTemplate+"-bigger", func(s *infrav1.HarvesterMachineSpec) { s.CPU = 3 })
		inPlace, replaced := 0, 0
		for _, m := range before {
			switch {
			case isWorker(m):
			case m.Spec.FailureDomain == "zone-b":
				replaced++
			default:
				Expect(m.Spec.FailureDomain).To(Equal("zone-a"), "machine %s", m.Name)
				inPlace++
			}
		}
		Expect(inPlace).To(BeNumerically(">", 0), "KCP spread its machines over both zones")
		Expect(replaced).To(BeNumerically(">", 0), "KCP spread its machines over both zones")
		base := kcp.DeepCopy()
		Expect(unstructured.SetNestedField(kcp.Object, cpTemplate+"-bigger", "spec", "machineTemplate", "spec", "infrastructureRef", "name")).To(Succeed())
		Expect(c.Patch(ctx, kcp, client.MergeFrom(base))).To(Succeed())
		start = time.Now()
		waitProgressing("the control plane grown in place in zone-a and replaced in zone-b", state, func(g Gomega) {
			watchNames(g)
			after := ready(g, 4)
			controlPlane := 0
			for n, m := range after {
				if isWorker(m) {
					continue
				}
				controlPlane++
				hm := harvesterMachine(g, m)
				g.Expect(hm.Spec.CPU).To(Equal(int32(3)), "machine %s", n)
				g.Expect(conditions.IsTrue(hm, infrav1.ResourcesUpToDateCondition)).To(BeTrue(), "machine %s", n)
				g.Expect(vmiSockets(g, hm)).To(Equal(uint32(3)), "machine %s", n)
			}
			g.Expect(controlPlane).To(Equal(3))
			for n, m := range before {
				switch {
				case isWorker(m):
				case m.Spec.FailureDomain == "zone-b":
					g.Expect(after).NotTo(HaveKey(n), "machine %s in zone-b was kept", n)
				default:
					g.Expect(after).To(HaveKey(n))
					g.Expect(after[n].Spec.ProviderID).To(Equal(m.Spec.ProviderID), "machine %s", n)
					g.Expect(after[n].Status.NodeRef.Name).To(Equal(m.Status.NodeRef.Name), "machine %s", n)
				}
			}
		})
		GinkgoWriter.Printf("control plane: %d machines grown in place, %d replaced, in %s\n", inPlace, replaced, time.Since(start).Round(time.Second))
		Expect(seen).To(HaveLen(len(before)+replaced), "a new Machine for each replaced one, none for the others")

		// At full size only (make test-full): in make test, the RKE2 spec runs operations.md's
		// upgrade of its distribution, and deletion_test and the rest of this spec replace
		// machines.
		if testenv.Full() {
			By("docs/operations.md: a Kubernetes upgrade (a new version and image) replaces the control-plane machines, then the workers")
			const version, image = "v1.35.5", "default/ubuntu-2404-kube-v1.35.5"

			Eventually(func(g Gomega) { before = ready(g, 4) }).Should(Succeed())
			start := time.Now()
			runDocumentedOnManagementOf(m, "operations.md", "upgrade-kubeadm",
				"NAMESPACE="+namespace, "CLUSTER="+name, "VERSION="+version, "IMAGE="+image)
			waitProgressing("every machine replaced at "+version, state, func(g Gomega) {
				after := ready(g, 4)
				for n, m := range after {
					g.Expect(before).NotTo(HaveKey(n), "machine %s was kept", n)
					g.Expect(m.Spec.Version).To(Equal(version), "machine %s", n)
					g.Expect(m.Status.NodeInfo).NotTo(BeNil(), "machine %s", n)
					g.Expect(m.Status.NodeInfo.KubeletVersion).To(Equal(version), "machine %s's Node", n)
					hm := harvesterMachine(g, m)
					g.Expect(hm.Spec.Disks[0].Image).To(Equal(image), "machine %s", n)
					vm := &kubevirtv1.VirtualMachine{}
					g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: hm.Name}, vm)).To(Succeed())
					g.Expect(vm.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationVolumeClaimTemplates, ContainSubstring(`"`+harvestersim.AnnotationImageID+`":"`+image+`"`)), "machine %s's VM", n)
				}
			})
			GinkgoWriter.Printf("Kubernetes upgrade: 3 control-plane machines and the worker replaced in %s\n", time.Since(start).Round(time.Second))
		}

		// At full size only (make test-full): KCP's remediation of a control-plane machine is
		// Cluster API's; in make test, kubeadm_test's MachineHealthCheck replaces a worker whose
		// VM failed.
		if testenv.Full() {
			// KCP checked the stacked etcd through the guest's port-forward before each change, and
			// removed each replaced machine's member: it finds one healthy member per machine. (Its
			// remediation below needs that health to begin.)
			waitProgressing("a healthy etcd member per control-plane machine", state, func(g Gomega) {
				kcp := &controlplanev1.KubeadmControlPlane{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, kcp)).To(Succeed())
				g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition)).To(BeTrue(),
					"%v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition))
				cps := 0
				for n, m := range machines(g) {
					if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
						cps++
						g.Expect(conditions.IsTrue(&m, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition)).To(BeTrue(),
							"machine %s: %v", n, conditions.Get(&m, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition))
					}
				}
				g.Expect(cps).To(Equal(3))
			})

			By("a failed control-plane machine: the template's MachineHealthCheck (timeouts shortened) marks it, KCP removes its etcd member and replaces it")
			mhc := &clusterv1.MachineHealthCheck{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, mhc)).To(Succeed())
			mhcBase := mhc.DeepCopy()
			for i := range mhc.Spec.Checks.UnhealthyNodeConditions {
				mhc.Spec.Checks.UnhealthyNodeConditions[i].TimeoutSeconds = ptr.To[int32](1)
			}
			Expect(c.Patch(ctx, mhc, client.MergeFrom(mhcBase))).To(Succeed())
			Eventually(func(g Gomega) { before = ready(g, 4) }).Should(Succeed())
			var failed clusterv1.Machine
			for _, m := range before {
				if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
					failed = m
					break
				}
			}
			vm := &kubevirtv1.VirtualMachine{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: harvesterMachine(Default, failed).Name}, vm)).To(Succeed())
			vmBase := vm.DeepCopy()
			vm.Spec.RunStrategy, vm.Spec.Running = ptr.To(kubevirtv1.RunStrategyHalted), nil
			Expect(harvesterClient().Patch(ctx, vm, client.MergeFrom(vmBase))).To(Succeed())
			start = time.Now()
			waitProgressing("the failed control-plane machine replaced", state, func(g Gomega) {
				after := ready(g, 4)
				g.Expect(after).NotTo(HaveKey(failed.Name), "the failed machine is replaced")
				kcp := &controlplanev1.KubeadmControlPlane{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, kcp)).To(Succeed())
				// Healthy means one member per machine: the failed machine's member was removed.
				g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition)).To(BeTrue(),
					"%v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition))
			})
			GinkgoWriter.Printf("control-plane remediation: replaced in %s\n", time.Since(start).Round(time.Second))
		}

		By("deleting the Cluster removes everything on Harvester")
		cluster := &clusterv1.Cluster{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		Expect(c.Delete(ctx, cluster)).To(Succeed())
		clusterGone(c, namespace, name)
		leakFree(target)
	})
})
