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

package v1alpha1

// Long file: API types; their doc comments are the CRD's schema documentation (kubectl explain),
// so they stay with the fields.

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const (
	// MachineFinalizer lets the HarvesterMachine reconciler delete the VM, its volumes and its
	// cloud-init Secret before the HarvesterMachine goes away.
	MachineFinalizer = "harvestermachine.infrastructure.cluster.x-k8s.io"

	// ProviderIDPrefix starts every providerID this provider (and its cloud provider) reports:
	// `harvester://<VM UID>`, the same form as the upstream Harvester cloud provider. The guest's
	// CCM has its own copy (pkg/guestcloud.ProviderIDPrefix), since neither package may import
	// the other; a test keeps the two equal.
	ProviderIDPrefix = "harvester://"

	// CloudInitDiskName is the disk (and volume) the VM builder adds to every VM for its
	// cloud-init data, under the name Harvester's own VM builder uses (harvester
	// pkg/builder/cloudinit.go, CloudInitDiskName). A machine's own disk cannot take it: KubeVirt
	// refuses two disks of one name. The builder adds no interface of its own, so no interface
	// name is reserved. The CRD's rule on Disk.name repeats the literal (markers cannot name a
	// constant); the webhook tests check that both refuse this constant.
	CloudInitDiskName = "cloudinitdisk"

	// MaxCPU is the most virtual CPU cores a machine can have. Neither KubeVirt's VMI admission
	// webhook nor Harvester's VM webhook (v1.8.0) has a hard limit. KubeVirt caps the vCPUs a VM
	// can grow to at 512 when it sets up CPU hotplug (kubevirt pkg/defaults/defaults.go,
	// setupCPUHotplug, since v1.6.0: "Each machine type will have different maximum for vcpus,
	// lets choose 512 as upper bound"); this provider takes the same bound. The VM builder puts
	// all cores in one socket with one thread each (the API has no sockets or threads), so this
	// bounds the VM's vCPUs.
	MaxCPU = 512

	// MinMemory is the least memory a machine can have. No node runs in less; the floor mostly
	// catches a unit typo (`8M` for `8Gi`) before Harvester is asked for a VM that cannot boot.
	MinMemory = "128Mi"

	// MinDiskSize is the least size of a disk: no cloud image fits in less, and the floor
	// catches a unit typo (`40M` for `40Gi`).
	MinDiskSize = "1Gi"

	// IPAMAPIGroup is Cluster API's IPAM group: its IPAddressClaims and IPAddresses, and the
	// pools of its in-cluster provider (InClusterIPPool, GlobalInClusterIPPool).
	IPAMAPIGroup = "ipam.cluster.x-k8s.io"
)

// DiskBus is the bus a disk is attached to.
// +kubebuilder:validation:Enum=virtio;scsi;sata
type DiskBus string

const (
	// DiskBusVirtio is the paravirtualised bus, fastest, and the default.
	DiskBusVirtio DiskBus = "virtio"
	// DiskBusSCSI attaches the disk to a virtio-scsi controller.
	DiskBusSCSI DiskBus = "scsi"
	// DiskBusSATA is for guests without virtio drivers.
	DiskBusSATA DiskBus = "sata"
)

// BootMode is the firmware a VM boots with.
// +kubebuilder:validation:Enum=BIOS;EFI
type BootMode string

const (
	// BootModeBIOS boots with legacy BIOS firmware, the default.
	BootModeBIOS BootMode = "BIOS"
	// BootModeEFI boots with UEFI firmware.
	BootModeEFI BootMode = "EFI"
)

// RunStrategy is the KubeVirt run strategy of a machine's VM.
// +kubebuilder:validation:Enum=Always;RerunOnFailure
type RunStrategy string

const (
	// RunStrategyAlways restarts the VM whenever it stops.
	RunStrategyAlways RunStrategy = "Always"
	// RunStrategyRerunOnFailure restarts the VM only when it fails, the Harvester default.
	RunStrategyRerunOnFailure RunStrategy = "RerunOnFailure"
)

// GuestAgent says what cloud-init does about qemu-guest-agent, which reports a VM's addresses to
// Harvester.
// +kubebuilder:validation:Enum=Install;Enable;None
type GuestAgent string

