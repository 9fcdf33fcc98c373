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

package transport

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

var (
	cachedGuest   = naming.Guest{Namespace: "default", Name: "demo", Mark: "0123456789"}
	cachedMachine = &infrav1.HarvesterMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-md-0-7c9f8-x2kqz", UID: "5f0c6a0e-1b2c-4d5e-8f90-0123456789ab"},
		Spec: infrav1.HarvesterMachineSpec{CPU: 2, MaxCPU: 8, Memory: resource.MustParse("4Gi"), MaxMemory: ptr.To(resource.MustParse("16Gi")),
			DedicatedCPUPlacement: true,
			Disks:                 []infrav1.Disk{{Name: "disk-0", StorageClassName: "fast", Size: resource.MustParse("10Gi")}},
			Networks:              []infrav1.Network{{Name: "nic-0", NetworkName: "default/vlan10"}, {Name: "nic-1", NetworkName: "default/vlan20"}}},
	}
)

// cachedKinds returns one object of each kind a connection's cache holds, as Harvester, KubeVirt
// and the guests' CCMs write them: the machine's VM, VMI and volume, the control-plane load
// balancer and a guest's, and a host.
func cachedKinds(t *testing.T) (vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, pvc *corev1.PersistentVolumeClaim,
	cp, guestLB *lbv1.LoadBalancer, host *corev1.Node) {
	t.Helper()
	created := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	in := &build.VMInput{Machine: cachedMachine, Namespace: "guests", Guest: cachedGuest, Role: naming.RoleWorker, UserDataSecret: "demo-cloudinit"}
	vm, err := build.BuildVM(in)
	if err != nil {
		t.Fatal(err)
	}
	vm.UID, vm.ResourceVersion, vm.CreationTimestamp, vm.Generation = "vm-uid", "41", created, 3
	vm.Finalizers = []string{"kubevirt.io/virtualMachineControllerFinalize"}
	vm.Annotations[naming.AnnotationStoppedForHost] = "host-1"
	vm.Annotations[naming.AnnotationRunStrategyBeforeStop] = string(kubevirtv1.RunStrategyRerunOnFailure)
	vm.Annotations[naming.AnnotationHarvesterRunStrategy] = string(kubevirtv1.RunStrategyRerunOnFailure)
	vm.Status = kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusRunning, Ready: true, Created: true,
		Conditions: []kubevirtv1.VirtualMachineCondition{
			{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionTrue},
			{Type: kubevirtv1.VirtualMachineRestartRequired, Status: corev1.ConditionTrue, Message: "a non-live-updatable field was changed"},
		}}

	template := vm.Spec.Template
	vmi = &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name, UID: "vmi-uid", ResourceVersion: "42", CreationTimestamp: created,
			Labels: template.ObjectMeta.Labels, Annotations: template.ObjectMeta.Annotations, Finalizers: []string{"foregroundDeleteVirtualMachine"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID}}},
		Spec: *template.Spec.DeepCopy(),
		Status: kubevirtv1.VirtualMachineInstanceStatus{
			Phase: kubevirtv1.Running, NodeName: "host-1", EvacuationNodeName: "host-1",
			Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
				{Name: "nic-0", IP: "10.0.0.5", IPs: []string{"10.0.0.5", "fd00::5"}, MAC: "52:54:00:00:00:01", InterfaceName: "eth0", InfoSource: "domain, guest-agent"},
				{Name: "nic-1", IP: "192.168.1.5", IPs: []string{"192.168.1.5"}, InterfaceName: "eth1"},
			},
			Conditions: []kubevirtv1.VirtualMachineInstanceCondition{
				{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue},
				{Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled), Status: corev1.ConditionFalse, Message: "0/3 nodes are available"},
				{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse, Reason: "DisksNotLiveMigratable", Message: "a disk is not shared"},
				{Type: kubevirtv1.VirtualMachineInstanceVCPUChange, Status: corev1.ConditionTrue, Message: "adding sockets"},
				{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue},
			},
			CurrentCPUTopology: &kubevirtv1.CPUTopology{Sockets: 2, Cores: 1, Threads: 1},
			Memory:             &kubevirtv1.MemoryStatus{GuestCurrent: ptr.To(resource.MustParse("4Gi")), GuestAtBoot: ptr.To(resource.MustParse("4Gi"))},
			MigrationState: &kubevirtv1.VirtualMachineInstanceMigrationState{SourceNode: "host-1", TargetNode: "host-2", Failed: true,
				FailureReason: "target pod unschedulable", MigrationUID: "m-uid", TargetPod: "virt-launcher-x"},
			PhaseTransitionTimestamps: []kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{
				{Phase: kubevirtv1.Scheduling, PhaseTransitionTimestamp: created},
				{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: metav1.NewTime(created.Add(time.Minute))},
			},
			GuestOSInfo:  kubevirtv1.VirtualMachineInstanceGuestOSInfo{Name: "Ubuntu", KernelRelease: "6.8.0"},
			VolumeStatus: []kubevirtv1.VolumeStatus{{Name: "disk-0", Target: "vda"}},
		},
	}

	pvc = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: build.ClaimName(cachedMachine, "disk-0"), UID: "pvc-uid", ResourceVersion: "43",
			CreationTimestamp: created, Labels: build.MachineLabels(in),
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", "volume.kubernetes.io/storage-provisioner": "driver.longhorn.io"},
			Finalizers:  []string{"kubernetes.io/pvc-protection"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", StorageClassName: ptr.To("fast"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
	}

	cp = &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: cachedGuest.LoadBalancerName(), UID: "lb-uid", ResourceVersion: "44", CreationTimestamp: created,
			Labels: cachedGuest.Labels(), Annotations: map[string]string{guestcloud.AnnotationLBNetwork: "default/vlan10"},
			Finalizers: []string{guestcloud.FinalizerHarvesterLBController}},
		Spec: lbv1.LoadBalancerSpec{Description: "control plane", WorkloadType: lbv1.VM, IPAM: lbv1.DHCP, IPPool: "pool",
			Listeners: []lbv1.Listener{{Name: "apiserver", Port: 6443, Protocol: corev1.ProtocolTCP, BackendPort: 6443}}},
		Status: lbv1.LoadBalancerStatus{Address: "10.0.0.9", BackendServers: []string{"10.0.0.5"},
			AllocatedAddress: lbv1.AllocatedAddress{IPPool: "pool", IP: "10.0.0.9", Mask: "255.255.255.0", Gateway: "10.0.0.1"},
			Conditions:       []lbv1.Condition{{Type: lbv1.LoadBalancerReady, Status: corev1.ConditionFalse, Reason: "Error", Message: "no running backend servers"}}},
	}
	// A guest's, made by its CCM for a Service, with a pool address Harvester's controller does
	// not guard yet (no finalizer): a cluster's deletion waits before deleting it.
	guestLB = &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "demo-svc", UID: "glb-uid", ResourceVersion: "45", CreationTimestamp: created,
			Labels: map[string]string{guestcloud.LabelLBCluster: guestcloud.LabelValue(cachedGuest.ID()),
				guestcloud.LabelLBServiceNamespace: "web", guestcloud.LabelLBServiceName: "front"}},
		Spec:   lbv1.LoadBalancerSpec{WorkloadType: lbv1.Cluster, IPAM: lbv1.Pool, Description: "web/front"},
		Status: lbv1.LoadBalancerStatus{Address: "10.0.0.10", AllocatedAddress: lbv1.AllocatedAddress{IPPool: "pool", IP: "10.0.0.10"}},
	}

	host = &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "host-1", UID: "node-uid", ResourceVersion: "46", CreationTimestamp: created,
			Labels: map[string]string{build.LabelZone: "zone-a", build.LabelRegion: "eu", HostWitnessLabel: "", build.LabelHostname: "host-1",
				"node-role.kubernetes.io/control-plane": "true"},
			Annotations: map[string]string{"harvesterhci.io/maintain-status": "running", "node.alpha.kubernetes.io/ttl": "0"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: HostDrainTaint, Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}},
	}
	return vm, vmi, pvc, cp, guestLB, host
}

