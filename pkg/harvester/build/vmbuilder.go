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

// Long file: the VM builder, one function per part of a machine's VM (disks and their claims,
// NICs, firmware, CPU and memory, labels, placement), which read best together.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

const (
	// LabelHostname is a host topology label failure domains use.
	LabelHostname = "kubernetes.io/hostname"
	// LabelZone is a host topology label failure domains use.
	LabelZone = corev1.LabelTopologyZone
	// LabelRegion is a host topology label failure domains use.
	LabelRegion = corev1.LabelTopologyRegion

	// FailureDomainTopologyKey is the attribute of a failure domain that names the host label it
	// stands for (LabelZone, or LabelHostname when hosts have no zones).
	FailureDomainTopologyKey = "topologyKey"
	// FailureDomainHostsKey is the attribute of a failure domain that counts its hosts (those
	// that run VMs): a VM placed in a domain of one host cannot live-migrate, so KubeVirt can
	// neither move it off the host nor resize it while it runs.
	FailureDomainHostsKey = "hosts"
)

// Image is a VirtualMachineImage a disk is cloned from, as the VM builder needs it.
type Image struct {
	Namespace, Name  string
	StorageClassName string
}

// VMInput is everything a machine's VM is made of.
type VMInput struct {
	Machine   *infrav1.HarvesterMachine
	Namespace string       // the target namespace on Harvester
	Guest     naming.Guest // the machine's guest cluster (VMService.Create sets its own)
	Role      string       // RoleControlPlane or RoleWorker
	// FailureDomain and its topology key (LabelZone or LabelHostname); empty for none.
	FailureDomain    string
	FailureDomainKey string
	// Images by the reference a disk's spec uses.
	Images map[string]Image
	// KeyPairs are the machine's keypairs as `namespace/name`.
	KeyPairs []string
	// UserDataSecret and NetworkDataSecret name the cloud-init Secrets (NetworkDataSecret may be
	// empty).
	UserDataSecret, NetworkDataSecret string
	// MACAddresses pins the MAC of NICs (by interface name) whose spec sets none: those the
	// network-data of static addresses matches.
	MACAddresses map[string]string
}

// ResolveRef splits a `name` or `namespace/name` reference, defaulting the namespace.
func ResolveRef(ref, defaultNamespace string) (string, string) {
	if ns, name, ok := strings.Cut(ref, "/"); ok {
		return ns, name
	}
	return defaultNamespace, ref
}

// MachineLabels are the labels of a machine's VM, VMI and volumes.
func MachineLabels(in *VMInput) map[string]string {
	labels := in.Guest.Labels()
	labels[naming.LabelMachine] = naming.MachineLabelValue(in.Machine.Name)
	labels[naming.LabelMachineNamespace] = in.Machine.Namespace
	labels[naming.LabelRole] = in.Role
	// The machine's pool, as CAPI labels the machine: users select a Harvester load balancer's
	// backends by pool (a MachineDeployment's VMs, or the control plane's).
	for _, k := range []string{clusterv1.MachineDeploymentNameLabel, clusterv1.MachineControlPlaneNameLabel} {
		if v, ok := in.Machine.Labels[k]; ok {
			labels[k] = v
		}
	}
	return labels
}