const (
	// GuestAgentInstall installs the package (from the image's package mirror) and starts it.
	GuestAgentInstall GuestAgent = "Install"
	// GuestAgentEnable starts the agent the image brings, and installs nothing: for sites whose
	// guests reach no package mirror.
	GuestAgentEnable GuestAgent = "Enable"
	// GuestAgentNone leaves the agent to the image. Without a running agent Harvester learns no
	// address, so the management NIC must take its addresses from IP pools.
	GuestAgentNone GuestAgent = "None"
)

// HarvesterMachineSpec is the desired state of a guest-cluster node's VM on Harvester.
// +kubebuilder:validation:XValidation:rule="!has(self.hostMaintenance) || !has(self.hostMaintenance.policy) || self.hostMaintenance.policy != 'LiveMigrate' || ((!has(self.hostDevices) || size(self.hostDevices) == 0) && (!has(self.gpus) || size(self.gpus) == 0))",message="a VM with host devices or vGPUs cannot live-migrate: use DrainAndRestart",fieldPath=".hostMaintenance.policy"
// +kubebuilder:validation:XValidation:rule="!has(self.networkData) || size(self.networkData) == 0 || !self.networks.exists(n, has(n.addressesFromPools) && size(n.addressesFromPools) > 0)",message="must be empty when a NIC takes addresses from IP pools (networks[].addressesFromPools): the provider writes the network-data",fieldPath=".networkData"
type HarvesterMachineSpec struct {
	// providerID is `harvester://<VM UID>`, set by the provider once the VM exists.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// cpu is the number of virtual CPU cores, 1 to 512.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=512
	CPU int32 `json:"cpu"`

	// memory is the guest's memory, e.g. `8Gi`; at least 128Mi.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('128Mi')) >= 0",message="must be at least 128Mi"
	Memory resource.Quantity `json:"memory"`

	// maxCPU is the most virtual CPUs the VM can have while it runs, from cpu up (KubeVirt's CPU
	// hotplug, its maxSockets): set, the VM's CPUs are sockets of one core each, as KubeVirt adds
	// CPUs by socket, and Harvester is told the VM is hot-pluggable. Fixed at creation; cpu may
	// then grow up to it on the running machine (Cluster API's in-place updates,
	// docs/in-place-updates.md). Not with hostDevices or gpus (KubeVirt hot-plugs through a live
	// migration).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=512
	MaxCPU int32 `json:"maxCPU,omitempty"`

	// maxMemory is the most memory the VM can have while it runs, from memory up (KubeVirt's
	// memory hotplug: its maxGuest is maxMemory less reservedMemory). The guest memory
	// (memory less reservedMemory) must then be at least 1Gi, and it and the maximum multiples
	// of 2Mi, as KubeVirt hot-plugs memory only then. Fixed at creation; memory may then grow up
	// to it, as cpu up to maxCPU. Not with hostDevices or gpus.
	// +optional
	MaxMemory *resource.Quantity `json:"maxMemory,omitempty"`

	// reservedMemory is memory Harvester keeps back from the guest for the VM's own overhead
	// (the `harvesterhci.io/reservedMemory` annotation). Must be less than memory.
	// +optional
	ReservedMemory *resource.Quantity `json:"reservedMemory,omitempty"`

	// disks of the VM. Each comes from exactly one source: an image (the root disk, usually) or
	// a storage class (an empty volume).
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Disks []Disk `json:"disks"`

	// networks are the VM's NICs, each on a Harvester VM network. The management NIC (the one
	// that sets `management`, else the first) gives the node its InternalIP.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.filter(n, has(n.management) && n.management).size() <= 1",message="at most one network can be the management network"
	Networks []Network `json:"networks"`

	// cpuModel is the CPU model the guest sees: `host-passthrough` (the host's own CPU: every
	// feature, but the VM can live-migrate only between hosts of the same CPU), `host-model`, or
	// a named model the hosts support (e.g. `Cascadelake-Server`). When empty, KubeVirt's
	// cluster-wide default applies.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	CPUModel string `json:"cpuModel,omitempty"`

	// dedicatedCPUPlacement pins each of the VM's virtual CPUs to a physical CPU of its host
	// (KubeVirt's `dedicatedCpuPlacement`, Harvester's CPU pinning): the VM runs only on hosts
	// whose CPU manager is enabled (Harvester labels them `cpumanager=true`).
	// +optional
	DedicatedCPUPlacement bool `json:"dedicatedCPUPlacement,omitempty"`

	// isolateEmulatorThread gives the VM's emulator thread a physical CPU of its own, besides
	// the pinned ones (KubeVirt's `isolateEmulatorThread`). Requires dedicatedCPUPlacement.
	// +optional
	IsolateEmulatorThread bool `json:"isolateEmulatorThread,omitempty"`

	// hostDevices are PCI devices of a Harvester host passed through to the VM (KubeVirt's
	// `hostDevices`). The device must be enabled for passthrough on Harvester (its
	// PCIDeviceClaim); the VM then runs only on a host that offers it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	HostDevices []HostDevice `json:"hostDevices,omitempty"`

	// gpus are vGPUs of a Harvester host given to the VM (KubeVirt's `gpus`). The vGPU profile
	// must be enabled on Harvester; the VM then runs only on a host that offers it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	GPUs []HostDevice `json:"gpus,omitempty"`

	// sshKeyPairs names Harvester KeyPairs (`name` in the target namespace, or `namespace/name`)
	// whose public keys are authorised in the guest.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	SSHKeyPairs []string `json:"sshKeyPairs,omitempty"`

	// networkData is cloud-init network configuration (network-config v1 or v2) for the guest.
	// When empty, the guest configures its NICs by DHCP, or, when a NIC takes addresses from
	// IP pools, as the provider's network-data says. Exclusive with addressesFromPools.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	NetworkData string `json:"networkData,omitempty"`

	// userData is cloud-config of the user's (a YAML mapping; the `#cloud-config` line is
	// optional) merged into the bootstrap data, as Rancher's Harvester node driver merges its
	// user data: keys the bootstrap data lacks are added, lists (packages, runcmd, write_files,
	// ...) get the extra items after the bootstrap data's, mappings merge key by key. A key both
	// set to different values is not merged: the machine's VirtualMachineReady condition says
	// UserDataConflict and names the key, and no VM is made. Not with Ignition, nor with
	// bootstrap data of an unknown format.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	UserData string `json:"userData,omitempty"`

	// networkConfigVersion is the cloud-init network-config version of the network data the
	// provider writes for NICs with addressesFromPools: 2 (netplan's format, the default) or 1
	// (cloud-init's own), for images whose cloud-init reads only version 1 (SUSE's, for one).
	// Only with addressesFromPools.
	// +optional
	// +kubebuilder:validation:Enum=1;2
	NetworkConfigVersion int32 `json:"networkConfigVersion,omitempty"`

	// affinity adds scheduling constraints for the VM on Harvester hosts. The provider adds its
	// own: the machine's failure domain and soft anti-affinity between sibling machines.
	// Pod (anti-)affinity terms match pods of the VM's own target namespace only: they may not
	// name namespaces or carry a namespaceSelector (another tenant's VMs would be probed).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.podAffinity) || ((!has(self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution) || self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.all(t, (!has(t.namespaces) || size(t.namespaces) == 0) && !has(t.namespaceSelector))) && (!has(self.podAffinity.preferredDuringSchedulingIgnoredDuringExecution) || self.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.all(t, (!has(t.podAffinityTerm.namespaces) || size(t.podAffinityTerm.namespaces) == 0) && !has(t.podAffinityTerm.namespaceSelector))))",message="podAffinity terms may not name namespaces or carry a namespaceSelector: they match the VM's own namespace"
	// +kubebuilder:validation:XValidation:rule="!has(self.podAntiAffinity) || ((!has(self.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution) || self.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.all(t, (!has(t.namespaces) || size(t.namespaces) == 0) && !has(t.namespaceSelector))) && (!has(self.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution) || self.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.all(t, (!has(t.podAffinityTerm.namespaces) || size(t.podAffinityTerm.namespaces) == 0) && !has(t.podAffinityTerm.namespaceSelector))))",message="podAntiAffinity terms may not name namespaces or carry a namespaceSelector: they match the VM's own namespace"
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// firmware of the VM.
	// +optional
	Firmware Firmware `json:"firmware,omitempty,omitzero"`

	// runStrategy of the VM: `RerunOnFailure` (the default) or `Always`.
	// +optional
	RunStrategy RunStrategy `json:"runStrategy,omitempty"`

	// guestAgent says what cloud-init does about qemu-guest-agent: `Install` (the default: the
	// package from the image's mirror, then started), `Enable` (the image has it: only started)
	// or `None`. A machine whose management NIC takes static addresses from IP pools is
	// provisioned from them without waiting for the agent; any other learns its addresses from
	// the agent, so `None` needs static addresses on the management NIC.
	// +optional
	GuestAgent GuestAgent `json:"guestAgent,omitempty"`

	// hostMaintenance says what happens to the VM when Harvester empties its host (maintenance
	// mode, an upgrade, a drain). See docs/operations.md.
	// +optional
	HostMaintenance HostMaintenance `json:"hostMaintenance,omitempty,omitzero"`
}