func slim[T any](g Gomega, transform func(any) (any, error), obj T) T {
	out, err := transform(obj)
	g.Expect(err).NotTo(HaveOccurred())
	return out.(T)
}

// What the cache keeps of each kind is what the provider reads of it from the cache: each
// reader (or the fields it reads, for the controllers' own) gets from the kept object what it
// gets from the whole one.
func TestCachedObjectsKeepWhatTheProviderReads(t *testing.T) {
	g := NewWithT(t)
	vm, vmi, pvc, cp, guestLB, host := cachedKinds(t)

	// VM: VMService.Get (ownership), the watches' mapping, host maintenance, resize, the
	// cloud-init Secret's adoption, the provisioning metrics, Observe and observedChange.
	svm := slim(g, slimCached, vm)
	g.Expect(build.OwnedBy(svm.Labels, cachedGuest, cachedMachine)).To(BeTrue())
	ns, name, ok := naming.MachineOf(svm)
	g.Expect([]any{ns, name, ok}).To(Equal([]any{"default", cachedMachine.Name, true}))
	for _, k := range []string{naming.AnnotationStoppedForHost, naming.AnnotationRunStrategyBeforeStop, naming.AnnotationHarvesterRunStrategy} {
		g.Expect(svm.Annotations).To(HaveKeyWithValue(k, vm.Annotations[k]))
	}
	g.Expect([]any{svm.Name, svm.Namespace, svm.UID, svm.ResourceVersion, svm.CreationTimestamp}).To(
		Equal([]any{vm.Name, vm.Namespace, vm.UID, vm.ResourceVersion, vm.CreationTimestamp}))
	g.Expect(svm.Spec.RunStrategy).To(Equal(vm.Spec.RunStrategy))
	g.Expect(svm.Spec.Template.Spec.Domain.CPU.Sockets).To(Equal(vm.Spec.Template.Spec.Domain.CPU.Sockets))
	g.Expect(svm.Spec.Template.Spec.Domain.Memory.Guest).To(Equal(vm.Spec.Template.Spec.Domain.Memory.Guest))
	g.Expect(svm.Spec.Template.Spec.Volumes).To(ConsistOf(kubevirtv1.Volume{Name: infrav1.CloudInitDiskName, VolumeSource: kubevirtv1.VolumeSource{
		CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "demo-cloudinit"}}}},
		kubevirtv1.Volume{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: build.ClaimName(cachedMachine, "disk-0")}}}}))
	g.Expect(build.VolumeClaimOf(svm, cachedMachine, "disk-0")).To(Equal(build.VolumeClaimOf(vm, cachedMachine, "disk-0")))
	// A guest's CSI driver hot-plugs its volumes into the VM: the cache keeps none of them, and no
	// more claims than a machine has disks.
	plugged := vm.DeepCopy()
	for i := range 40 {
		plugged.Spec.Template.Spec.Volumes = append(plugged.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: fmt.Sprintf("pvc-%d", i),
			VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: i%2 == 0,
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("pvc-%d", i)}}}})
	}
	kept := slim(g, slimCached, plugged).Spec.Template.Spec.Volumes
	g.Expect(kept).To(HaveLen(1 + 16))
	for _, v := range kept {
		g.Expect(v.PersistentVolumeClaim == nil || !v.PersistentVolumeClaim.Hotpluggable).To(BeTrue(), v.Name)
	}
	g.Expect(svm.Status.PrintableStatus).To(Equal(vm.Status.PrintableStatus))
	g.Expect(svm.Status.Conditions).To(Equal([]kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineRestartRequired,
		Status: corev1.ConditionTrue, Message: "a non-live-updatable field was changed"}}))
	g.Expect(svm.Finalizers).To(BeNil())
	withoutTemplate := vm.DeepCopy()
	withoutTemplate.Spec.Template = nil
	g.Expect(slim(g, slimCached, withoutTemplate).Spec.Template).To(BeNil(), "a template is kept only when there is one")

	// VMI: the watches' mapping, Observe (phase, host, addresses, why it waits), host
	// maintenance, resize, the metrics, readyFirst and observedChange.
	svmi := slim(g, slimCached, vmi)
	ns, name, ok = naming.MachineOf(svmi)
	g.Expect([]any{ns, name, ok}).To(Equal([]any{"default", cachedMachine.Name, true}))
	networks := build.NetworkNames(&cachedMachine.Spec)
	g.Expect(guestcloud.MachineAddresses(svmi, networks, vmi.Name)).To(Equal(guestcloud.MachineAddresses(vmi, networks, vmi.Name)))
	g.Expect(guestcloud.MachineAddresses(svmi, networks, vmi.Name)).To(HaveLen(4))
	g.Expect(svmi.Spec.Domain.CPU.DedicatedCPUPlacement).To(BeTrue(), "vmiWaitReason says an unschedulable VM's CPUs are pinned")
	g.Expect([]any{svmi.Status.Phase, svmi.Status.NodeName, svmi.Status.EvacuationNodeName}).To(
		Equal([]any{vmi.Status.Phase, vmi.Status.NodeName, vmi.Status.EvacuationNodeName}))
	var read []kubevirtv1.VirtualMachineInstanceCondition
	for _, c := range vmi.Status.Conditions[1:4] {
		read = append(read, kubevirtv1.VirtualMachineInstanceCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	g.Expect(svmi.Status.Conditions).To(Equal(read))
	g.Expect(svmi.Status.CurrentCPUTopology.Sockets).To(Equal(uint32(2)))
	g.Expect(svmi.Status.Memory.GuestCurrent).To(Equal(vmi.Status.Memory.GuestCurrent))
	ms := svmi.Status.MigrationState
	g.Expect([]any{ms.SourceNode, ms.TargetNode, ms.Completed, ms.Failed, ms.FailureReason}).To(Equal([]any{"host-1", "host-2", false, true, "target pod unschedulable"}))
	g.Expect(svmi.Status.PhaseTransitionTimestamps).To(Equal(vmi.Status.PhaseTransitionTimestamps[1:]))
	g.Expect(svmi.UID).To(Equal(vmi.UID))

	// Volume: VMService.cleanup's list of a machine's volumes, volumeToMachine, a disk grown in
	// place (Volume, GrowVolume's lock) and volumeChanged.
	spvc := slim(g, slimCached, pvc)
	cleanup := labels.SelectorFromSet(labels.Set{naming.LabelManagedBy: naming.ManagedByValue, naming.LabelCluster: cachedGuest.ID(),
		naming.LabelMachine: naming.MachineLabelValue(cachedMachine.Name), naming.LabelMachineNamespace: cachedMachine.Namespace})
	g.Expect(cleanup.Matches(labels.Set(spvc.Labels))).To(BeTrue())
	ns, name, ok = naming.MachineOf(spvc)
	g.Expect([]any{ns, name, ok}).To(Equal([]any{"default", naming.MachineLabelValue(cachedMachine.Name), true}))
	g.Expect(spvc.Spec.Resources.Requests).To(Equal(pvc.Spec.Resources.Requests))
	g.Expect(spvc.Status.Capacity).To(Equal(pvc.Status.Capacity))
	g.Expect([]any{spvc.Name, spvc.UID, spvc.ResourceVersion, spvc.DeletionTimestamp}).To(Equal([]any{pvc.Name, pvc.UID, pvc.ResourceVersion, pvc.DeletionTimestamp}))
	g.Expect(spvc.Annotations).To(BeNil())

	// Control-plane load balancer: EnsureControlPlane (ownership, address, what it waits for,
	// DHCP's patience) and loadBalancerToCluster.
	scp := slim(g, slimCached, cp)
	g.Expect(cachedGuest.Owns(scp)).To(BeTrue())
	g.Expect(scp.Labels).To(Equal(cp.Labels))
	g.Expect([]any{scp.Status.Address, scp.Spec.IPAM, scp.CreationTimestamp}).To(Equal([]any{cp.Status.Address, cp.Spec.IPAM, cp.CreationTimestamp}))
	g.Expect(guestcloud.LoadBalancerProblem(scp)).To(Equal("no running backend servers"))
	g.Expect(guestcloud.PoolAddressUnguarded(scp)).To(BeFalse())
	g.Expect(scp.Spec.Listeners).To(BeEmpty())

	// A guest's: DeleteGuest (its list, the pool address's guard, the deletion's preconditions
	// and event) and loadBalancerToCluster.
	sglb := slim(g, slimCached, guestLB)
	g.Expect(sglb.Labels).To(Equal(guestLB.Labels))
	g.Expect(guestcloud.PoolAddressUnguarded(sglb)).To(BeTrue(), "a deletion waits for Harvester's finalizer on a pool address")
	sglb = slim(g, slimCached, &lbv1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"a", guestcloud.FinalizerHarvesterLBController}},
		Status: guestLB.Status})
	g.Expect(guestcloud.PoolAddressUnguarded(sglb)).To(BeFalse())
	g.Expect(sglb.Finalizers).To(Equal([]string{guestcloud.FinalizerHarvesterLBController}))

	// Host: failure domains, a machine's domain and whether its host is being emptied.
	shost := slim(g, slimNode, host)
	g.Expect(shost.Labels).To(Equal(map[string]string{build.LabelZone: "zone-a", build.LabelRegion: "eu", HostWitnessLabel: ""}))
	g.Expect(shost.Annotations).To(Equal(map[string]string{"harvesterhci.io/maintain-status": "running"}))
	g.Expect(shost.Spec.Unschedulable).To(BeTrue())
	g.Expect(shost.Spec.Taints).To(Equal(host.Spec.Taints[:1]))
}

