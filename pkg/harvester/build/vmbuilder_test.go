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

package build

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

func testInput() *VMInput {
	m := &infrav1.HarvesterMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cp-abcde", UID: "0f8fad5b-d9cb-469f-a165-70867728950e"},
		Spec: infrav1.HarvesterMachineSpec{
			CPU: 4, Memory: resource.MustParse("8Gi"), ReservedMemory: ptr.To(resource.MustParse("256Mi")),
			Disks: []infrav1.Disk{
				{Name: "disk-0", Image: "ubuntu", Size: resource.MustParse("40Gi"), Bus: infrav1.DiskBusVirtio, BootOrder: ptr.To[int32](1)},
				{Name: "data", StorageClassName: "fast", Size: resource.MustParse("100Gi"), Bus: infrav1.DiskBusSCSI},
			},
			Networks:    []infrav1.Network{{Name: "nic-0", NetworkName: "default/vlan10"}, {Name: "storage", NetworkName: "default/vlan20", MACAddress: "52:54:00:00:00:01"}},
			Firmware:    infrav1.Firmware{BootMode: infrav1.BootModeEFI, SecureBoot: true, TPM: true},
			RunStrategy: infrav1.RunStrategyAlways,
		},
	}
	return &VMInput{
		Machine: m, Namespace: "guests", Guest: naming.Guest{Namespace: "default", Name: "demo"}, Role: naming.RoleControlPlane,
		Images:         map[string]Image{"ubuntu": {Namespace: "guests", Name: "ubuntu", StorageClassName: "longhorn-ubuntu"}},
		KeyPairs:       []string{"guests/ops"},
		UserDataSecret: "cp-abcde-cloudinit", NetworkDataSecret: "cp-abcde-cloudinit",
	}
}

func TestBuildVM(t *testing.T) {
	g := NewWithT(t)
	vm, err := BuildVM(testInput())
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(vm.Namespace).To(Equal("guests"))
	g.Expect(vm.Name).To(Equal("cp-abcde"))
	g.Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelCluster, "default.demo"))
	g.Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelRole, naming.RoleControlPlane))
	tmpl := vm.Spec.Template
	g.Expect(tmpl.ObjectMeta.Labels).To(HaveKeyWithValue(naming.LabelMachine, "cp-abcde"))
	g.Expect(tmpl.ObjectMeta.Labels).To(HaveKeyWithValue(guestcloud.LabelHarvesterGuestCluster, "default.demo"))
	g.Expect(tmpl.ObjectMeta.Annotations).To(HaveKeyWithValue(naming.AnnotationSSHNames, `["guests/ops"]`))
	g.Expect(*vm.Spec.RunStrategy).To(Equal(kubevirtv1.RunStrategyAlways))

	claims := ClaimNamesOf(vm)
	g.Expect(claims).To(ConsistOf("cp-abcde-disk-0-0f8fad5b", "cp-abcde-data-0f8fad5b"))
	g.Expect(strings.Split(vm.Annotations[naming.AnnotationRemovedPVCs], ",")).To(ConsistOf(claims))
	g.Expect(vm.Annotations).To(HaveKeyWithValue(naming.AnnotationReservedMemory, "256Mi"))

	spec := tmpl.Spec
	g.Expect(spec.Hostname).To(Equal("cp-abcde"))
	g.Expect(spec.Domain.CPU.Cores).To(Equal(uint32(4)))
	g.Expect(spec.Domain.Memory.Guest.String()).To(Equal("7936Mi"), "guest memory is memory minus reserved")
	g.Expect(spec.Domain.Resources.Limits.Memory().String()).To(Equal("8Gi"))
	g.Expect(*spec.Domain.Firmware.Bootloader.EFI.SecureBoot).To(BeTrue())
	g.Expect(*spec.Domain.Features.SMM.Enabled).To(BeTrue())
	g.Expect(spec.Domain.Devices.TPM).NotTo(BeNil())
	g.Expect(spec.Domain.Devices.Disks).To(HaveLen(3))
	g.Expect(spec.Domain.Devices.Disks[1].Disk.Bus).To(Equal(kubevirtv1.DiskBus("scsi")))
	g.Expect(spec.Domain.Devices.Disks[0].BootOrder).To(Equal(ptr.To[uint](1)))
	g.Expect(spec.Domain.Devices.Interfaces[1].MacAddress).To(Equal("52:54:00:00:00:01"))
	g.Expect(spec.Domain.Devices.Interfaces[0].Bridge).NotTo(BeNil())
	g.Expect(spec.Networks[1].Multus.NetworkName).To(Equal("default/vlan20"))
	g.Expect(spec.Volumes[2].CloudInitNoCloud.UserDataSecretRef.Name).To(Equal("cp-abcde-cloudinit"))
	g.Expect(spec.Volumes[2].CloudInitNoCloud.NetworkDataSecretRef.Name).To(Equal("cp-abcde-cloudinit"))
	// Without devices the VM live-migrates off a drained host, and an eviction of a VM that
	// cannot migrate is refused rather than let go with the guest in it.
	g.Expect(*spec.EvictionStrategy).To(Equal(kubevirtv1.EvictionStrategyLiveMigrate))
	// Harvester's maintenance mode reads its strategy from the launcher pod (the template's
	// labels) and its webhook from the VM: Migrate on both, never on the volumes.
	g.Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelMaintainModeStrategy, naming.MaintainModeMigrate))
	g.Expect(tmpl.ObjectMeta.Labels).To(HaveKeyWithValue(naming.LabelMaintainModeStrategy, naming.MaintainModeMigrate))
	g.Expect(MachineLabels(testInput())).NotTo(HaveKey(naming.LabelMaintainModeStrategy))
	g.Expect(spec.NodeSelector).To(BeEmpty())
}