// HostMaintenancePolicy says how a machine's VM leaves a host that Harvester empties.
// +kubebuilder:validation:Enum=LiveMigrate;DrainAndRestart
type HostMaintenancePolicy string

const (
	// HostMaintenanceLiveMigrate means the VM live-migrates to another host (KubeVirt's LiveMigrate
	// eviction strategy); the guest node stays up. A VM that cannot migrate blocks the host's
	// drain rather than being stopped under the guest.
	HostMaintenanceLiveMigrate HostMaintenancePolicy = "LiveMigrate"
	// HostMaintenanceDrainAndRestart means the provider drains the guest's Node first (CAPI's drain:
	// PodDisruptionBudgets and MachineDrainRules apply), then stops the VM and starts it again
	// on another host (KubeVirt's External eviction strategy). For VMs that cannot migrate:
	// host devices, vGPUs.
	HostMaintenanceDrainAndRestart HostMaintenancePolicy = "DrainAndRestart"
)

// HostMaintenance is what a machine does when its Harvester host is emptied.
// +kubebuilder:validation:MinProperties=1
type HostMaintenance struct {
	// policy: `LiveMigrate` (the default without host devices or vGPUs) or `DrainAndRestart`
	// (the default, and the only policy allowed, with them: such a VM cannot migrate).
	// +optional
	Policy HostMaintenancePolicy `json:"policy,omitempty"`
}