// ClaimName is the PVC of one disk of a machine: stable for the machine, so that a retried
// create names the same volumes, and unlike the PVCs of an earlier machine of the same name.
func ClaimName(m *infrav1.HarvesterMachine, disk string) string {
	uid := strings.ReplaceAll(string(m.UID), "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return naming.BoundedName(fmt.Sprintf("%s-%s-%s", m.Name, disk, uid), 253)
}

// VolumeClaimOf is the volume claim behind a machine's disk: the claim the VM's volume of that
// name uses, which is the one the VM was made with (a machine moved by clusterctl or taken over
// from another provider has another UID, or another naming, than ClaimName derives), or
// ClaimName when the VM has no such volume.
func VolumeClaimOf(vm *kubevirtv1.VirtualMachine, m *infrav1.HarvesterMachine, disk string) string {
	if vm != nil && vm.Spec.Template != nil {
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if v.Name == disk && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "" {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	return ClaimName(m, disk)
}

// BuildVM returns the KubeVirt VirtualMachine of a machine, in Harvester's conventions.
func BuildVM(input *VMInput) (*kubevirtv1.VirtualMachine, error) {
	// The spec's defaults are the defaulting webhook's (HarvesterMachineSpec.Default), applied
	// here too for a spec the webhook never saw.
	copied := *input
	in := &copied
	in.Machine = input.Machine.DeepCopy()
	in.Machine.Spec.Default()
	m := in.Machine
	spec := &m.Spec
	labels := MachineLabels(in)
	templateLabels := map[string]string{
		naming.LabelHarvesterCreator:          naming.HarvesterCreatorValue,
		guestcloud.LabelHarvesterGuestCluster: labels[naming.LabelCluster],
	}
	for k, v := range labels {
		templateLabels[k] = v
	}
	// Harvester's maintenance mode reads the strategy from the virt-launcher pod, whose labels
	// come from the VM's template at the pod's creation; the VM carries it for Harvester's
	// webhook and UI. Migrate: the VM leaves its host by KubeVirt's eviction (live migration,
	// or the provider's drain and restart), never by Harvester's own shutdown.
	vmLabels := maps.Clone(labels)
	vmLabels[naming.LabelMaintainModeStrategy] = naming.MaintainModeMigrate
	templateLabels[naming.LabelMaintainModeStrategy] = naming.MaintainModeMigrate

	claims, disks, volumes, claimNames, err := buildDisks(in)
	if err != nil {
		return nil, err
	}
	claimsJSON, err := json.Marshal(claims)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{
		naming.AnnotationMachine:              m.Name,
		naming.AnnotationVolumeClaimTemplates: string(claimsJSON),
		// Harvester deletes these volumes with the VM, whoever deletes it.
		naming.AnnotationRemovedPVCs: strings.Join(claimNames, ","),
	}
	guest := spec.GuestMemory()
	if spec.ReservedMemory != nil {
		annotations[naming.AnnotationReservedMemory] = spec.ReservedMemory.String()
	}
	memory := &kubevirtv1.Memory{Guest: &guest, MaxGuest: spec.MaxGuestMemory()}
	if spec.Resizable() {
		// Else Harvester's VM mutator pins maxSockets to 1 and recomputes the guest memory.
		annotations[naming.AnnotationEnableCPUAndMemoryHotplug] = "true"
	}
	limits := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(spec.CPU), resource.DecimalSI),
		corev1.ResourceMemory: spec.Memory,
	}
	if spec.MaxMemory != nil {
		// No memory limit on a VM whose memory grows: Harvester's mutator makes the request
		// the limit over its overcommit ratio, below the guest memory, and KubeVirt's memory
		// hotplug then raises the request to the new guest memory but the limit by what is left
		// of the growth (nothing): the migration's target pod would ask for more than its limit
		// and never be made. Without a limit the request is the guest memory.
		delete(limits, corev1.ResourceMemory)
	}

	interfaces := make([]kubevirtv1.Interface, 0, len(spec.Networks))
	networks := make([]kubevirtv1.Network, 0, len(spec.Networks))
	for _, i := range spec.NICOrder() {
		n := spec.Networks[i]
		name := spec.NICName(i)
		mac := n.MACAddress
		if mac == "" {
			mac = in.MACAddresses[name]
		}
		model := n.Model
		if model == "" {
			model = "virtio"
		}
		interfaces = append(interfaces, kubevirtv1.Interface{
			Name:                   name,
			Model:                  model,
			MacAddress:             mac,
			InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}},
		})
		networks = append(networks, kubevirtv1.Network{
			Name:          name,
			NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: n.NetworkName}},
		})
	}

	cloudInit := &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: in.UserDataSecret}}
	if in.NetworkDataSecret != "" {
		cloudInit.NetworkDataSecretRef = &corev1.LocalObjectReference{Name: in.NetworkDataSecret}
	}
	disks = append(disks, kubevirtv1.Disk{Name: infrav1.CloudInitDiskName, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
	volumes = append(volumes, kubevirtv1.Volume{Name: infrav1.CloudInitDiskName, VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: cloudInit}})

	// The VMI gets the machine's whole name too, so that its events map back to the machine.
	templateAnnotations := map[string]string{naming.AnnotationMachine: m.Name}
	if len(in.KeyPairs) > 0 {
		names, _ := json.Marshal(in.KeyPairs) //nolint:errchkjson // a []string always marshals
		templateAnnotations[naming.AnnotationSSHNames] = string(names)
	}
	diskNames := make([]string, 0, len(disks))
	for _, d := range disks {
		diskNames = append(diskNames, d.Name)
	}
	names, _ := json.Marshal(diskNames) //nolint:errchkjson // a []string always marshals
	templateAnnotations[naming.AnnotationDiskNames] = string(names)

	topology := spec.CPUTopology()
	cpu := &kubevirtv1.CPU{Sockets: topology.Sockets, Cores: topology.Cores, Threads: topology.Threads, MaxSockets: topology.MaxSockets,
		Model: spec.CPUModel, DedicatedCPUPlacement: spec.DedicatedCPUPlacement, IsolateEmulatorThread: spec.IsolateEmulatorThread}
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   in.Namespace,
			Name:        naming.VMName(m.Name),
			Labels:      vmLabels,
			Annotations: annotations,
		},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.VirtualMachineRunStrategy(spec.RunStrategy)),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: templateLabels, Annotations: templateAnnotations},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Hostname: naming.VMName(m.Name),
					Domain: kubevirtv1.DomainSpec{
						CPU:       cpu,
						Memory:    memory,
						Resources: kubevirtv1.ResourceRequirements{Limits: limits},
						Firmware:  firmware(spec.Firmware),
						Features:  features(spec.Firmware),
						Devices: kubevirtv1.Devices{
							Disks:      disks,
							Interfaces: interfaces,
							TPM:        tpm(spec.Firmware),
							// The device plugins of Harvester's pcidevices add-on advertise these
							// resources on the hosts that have them; KubeVirt asks for them in
							// the virt-launcher pod, so the VM lands only on such a host.
							HostDevices: hostDevices(spec.HostDevices),
							GPUs:        gpus(spec.GPUs),
						},
					},
					Networks:                      networks,
					Volumes:                       volumes,
					Affinity:                      affinity(in, labels),
					EvictionStrategy:              ptr.To(evictionStrategy(spec)),
					TerminationGracePeriodSeconds: ptr.To[int64](120),
				},
			},
		},
	}
	return vm, nil
}