func TestAffinityForFailureDomains(t *testing.T) {
	g := NewWithT(t)

	zone := testInput()
	zone.FailureDomain, zone.FailureDomainKey = "zone-b", LabelZone
	zone.Machine.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "fast", Operator: corev1.NodeSelectorOpExists}}},
		}},
	}}
	vm, err := BuildVM(zone)
	g.Expect(err).NotTo(HaveOccurred())
	terms := vm.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	g.Expect(terms).To(HaveLen(2), "the user's terms stay")
	for _, term := range terms {
		g.Expect(term.MatchExpressions).To(ContainElement(corev1.NodeSelectorRequirement{Key: LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}),
			"the zone holds in every ORed term")
	}
	g.Expect(zone.Machine.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions).To(HaveLen(1),
		"the machine's spec is not modified")

	host := testInput()
	host.FailureDomain, host.FailureDomainKey = "harvester-2", LabelHostname
	vm, err = BuildVM(host)
	g.Expect(err).NotTo(HaveOccurred())
	na := vm.Spec.Template.Spec.Affinity.NodeAffinity
	g.Expect(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(ConsistOf(corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"harvester-2"}}},
	}), "CAPI's contract: the machine is placed in its failure domain")

	anti := vm.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	g.Expect(anti).To(HaveLen(1))
	g.Expect(anti[0].PodAffinityTerm.LabelSelector.MatchLabels).To(Equal(map[string]string{naming.LabelCluster: "default.demo", naming.LabelRole: naming.RoleControlPlane}))
}