// EffectiveHostMaintenancePolicy is the machine's host maintenance policy, its default filled in.
func (s *HarvesterMachineSpec) EffectiveHostMaintenancePolicy() HostMaintenancePolicy {
	switch {
	case s.HostMaintenance.Policy != "":
		return s.HostMaintenance.Policy
	case len(s.HostDevices) > 0 || len(s.GPUs) > 0:
		return HostMaintenanceDrainAndRestart
	}
	return HostMaintenanceLiveMigrate
}

// Disk is one disk of a machine's VM.
type Disk struct {
	// name of the disk in the VM, unique in the machine. Defaults to `disk-<index>`.
	// `cloudinitdisk` is reserved for the provider's cloud-init disk.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self != 'cloudinitdisk'",message="is reserved for the cloud-init disk the provider adds"
	Name string `json:"name,omitempty"`

	// image is the Harvester VirtualMachineImage (`name` in the target namespace, or
	// `namespace/name`) the disk is cloned from. Exclusive with storageClassName.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Image string `json:"image,omitempty"`

	// storageClassName makes an empty disk of this Harvester storage class. Exclusive with image.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName string `json:"storageClassName,omitempty"`

	// The length bound (XIntOrString lets controller-gen place it on a Quantity) keeps the
	// size rule's estimated cost, times 16 disks, within the apiserver's CEL budget; no real
	// quantity comes near 64 characters.

	// size of the disk, e.g. `40Gi`; at least 1Gi.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Gi')) >= 0",message="must be at least 1Gi"
	Size resource.Quantity `json:"size"`

	// bus the disk is attached to. Defaults to `virtio`.
	// +optional
	Bus DiskBus `json:"bus,omitempty"`

	// bootOrder of the disk, 1 boots first. Defaults to 1 for the first disk when no disk sets it.
	// +optional
	BootOrder *int32 `json:"bootOrder,omitempty"`
}