// buildDisks returns the PVC templates (for Harvester to create), the VM's disks and volumes,
// and the claim names.
func buildDisks(in *VMInput) ([]corev1.PersistentVolumeClaim, []kubevirtv1.Disk, []kubevirtv1.Volume, []string, error) {
	m := in.Machine
	var claims []corev1.PersistentVolumeClaim
	var disks []kubevirtv1.Disk
	var volumes []kubevirtv1.Volume
	var names []string
	pvcLabels := MachineLabels(in)
	for i, d := range m.Spec.Disks {
		name := m.Spec.DiskName(i)
		claim := ClaimName(m, name)
		pvc := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Labels: pvcLabels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				VolumeMode:  ptr.To(corev1.PersistentVolumeBlock),
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: d.Size}},
			},
		}
		if d.Image != "" {
			img, ok := in.Images[d.Image]
			if !ok {
				return nil, nil, nil, nil, fmt.Errorf("image %q of disk %s was not resolved", d.Image, name)
			}
			pvc.Annotations = map[string]string{naming.AnnotationImageID: img.Namespace + "/" + img.Name}
			pvc.Spec.StorageClassName = ptr.To(img.StorageClassName)
		} else {
			pvc.Spec.StorageClassName = ptr.To(d.StorageClassName)
		}
		claims = append(claims, pvc)
		names = append(names, claim)

		disk := kubevirtv1.Disk{Name: name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBus(d.Bus)}}}
		if d.BootOrder != nil {
			disk.BootOrder = ptr.To(uint(*d.BootOrder)) //nolint:gosec // validated >= 1
		}
		disks = append(disks, disk)
		volumes = append(volumes, kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			},
		}})
	}
	return claims, disks, volumes, names, nil
}

func firmware(f infrav1.Firmware) *kubevirtv1.Firmware {
	if f.BootMode != infrav1.BootModeEFI {
		return nil
	}
	efi := &kubevirtv1.EFI{SecureBoot: ptr.To(f.SecureBoot)}
	if f.PersistentEFIVars {
		efi.Persistent = ptr.To(true)
	}
	return &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: efi}}
}

// features turns on SMM, which UEFI secure boot needs.
func features(f infrav1.Firmware) *kubevirtv1.Features {
	if !f.SecureBoot {
		return nil
	}
	return &kubevirtv1.Features{SMM: &kubevirtv1.FeatureState{Enabled: ptr.To(true)}}
}

func tpm(f infrav1.Firmware) *kubevirtv1.TPMDevice {
	if !f.TPM {
		return nil
	}
	if f.PersistentTPM {
		return &kubevirtv1.TPMDevice{Persistent: ptr.To(true)}
	}
	return &kubevirtv1.TPMDevice{}
}