func TestClusterIDStaysUniqueAndShort(t *testing.T) {
	g := NewWithT(t)
	g.Expect((naming.Guest{Namespace: "ns", Name: "name"}).ID()).To(Equal("ns.name"), "clusters from before owner marks keep their IDs")
	g.Expect((naming.Guest{Namespace: "ns", Name: "name", Mark: "0123456789"}).ID()).To(Equal("ns.name-0123456789"))
	long := strings.Repeat("a", 60)
	for _, mark := range []string{"", "0123456789"} {
		id1, id2 := (naming.Guest{Namespace: long, Name: "cluster-1", Mark: mark}).ID(), (naming.Guest{Namespace: long, Name: "cluster-2", Mark: mark}).ID()
		g.Expect(len(id1)).To(BeNumerically("<=", 63))
		g.Expect(id1).NotTo(Equal(id2))
		g.Expect(id1).To(MatchRegexp(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`))
	}
	g.Expect((naming.Guest{Namespace: long, Name: "c", Mark: "0123456789"}).ID()).NotTo(Equal((naming.Guest{Namespace: long, Name: "c", Mark: "9876543210"}).ID()),
		"two management clusters' clusters of one long name")
}

func TestBuildVMWithDevicesCPUModelAndManagementNIC(t *testing.T) {
	g := NewWithT(t)
	in := testInput()
	in.Machine.Spec.CPUModel = "host-passthrough"
	in.Machine.Spec.HostDevices = []infrav1.HostDevice{{DeviceName: "intel.com/I350_GIGABIT_NETWORK_CONNECTION"}, {Name: "nvme", DeviceName: "samsung.com/NVME_SSD"}}
	in.Machine.Spec.GPUs = []infrav1.HostDevice{{DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}
	in.Machine.Spec.Networks[1].Management = true
	vm, err := BuildVM(in)
	g.Expect(err).NotTo(HaveOccurred())
	domain := vm.Spec.Template.Spec.Domain
	g.Expect(domain.CPU.Model).To(Equal("host-passthrough"))
	g.Expect(domain.Devices.HostDevices).To(Equal([]kubevirtv1.HostDevice{
		{Name: "hostdevice-0", DeviceName: "intel.com/I350_GIGABIT_NETWORK_CONNECTION"},
		{Name: "nvme", DeviceName: "samsung.com/NVME_SSD"},
	}))
	g.Expect(domain.Devices.GPUs).To(Equal([]kubevirtv1.GPU{{Name: "gpu-0", DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}))
	// Harvester's load balancer takes a backend's address from the first interface KubeVirt
	// lists, in the VM's order: the management NIC goes first, the others keep spec order.
	var nics, networks []string
	for i, n := range domain.Devices.Interfaces {
		nics = append(nics, n.Name)
		networks = append(networks, vm.Spec.Template.Spec.Networks[i].Name)
	}
	g.Expect(nics).To(Equal([]string{"storage", "nic-0"}))
	g.Expect(networks).To(Equal(nics), "each interface with its network")
	g.Expect(vm.Spec.Template.Spec.Networks[0].Multus.NetworkName).To(Equal(in.Machine.Spec.Networks[1].NetworkName))
	g.Expect(NetworkNames(&in.Machine.Spec)).To(Equal(nics))
	g.Expect(vm.Spec.Template.ObjectMeta.Annotations).NotTo(HaveKey(guestcloud.AnnotationManagementNetwork), "the management NIC is first")
	// A VM with devices cannot migrate: by default the provider drains its guest node and
	// restarts it elsewhere (External: KubeVirt marks it instead of evicting it).
	g.Expect(*vm.Spec.Template.Spec.EvictionStrategy).To(Equal(kubevirtv1.EvictionStrategyExternal))
	in.Machine.Spec.HostDevices, in.Machine.Spec.GPUs = nil, nil
	in.Machine.Spec.HostMaintenance.Policy = infrav1.HostMaintenanceDrainAndRestart
	vm, err = BuildVM(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*vm.Spec.Template.Spec.EvictionStrategy).To(Equal(kubevirtv1.EvictionStrategyExternal), "the policy asked for")

	vm, err = BuildVM(testInput())
	g.Expect(err).NotTo(HaveOccurred())
	domain = vm.Spec.Template.Spec.Domain
	g.Expect(domain.CPU.Model).To(BeEmpty())
	g.Expect(domain.Devices.HostDevices).To(BeEmpty())
	g.Expect(domain.Devices.GPUs).To(BeEmpty())
	g.Expect(vm.Spec.Template.ObjectMeta.Annotations).NotTo(HaveKey(guestcloud.AnnotationManagementNetwork), "the first NIC needs no annotation")
}

// What a Rancher node-driver user sets: CPU pinning with an isolated emulator thread, a NIC
// model for images without virtio drivers, a TPM and UEFI variables that persist, and the
// machine's pool on its VM (to select a load balancer's backends by pool).
func TestBuildVMWithNodeDriverOptions(t *testing.T) {
	g := NewWithT(t)
	in := testInput()
	in.Machine.Spec.DedicatedCPUPlacement, in.Machine.Spec.IsolateEmulatorThread = true, true
	in.Machine.Spec.Networks[1].Model = "e1000e"
	in.Machine.Spec.Firmware.PersistentTPM, in.Machine.Spec.Firmware.PersistentEFIVars = true, true
	in.Machine.Labels = map[string]string{clusterv1.MachineDeploymentNameLabel: "demo-md-0", "unrelated": "x"}
	vm, err := BuildVM(in)
	g.Expect(err).NotTo(HaveOccurred())
	domain := vm.Spec.Template.Spec.Domain
	g.Expect(domain.CPU.DedicatedCPUPlacement).To(BeTrue())
	g.Expect(domain.CPU.IsolateEmulatorThread).To(BeTrue())
	models := map[string]string{}
	for _, n := range domain.Devices.Interfaces {
		models[n.Name] = n.Model
	}
	g.Expect(models).To(Equal(map[string]string{"nic-0": "virtio", "storage": "e1000e"}))
	g.Expect(domain.Devices.TPM.Persistent).To(Equal(ptr.To(true)))
	g.Expect(domain.Firmware.Bootloader.EFI.Persistent).To(Equal(ptr.To(true)))
	g.Expect(domain.Firmware.Bootloader.EFI.SecureBoot).To(Equal(ptr.To(true)))
	for _, labels := range []map[string]string{vm.Labels, vm.Spec.Template.ObjectMeta.Labels} {
		g.Expect(labels).To(HaveKeyWithValue(clusterv1.MachineDeploymentNameLabel, "demo-md-0"))
		g.Expect(labels).NotTo(HaveKey("unrelated"))
	}

	vm, err = BuildVM(testInput())
	g.Expect(err).NotTo(HaveOccurred())
	domain = vm.Spec.Template.Spec.Domain
	g.Expect(domain.CPU.DedicatedCPUPlacement).To(BeFalse())
	g.Expect(domain.Devices.TPM.Persistent).To(BeNil(), "a TPM's state is not kept unless asked")
	g.Expect(domain.Firmware.Bootloader.EFI.Persistent).To(BeNil())
	g.Expect(vm.Labels).NotTo(HaveKey(clusterv1.MachineDeploymentNameLabel))
}

func TestLongMachineNamesReachTheVM(t *testing.T) {
	g := NewWithT(t)
	in := testInput()
	long := strings.Repeat("cluster-with-a-long-name-", 4) + "md-0-7c9f8-x2kqz"
	in.Machine.Name = long

	vm, err := BuildVM(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Name).To(Equal(naming.VMName(long)))
	g.Expect(vm.Spec.Template.Spec.Hostname).To(Equal(vm.Name), "the guest's hostname is the VM's name")
	g.Expect(vm.Annotations).To(HaveKeyWithValue(naming.AnnotationMachine, long))
	g.Expect(vm.Spec.Template.ObjectMeta.Annotations).To(HaveKeyWithValue(naming.AnnotationMachine, long), "VMIs map back to the machine too")
	for _, labels := range []map[string]string{vm.Labels, vm.Spec.Template.ObjectMeta.Labels} {
		for k, v := range labels {
			g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), "label %s=%q", k, v)
		}
	}
	g.Expect(OwnedBy(vm.Labels, in.Guest, in.Machine)).To(BeTrue())
	g.Expect(OwnedBy(vm.Labels, naming.Guest{Namespace: in.Guest.Namespace, Name: in.Guest.Name, Mark: "0123456789"}, in.Machine)).To(BeFalse(),
		"the same machine name in another management cluster's cluster of the same name")

	ns, name, ok := naming.MachineOf(vm)
	g.Expect(ok).To(BeTrue())
	g.Expect(ns + "/" + name).To(Equal(in.Machine.Namespace + "/" + long))

	// A VM made before the annotation existed maps back by its label.
	delete(vm.Annotations, naming.AnnotationMachine)
	vm.Labels[naming.LabelMachine] = "cp-abcde"
	_, name, _ = naming.MachineOf(vm)
	g.Expect(name).To(Equal("cp-abcde"))
}

// A machine with CPU and memory maximums gets a VM KubeVirt can hot-plug: one core per socket
// up to maxSockets, maxGuest as maxMemory less the reserved memory, and Harvester's hotplug
// annotation (without which Harvester's mutator pins maxSockets to 1). Without them the VM is as
// before: one socket of cpu cores, no maximum, no annotation.
func TestBuildVMWithHotplugMaximums(t *testing.T) {
	g := NewWithT(t)
	in := testInput()
	in.Machine.Spec.CPU, in.Machine.Spec.MaxCPU = 4, 8
	in.Machine.Spec.Memory, in.Machine.Spec.ReservedMemory = resource.MustParse("8Gi"), ptr.To(resource.MustParse("256Mi"))
	in.Machine.Spec.MaxMemory = ptr.To(resource.MustParse("16Gi"))
	vm, err := BuildVM(in)
	g.Expect(err).NotTo(HaveOccurred())
	domain := vm.Spec.Template.Spec.Domain
	g.Expect(domain.CPU.Sockets).To(Equal(uint32(4)))
	g.Expect(domain.CPU.Cores).To(Equal(uint32(1)))
	g.Expect(domain.CPU.MaxSockets).To(Equal(uint32(8)))
	g.Expect(domain.Memory.Guest.String()).To(Equal("7936Mi"))
	g.Expect(domain.Memory.MaxGuest.String()).To(Equal("16128Mi"))
	g.Expect(vm.Annotations).To(HaveKeyWithValue(naming.AnnotationEnableCPUAndMemoryHotplug, "true"))
	g.Expect(domain.Resources.Limits).NotTo(HaveKey(corev1.ResourceMemory), "a memory limit would stop KubeVirt's memory hotplug")

	vm, err = BuildVM(testInput())
	g.Expect(err).NotTo(HaveOccurred())
	domain = vm.Spec.Template.Spec.Domain
	g.Expect(domain.CPU.Sockets).To(Equal(uint32(1)))
	g.Expect(domain.CPU.MaxSockets).To(BeZero())
	g.Expect(domain.Memory.MaxGuest).To(BeNil())
	g.Expect(vm.Annotations).NotTo(HaveKey(naming.AnnotationEnableCPUAndMemoryHotplug))
	g.Expect(domain.Resources.Limits.Memory().String()).To(Equal("8Gi"))
}

// The VM's shape comes from the spec's rules in one place: the size the CCM reads back from the
// VM (its instance type) and the capacity the autoscaler reads are the spec's CPUs and guest
// memory, with and without hot-plug; a spec the webhook never defaulted builds the same VM as the
// defaulted one.
func TestTheVMReadsBackAsTheSpecsSize(t *testing.T) {
	g := NewWithT(t)
	for _, maxCPU := range []int32{0, 8} {
		in := testInput()
		in.Machine.Spec.CPU, in.Machine.Spec.MaxCPU = 4, maxCPU
		in.Machine.Spec.Memory, in.Machine.Spec.ReservedMemory = resource.MustParse("8Gi"), ptr.To(resource.MustParse("256Mi"))
		vm, err := BuildVM(in)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(guestcloud.InstanceType(vm)).To(Equal("4cpu-7936Mi"), "maxCPU %d", maxCPU)
		capacity := MachineCapacity(&in.Machine.Spec)
		g.Expect(capacity.Cpu().Value()).To(Equal(int64(4)), "maxCPU %d", maxCPU)
		g.Expect(capacity.Memory().String()).To(Equal("7936Mi"), "maxCPU %d", maxCPU)
	}

	raw := testInput()
	raw.Machine.Spec.RunStrategy = ""
	raw.Machine.Spec.HostDevices = []infrav1.HostDevice{{DeviceName: "nvidia.com/GA102"}}
	for i := range raw.Machine.Spec.Disks {
		raw.Machine.Spec.Disks[i].Bus = ""
	}
	defaulted := testInput()
	defaulted.Machine = raw.Machine.DeepCopy()
	defaulted.Machine.Spec.Default()
	fromRaw, err := BuildVM(raw)
	g.Expect(err).NotTo(HaveOccurred())
	fromDefaulted, err := BuildVM(defaulted)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fromRaw).To(Equal(fromDefaulted))
	g.Expect(raw.Machine.Spec.RunStrategy).To(BeEmpty(), "the builder defaults a copy, not the caller's machine")
	g.Expect(*fromRaw.Spec.RunStrategy).To(BeEquivalentTo(infrav1.RunStrategyRerunOnFailure))
	g.Expect(fromRaw.Spec.Template.Spec.Domain.Devices.HostDevices[0].Name).To(Equal("hostdevice-0"))
}

// A disk's volume is the one its VM was made with: the machine may have another UID since
// (clusterctl move makes the object anew) or its VM another naming (a take-over from another
// provider), so the claim is read from the VM, and derived only when the VM has no such volume.
func TestADisksVolumeIsTheVMs(t *testing.T) {
	g := NewWithT(t)
	in := testInput()
	vm, err := BuildVM(in)
	g.Expect(err).NotTo(HaveOccurred())
	moved := in.Machine.DeepCopy()
	moved.UID = "5b7e1c2a-0000-4000-8000-000000000000"
	g.Expect(ClaimName(moved, "disk-0")).NotTo(Equal("cp-abcde-disk-0-0f8fad5b"))
	g.Expect(VolumeClaimOf(vm, moved, "disk-0")).To(Equal("cp-abcde-disk-0-0f8fad5b"))
	g.Expect(VolumeClaimOf(vm, moved, "data")).To(Equal("cp-abcde-data-0f8fad5b"))

	vm.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "cp-abcde-disk-0-qwe4r"
	g.Expect(VolumeClaimOf(vm, moved, "disk-0")).To(Equal("cp-abcde-disk-0-qwe4r"))
	g.Expect(VolumeClaimOf(vm, moved, "scratch")).To(Equal(ClaimName(moved, "scratch")), "a disk the VM does not have")
	g.Expect(VolumeClaimOf(nil, moved, "disk-0")).To(Equal(ClaimName(moved, "disk-0")))
}