// NICModels are the interface models KubeVirt offers (a Network's model).
var NICModels = []string{"virtio", "e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139"}

// Network is one NIC of a machine's VM.
type Network struct {
	// name of the interface in the VM, unique in the machine. Defaults to `nic-<index>`.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// networkName is the Harvester VM network, `namespace/name` of its
	// NetworkAttachmentDefinition.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	NetworkName string `json:"networkName"`

	// model of the NIC the guest sees: `virtio` (the default), `e1000`, `e1000e`, `igb`,
	// `ne2k_pci`, `pcnet` or `rtl8139` (KubeVirt's interface models), for images without virtio
	// drivers.
	// +optional
	// +kubebuilder:validation:Enum=virtio;e1000;e1000e;igb;ne2k_pci;pcnet;rtl8139
	Model string `json:"model,omitempty"`

	// macAddress fixes the NIC's MAC address. When empty, KubeVirt assigns one; on a machine
	// whose NICs take addresses from IP pools, the provider pins one derived from the machine
	// and the interface name instead, so that the guest's network-data can match each NIC.
	// +optional
	// +kubebuilder:validation:MaxLength=17
	MACAddress string `json:"macAddress,omitempty"`

	// management makes this NIC the management NIC, whose address is the node's InternalIP (and
	// the machine's). At most one NIC sets it; when none does, the first NIC is the management NIC.
	// +optional
	Management bool `json:"management,omitempty"`

	// addressesFromPools names the IP pools (Cluster API IPAM, ipam.cluster.x-k8s.io) this NIC
	// takes its static addresses from: one address from each pool, e.g. one IPv4 and one IPv6
	// pool. The provider claims them before the VM is made and gives them to the guest in
	// cloud-init network-data (v2) with each address's prefix and gateway. Exclusive with the
	// machine's networkData. A NIC without pools uses DHCP.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	AddressesFromPools []IPPoolReference `json:"addressesFromPools,omitempty"`

	// nameservers are the DNS servers (IP addresses) the guest uses on this NIC; only with
	// addressesFromPools.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=45
	Nameservers []string `json:"nameservers,omitempty"`
}

// HostDevice is a device of a Harvester host that a machine's VM gets: a PCI device passed
// through, or a vGPU.
type HostDevice struct {
	// name of the device in the VM, unique among the machine's devices. Defaults to
	// `hostdevice-<index>` for host devices and `gpu-<index>` for GPUs.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// deviceName is the resource name Harvester's pcidevices add-on advertises for the device on
	// the hosts that have it (the `status.resourceName` of its PCIDevice, or `nvidia.com/` and
	// the profile for a vGPU), e.g. `intel.com/I350_GIGABIT_NETWORK_CONNECTION` or
	// `nvidia.com/NVIDIA_A2-4Q`.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	DeviceName string `json:"deviceName"`
}