// A guest can write objects the cache holds (volumes carrying the provider's labels, load
// balancers, its VMs' metadata with CSI) and make them as large as the API server takes. Each
// cached kind is stored at a few KiB whatever it carries: 200 KiB of annotations and a hundred
// labels besides what the provider reads, managed fields, finalizers and owners, and 200 KiB in
// an annotation the provider reads, are all left out.
func TestCachedObjectsAreSmallWhateverTheyCarry(t *testing.T) {
	g := NewWithT(t)
	vm, vmi, pvc, cp, guestLB, host := cachedKinds(t)
	fatten := func(obj client.Object, readKey string) client.Object {
		fat := obj.DeepCopyObject().(client.Object)
		a, l := fat.GetAnnotations(), fat.GetLabels()
		if a == nil {
			a = map[string]string{}
		}
		if l == nil {
			l = map[string]string{}
		}
		for i := range 50 {
			a[fmt.Sprintf("guest.example.com/padding-%d", i)] = strings.Repeat("x", 4<<10)
		}
		for i := range 100 {
			l[fmt.Sprintf("guest.example.com/label-%d", i)] = strings.Repeat("y", 63)
		}
		if readKey != "" {
			a[readKey] = strings.Repeat("z", 200<<10)
		}
		fat.SetAnnotations(a)
		fat.SetLabels(l)
		fat.SetFinalizers(append(fat.GetFinalizers(), strings.Repeat("example.com/f", 100)))
		fat.SetOwnerReferences(append(fat.GetOwnerReferences(), metav1.OwnerReference{Kind: "Thing", Name: strings.Repeat("o", 253), UID: types.UID("o")}))
		fat.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "guest", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{}}}`)}}})
		return fat
	}
	size := func(obj any) int {
		b, err := json.Marshal(obj)
		g.Expect(err).NotTo(HaveOccurred())
		return len(b)
	}
	// The VM's machine-name annotation is read; a 200 KiB value in it is not kept, and the
	// machine is found by its label. The same annotation on the VMI, one the provider sets on
	// the volume or load balancer (read of neither), and one of Harvester's on a host.
	vmPlain := vm.DeepCopy()
	delete(vmPlain.Annotations, naming.AnnotationMachine)
	vmiPlain := vmi.DeepCopy()
	delete(vmiPlain.Annotations, naming.AnnotationMachine)
	for _, c := range []struct {
		name      string
		plain     client.Object
		readKey   string
		transform func(any) (any, error)
	}{
		{"VM", vmPlain, naming.AnnotationMachine, slimCached},
		{"VMI", vmiPlain, naming.AnnotationMachine, slimCached},
		{"volume", pvc, naming.AnnotationMachine, slimCached},
		{"control-plane load balancer", cp, "", slimCached},
		{"guest's load balancer", guestLB, "", slimCached},
		{"host", host, "", slimNode},
	} {
		fat := fatten(c.plain, c.readKey)
		g.Expect(size(fat)).To(BeNumerically(">", 200<<10), c.name)
		kept, err := c.transform(fat)
		g.Expect(err).NotTo(HaveOccurred())
		want, err := c.transform(c.plain.DeepCopyObject())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kept).To(Equal(want), "%s: what the guest added is all dropped", c.name)
		g.Expect(size(kept)).To(BeNumerically("<", 3<<10), c.name)
		t.Logf("%s: %d bytes of JSON stored of %d", c.name, size(kept), size(fat))
	}

	// The largest volume a guest can make that the cache holds: a 253-byte name, the labels the
	// provider reads at their longest, a machine name of 253 bytes, and anything else.
	long := fatten(pvc, "").(*corev1.PersistentVolumeClaim)
	long.Name, long.Namespace = strings.Repeat("v", 253), strings.Repeat("n", 63)
	for _, k := range keptVolumeLabels {
		long.Labels[k] = strings.Repeat("l", 63)
	}
	long.Annotations[naming.AnnotationMachine] = strings.Repeat("m", 253)
	largest := size(slim(g, slimCached, long))
	g.Expect(largest).To(BeNumerically("<", 2<<10))
	t.Logf("largest cached volume: %d bytes of JSON", largest)
}

// A connection's cache holds, of the kinds the provider makes, only objects carrying the
// provider's managed-by label (and, for a connection that serves one guest cluster, that
// cluster's label): the labels admission-policies.yaml forbids guests to put on a volume
// (capi-harvester-guest-volumes), so a guest's own volumes do not reach it. Load balancers are
// all of the namespace's, trimmed (TestCachedObjectsAreSmallWhateverTheyCarry).
func TestTheCacheSelectsWhatTheProviderLabelled(t *testing.T) {
	g := NewWithT(t)
	cluster := cachedGuest.ID()
	ours := labels.Set{naming.LabelManagedBy: naming.ManagedByValue, naming.LabelCluster: cluster}
	anotherCluster := labels.Set{naming.LabelManagedBy: naming.ManagedByValue, naming.LabelCluster: cluster + "x"}
	for _, kind := range CachedKinds() {
		sel := cacheSelection(kind, cluster)
		if _, ok := kind.(*lbv1.LoadBalancer); ok {
			g.Expect(sel.Label).To(BeNil(), "load balancers: all of the namespace's")
			continue
		}
		g.Expect(sel.Label).NotTo(BeNil(), "%T", kind)
		g.Expect(sel.Label.Matches(ours)).To(BeTrue(), "%T", kind)
		for what, set := range map[string]labels.Set{
			"unlabelled":              {},
			"the cluster label alone": {naming.LabelCluster: cluster},
			"another managed-by":      {naming.LabelManagedBy: "helm", naming.LabelCluster: cluster},
			"another cluster's":       anotherCluster,
		} {
			g.Expect(sel.Label.Matches(set)).To(BeFalse(), "%T, %s", kind, what)
		}
		// A connection for several clusters of one identity: the provider's label alone.
		all := cacheSelection(kind, "")
		g.Expect(all.Label.Matches(anotherCluster)).To(BeTrue(), "%T", kind)
		g.Expect(all.Label.Matches(labels.Set{naming.LabelCluster: cluster})).To(BeFalse(), "%T", kind)
	}
}