// affinity merges the user's affinity with the provider's: the failure domain, required (CAPI's
// contract: the machine is placed in it; a host's domain pins the VM to the host), and soft
// anti-affinity between the cluster's machines of the same role.
func affinity(in *VMInput, labels map[string]string) *corev1.Affinity {
	a := &corev1.Affinity{}
	if user := in.Machine.Spec.Affinity; user != nil {
		a = user.DeepCopy()
	}
	if in.FailureDomain != "" && in.FailureDomainKey != "" {
		req := corev1.NodeSelectorRequirement{Key: in.FailureDomainKey, Operator: corev1.NodeSelectorOpIn, Values: []string{in.FailureDomain}}
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		required := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if required == nil || len(required.NodeSelectorTerms) == 0 {
			required = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
		}
		// Terms are ORed: the failure domain must hold in each of them.
		for i := range required.NodeSelectorTerms {
			required.NodeSelectorTerms[i].MatchExpressions = append(required.NodeSelectorTerms[i].MatchExpressions, req)
		}
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = required
	}
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.WeightedPodAffinityTerm{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
			TopologyKey: LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				naming.LabelCluster: labels[naming.LabelCluster],
				naming.LabelRole:    labels[naming.LabelRole],
			}},
		}})
	return a
}

// NetworkNames are the VM's interface names in the VM's order: the management NIC's first, then
// the others in spec order.
func NetworkNames(spec *infrav1.HarvesterMachineSpec) []string {
	order := spec.NICOrder()
	names := make([]string, 0, len(order))
	for _, i := range order {
		names = append(names, spec.NICName(i))
	}
	return names
}

// ManagementNetworkName is the interface name of the machine's management NIC: the one that
// sets `management`, else the first; "" without NICs.
func ManagementNetworkName(spec *infrav1.HarvesterMachineSpec) string {
	if i := spec.ManagementNIC(); i >= 0 {
		return spec.NICName(i)
	}
	return ""
}

func hostDevices(devices []infrav1.HostDevice) []kubevirtv1.HostDevice {
	var out []kubevirtv1.HostDevice
	for _, d := range devices {
		out = append(out, kubevirtv1.HostDevice{Name: d.Name, DeviceName: d.DeviceName})
	}
	return out
}

func gpus(devices []infrav1.HostDevice) []kubevirtv1.GPU {
	var out []kubevirtv1.GPU
	for _, d := range devices {
		out = append(out, kubevirtv1.GPU{Name: d.Name, DeviceName: d.DeviceName})
	}
	return out
}

// OwnedBy tells whether a Harvester object carries the labels of a given HarvesterMachine of
// a given guest cluster. The cluster counts: two management clusters that share a Harvester
// namespace may each have a machine of the same namespace and name.
func OwnedBy(labels map[string]string, g naming.Guest, m *infrav1.HarvesterMachine) bool {
	return labels[naming.LabelManagedBy] == naming.ManagedByValue && labels[naming.LabelCluster] == g.ID() &&
		labels[naming.LabelMachine] == naming.MachineLabelValue(m.Name) && labels[naming.LabelMachineNamespace] == m.Namespace
}

// ClaimNamesOf reads the PVC names of a VM's volumeClaimTemplates annotation.
func ClaimNamesOf(vm *kubevirtv1.VirtualMachine) []string {
	var claims []corev1.PersistentVolumeClaim
	if err := json.Unmarshal([]byte(vm.Annotations[naming.AnnotationVolumeClaimTemplates]), &claims); err != nil {
		return nil
	}
	names := make([]string, 0, len(claims))
	for _, c := range claims {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// evictionStrategy is KubeVirt's eviction strategy for the machine's host maintenance policy:
// LiveMigrate migrates the VM on an eviction of its virt-launcher pod and refuses the eviction
// of a VM that cannot migrate (rather than letting the pod go with the guest in it); External
// refuses every eviction and marks the VM for evacuation, which the provider answers by
// draining the guest's Node, stopping the VM and starting it elsewhere.
func evictionStrategy(spec *infrav1.HarvesterMachineSpec) kubevirtv1.EvictionStrategy {
	if spec.EffectiveHostMaintenancePolicy() == infrav1.HostMaintenanceDrainAndRestart {
		return kubevirtv1.EvictionStrategyExternal
	}
	return kubevirtv1.EvictionStrategyLiveMigrate
}