// IPPoolReference names an IP pool of a Cluster API IPAM provider in the machine's namespace
// (a cluster-scoped pool, such as a GlobalInClusterIPPool, by its name alone).
type IPPoolReference struct {
	// apiGroup of the pool, e.g. `ipam.cluster.x-k8s.io`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`

	// kind of the pool, e.g. `InClusterIPPool` or `GlobalInClusterIPPool`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name of the pool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Firmware configures the VM's firmware.
type Firmware struct {
	// bootMode is `BIOS` (the default) or `EFI`.
	// +optional
	BootMode BootMode `json:"bootMode,omitempty"`

	// secureBoot turns on UEFI secure boot. Requires bootMode EFI.
	// +optional
	SecureBoot bool `json:"secureBoot,omitempty"`

	// tpm adds an emulated TPM 2.0 device.
	// +optional
	TPM bool `json:"tpm,omitempty"`

	// persistentTPM keeps the TPM's state across the VM's restarts and migrations (KubeVirt's
	// `tpm.persistent`, stored in a volume of Harvester's VM state storage class), so that keys
	// sealed to it survive. Requires tpm.
	// +optional
	PersistentTPM bool `json:"persistentTPM,omitempty"`

	// persistentEFIVars keeps the UEFI variables (boot entries, secure-boot keys) across the
	// VM's restarts and migrations (KubeVirt's `efi.persistent`). Requires bootMode EFI.
	// +optional
	PersistentEFIVars bool `json:"persistentEFIVars,omitempty"`
}

// HarvesterMachineStatus is the observed state of a HarvesterMachine.
// +kubebuilder:validation:MinProperties=1
type HarvesterMachineStatus struct {
	// initialization reports the provisioning milestones of the CAPI contract.
	// +optional
	Initialization MachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// conditions describe the state of the HarvesterMachine; `Ready` summarises them.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// addresses of the VM: the management NIC's as InternalIP, others as ExternalIP, and the
	// hostname.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// failureDomain the VM runs in: its host's zone, or its host when the failure domains are
	// hosts; empty until the VM is scheduled, or when its host is in none of them.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// ipAddresses are the static addresses the machine's NICs claimed from IP pools
	// (spec.networks[].addressesFromPools), known before the VM is made.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	IPAddresses []ClaimedIPAddress `json:"ipAddresses,omitempty"`

	// virtualMachine identifies the VM on Harvester, for debugging.
	// +optional
	VirtualMachine VirtualMachineStatus `json:"virtualMachine,omitempty,omitzero"`
}

// ClaimedIPAddress is one address a NIC claimed from an IP pool.
type ClaimedIPAddress struct {
	// interface is the NIC's name (spec.networks[].name).
	// +required
	// +kubebuilder:validation:MaxLength=63
	Interface string `json:"interface"`

	// macAddress is the MAC the NIC has in the VM, which the network-data matches.
	// +optional
	// +kubebuilder:validation:MaxLength=17
	MACAddress string `json:"macAddress,omitempty"`

	// pool the address came from, as `Kind/name`.
	// +required
	// +kubebuilder:validation:MaxLength=320
	Pool string `json:"pool"`

	// claim is the IPAddressClaim's name (in the machine's namespace).
	// +required
	// +kubebuilder:validation:MaxLength=253
	Claim string `json:"claim"`

	// address in CIDR notation (`10.0.0.5/24`).
	// +required
	// +kubebuilder:validation:MaxLength=49
	Address string `json:"address"`

	// gateway of the address's network, if the pool has one.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	Gateway string `json:"gateway,omitempty"`
}

// MachineInitializationStatus holds the provisioning milestones of a HarvesterMachine.
// +kubebuilder:validation:MinProperties=1
type MachineInitializationStatus struct {
	// provisioned is true once the VM runs and reports its address.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// VirtualMachineStatus identifies a machine's VM on Harvester.
// +kubebuilder:validation:MinProperties=1
type VirtualMachineStatus struct {
	// namespace of the VM on Harvester.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name of the VM on Harvester.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// uid of the VM on Harvester.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`

	// host is the Harvester node the VM runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host,omitempty"`

	// printableStatus is KubeVirt's one-word state of the VM (Starting, Running, Stopped, ...).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=64
	PrintableStatus string `json:"printableStatus,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=harvestermachines,scope=Namespaced,categories=cluster-api,shortName=hvm
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this machine belongs to"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"Machine\")].name",description="Machine that owns this HarvesterMachine"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description="Whether the VM is running and addressable"
// +kubebuilder:printcolumn:name="IP",type="string",JSONPath=".status.addresses[?(@.type==\"InternalIP\")].address",description="Management network address"
// +kubebuilder:printcolumn:name="Host",type="string",JSONPath=".status.virtualMachine.host",description="Harvester host"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",description="Provider ID",priority=1
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.virtualMachine.printableStatus",description="VM state on Harvester",priority=1
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",description="Why it is (not) ready",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// HarvesterMachine is a guest-cluster node's virtual machine on Harvester HCI.
type HarvesterMachine struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec HarvesterMachineSpec `json:"spec"`
	// +optional
	Status HarvesterMachineStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// HarvesterMachineList is a list of HarvesterMachines.
type HarvesterMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HarvesterMachine `json:"items"`
}

// GetConditions returns the conditions of the HarvesterMachine.
func (m *HarvesterMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the conditions of the HarvesterMachine.
func (m *HarvesterMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

func init() {
	SchemeBuilder.Register(&HarvesterMachine{}, &HarvesterMachineList{})
}
