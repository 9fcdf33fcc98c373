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
	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// What a connection's cache keeps of the labels and annotations of each kind: those the provider
// reads from the cache, each with who reads it; every other label and annotation is dropped
// before the object is stored. Live reads (s.C.Get, s.C.List) see whole objects and are not
// concerned.

// keptVMLabels are the labels kept of a VM.
var keptVMLabels = []string{
	naming.LabelManagedBy,        // the cache's selector (cacheSelection); build.OwnedBy in VMService.Get
	naming.LabelCluster,          // the cache's selector; build.OwnedBy
	naming.LabelMachine,          // build.OwnedBy; naming.MachineOf in harvesterObjectToMachine (controllers)
	naming.LabelMachineNamespace, // build.OwnedBy; naming.MachineOf
}

// keptVMAnnotations are the annotations kept of a VM.
var keptVMAnnotations = []string{
	naming.AnnotationMachine,               // naming.MachineOf in harvesterObjectToMachine (controllers)
	naming.AnnotationStoppedForHost,        // pkg/maintenance
	naming.AnnotationRunStrategyBeforeStop, // pkg/maintenance
	naming.AnnotationHarvesterRunStrategy,  // pkg/maintenance, for a VM Harvester halted
}

// keptVMILabels are the labels kept of a VMI.
var keptVMILabels = []string{
	naming.LabelManagedBy,        // the cache's selector
	naming.LabelCluster,          // the cache's selector
	naming.LabelMachine,          // naming.MachineOf in harvesterObjectToMachine (controllers)
	naming.LabelMachineNamespace, // naming.MachineOf
}

// keptVMIAnnotations are the annotations kept of a VMI.
var keptVMIAnnotations = []string{
	naming.AnnotationMachine, // naming.MachineOf in harvesterObjectToMachine (controllers)
}

// keptVolumeLabels are the labels kept of a volume (PVC).
var keptVolumeLabels = []string{
	naming.LabelManagedBy,        // the cache's selector; VMService.cleanup's list of a machine's volumes
	naming.LabelCluster,          // the cache's selector; VMService.cleanup's list
	naming.LabelMachine,          // VMService.cleanup's list; naming.MachineOf in volumeToMachine (controllers)
	naming.LabelMachineNamespace, // VMService.cleanup's list; naming.MachineOf
}

// keptVolumeAnnotations are the annotations kept of a volume.
var keptVolumeAnnotations = []string{
	naming.AnnotationMachine, // naming.MachineOf in volumeToMachine (controllers)
}

// keptLoadBalancerLabels are the labels kept of a load balancer (the provider's and guests').
var keptLoadBalancerLabels = []string{
	naming.LabelManagedBy,              // Guest.Owns in LoadBalancerService.EnsureControlPlane
	naming.LabelCluster,                // Guest.Owns; loadBalancerToCluster (controllers)
	guestcloud.LabelLBCluster,          // LoadBalancerService.DeleteGuest's list; loadBalancerToCluster
	guestcloud.LabelLBServiceNamespace, // the event of DeleteGuest's deletions (controllers)
	guestcloud.LabelLBServiceName,      // the event of DeleteGuest's deletions
}

// keptLoadBalancerAnnotations are the annotations kept of a load balancer: none is read.
var keptLoadBalancerAnnotations []string

// keptHostLabels are the labels kept of a host (Node).
var keptHostLabels = []string{
	HostWitnessLabel,           // harvester.FailureDomains
	corev1.LabelTopologyZone,   // build.LabelZone: harvester.FailureDomains, harvester.FailureDomainOf
	corev1.LabelTopologyRegion, // build.LabelRegion: harvester.FailureDomains
}

// keptHostAnnotations are the annotations kept of a host: HostMaintenanceAnnotations, which
// maintenance.HostEmptying reads.
var keptHostAnnotations = HostMaintenanceAnnotations

// maxKeptAnnotationValue bounds the value of a kept annotation: those read hold names (a
// machine's, a host's: at most 253 bytes) or run strategies. A longer value is dropped as if the
// annotation were not there, so that a kept key does not carry an unbounded value into the cache.
const maxKeptAnnotationValue = 253

// maxKeptMessage bounds a kept condition message of a load balancer (guests write load
// balancers): Harvester's messages are far shorter.
const maxKeptMessage = 1024

// slimCached trims what a connection's cache keeps of an object to what the provider reads of
// it. Each connection caches every provider-labelled VM, VMI and volume of its target namespaces
// and every load balancer there, and guests can write objects that carry the provider's labels
// (volumes, with their CSI driver's credential; load balancers, with their CCM's); N clusters with
// their own identities in one namespace also hold N copies of each. Of every kind the cache keeps
// the object's name, namespace, UID, resourceVersion (what patches and deletions are locked to),
// creation and deletion times, the labels and annotations listed above, and:
//   - a VM: its run strategy; of its template the CPU sockets, guest memory and the cloud-init
//     volume's Secret (what a resize and the Secret's adoption read); its printable status and
//     RestartRequired condition;
//   - a VMI: whether its CPUs are pinned; its phase, host, evacuation host, NICs' names and
//     addresses, the conditions a machine reads (scheduling, migratability, CPU and memory
//     hotplug), CPU sockets, current guest memory, migration's progress and the time it first ran;
//   - a volume: its requested and actual size (what a disk grown in place waits on);
//   - a load balancer: Harvester's controller's finalizer, its IPAM mode, address, pool and
//     first failing Ready condition's message (what the control plane's waits on, and what a
//     guest's deletion waits on).
func slimCached(obj any) (any, error) {
	switch o := obj.(type) {
	case *kubevirtv1.VirtualMachine:
		return slimVM(o), nil
	case *kubevirtv1.VirtualMachineInstance:
		return slimVMI(o), nil
	case *corev1.PersistentVolumeClaim:
		return slimVolume(o), nil
	case *lbv1.LoadBalancer:
		return slimLoadBalancer(o), nil
	case metav1.Object:
		o.SetManagedFields(nil)
		return obj, nil
	}
	return obj, nil
}

// keptMeta is what the cache keeps of an object's metadata: its identity, times, and the labels
// and annotations named.
func keptMeta(m *metav1.ObjectMeta, labels, annotations []string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels:      pick(m.Labels, labels, 0),
		Annotations: pick(m.Annotations, annotations, maxKeptAnnotationValue),
	}
}

// pick returns the entries of m under keys (nil when none), without values longer than limit
// when limit is not 0 (label values are at most 63 bytes: the API server sees to it).
func pick(m map[string]string, keys []string, limit int) map[string]string {
	var out map[string]string
	for _, k := range keys {
		v, ok := m[k]
		if !ok || (limit > 0 && len(v) > limit) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

func slimVM(o *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   o.TypeMeta,
		ObjectMeta: keptMeta(&o.ObjectMeta, keptVMLabels, keptVMAnnotations),
		Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: o.Spec.RunStrategy},
		Status:     kubevirtv1.VirtualMachineStatus{PrintableStatus: o.Status.PrintableStatus},
	}
	for _, c := range o.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineRestartRequired {
			vm.Status.Conditions = append(vm.Status.Conditions, kubevirtv1.VirtualMachineCondition{Type: c.Type, Status: c.Status, Message: c.Message})
		}
	}
	if t := o.Spec.Template; t != nil {
		template := &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
		if cpu := t.Spec.Domain.CPU; cpu != nil {
			template.Spec.Domain.CPU = &kubevirtv1.CPU{Sockets: cpu.Sockets}
		}
		if mem := t.Spec.Domain.Memory; mem != nil {
			template.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: mem.Guest}
		}
		template.Spec.Volumes = keptVMVolumes(t.Spec.Volumes)
		vm.Spec.Template = template
	}
	return vm
}

// maxKeptClaimVolumes is how many volume claims of a VM the cache keeps: a machine's disks
// (at most 16), which are the VM's first volumes.
const maxKeptClaimVolumes = 16

// keptVMVolumes are the volumes of a VM's template a machine reads: the cloud-init disk's Secret
// (its adoption) and the claims of its disks (their growth; build.VolumeClaimOf), each by
// name only. Volumes the guest's CSI driver hot-plugs, and names longer than the API allows a
// machine's, are left out, so that a guest cannot grow what the cache holds.
func keptVMVolumes(volumes []kubevirtv1.Volume) []kubevirtv1.Volume {
	var kept []kubevirtv1.Volume
	claims := 0
	for _, v := range volumes {
		switch {
		case len(v.Name) > validation.DNS1123LabelMaxLength:
		case v.Name == infrav1.CloudInitDiskName && v.CloudInitNoCloud != nil && v.CloudInitNoCloud.UserDataSecretRef != nil &&
			len(v.CloudInitNoCloud.UserDataSecretRef.Name) <= maxKeptAnnotationValue:
			kept = append(kept, kubevirtv1.Volume{Name: v.Name, VolumeSource: kubevirtv1.VolumeSource{
				CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: v.CloudInitNoCloud.UserDataSecretRef.Name}},
			}})
		case v.PersistentVolumeClaim != nil && !v.PersistentVolumeClaim.Hotpluggable && claims < maxKeptClaimVolumes &&
			len(v.PersistentVolumeClaim.ClaimName) <= maxKeptAnnotationValue:
			claims++
			kept = append(kept, kubevirtv1.Volume{Name: v.Name, VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName},
				},
			}})
		}
	}
	return kept
}

// keptVMIConditions are the VMI conditions a machine reads: vmiWaitReason (scheduling),
// LiveMigratable and pendingResize (pkg/harvester's resize).
var keptVMIConditions = []kubevirtv1.VirtualMachineInstanceConditionType{
	kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled),
	kubevirtv1.VirtualMachineInstanceIsMigratable,
	kubevirtv1.VirtualMachineInstanceVCPUChange,
	kubevirtv1.VirtualMachineInstanceMemoryChange,
}

func slimVMI(o *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{
		TypeMeta:   o.TypeMeta,
		ObjectMeta: keptMeta(&o.ObjectMeta, keptVMILabels, keptVMIAnnotations),
		Status: kubevirtv1.VirtualMachineInstanceStatus{
			Phase: o.Status.Phase, NodeName: o.Status.NodeName, EvacuationNodeName: o.Status.EvacuationNodeName,
		},
	}
	if cpu := o.Spec.Domain.CPU; cpu != nil && cpu.DedicatedCPUPlacement {
		vmi.Spec.Domain.CPU = &kubevirtv1.CPU{DedicatedCPUPlacement: true}
	}
	for _, i := range o.Status.Interfaces {
		vmi.Status.Interfaces = append(vmi.Status.Interfaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: i.Name, IP: i.IP, IPs: i.IPs})
	}
	for _, c := range o.Status.Conditions {
		for _, t := range keptVMIConditions {
			if c.Type == t {
				vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
					Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
				})
			}
		}
	}
	if t := o.Status.CurrentCPUTopology; t != nil {
		vmi.Status.CurrentCPUTopology = &kubevirtv1.CPUTopology{Sockets: t.Sockets}
	}
	if m := o.Status.Memory; m != nil {
		vmi.Status.Memory = &kubevirtv1.MemoryStatus{GuestCurrent: m.GuestCurrent}
	}
	if m := o.Status.MigrationState; m != nil {
		vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{
			Completed: m.Completed, Failed: m.Failed, SourceNode: m.SourceNode, TargetNode: m.TargetNode, FailureReason: m.FailureReason,
		}
	}
	for _, t := range o.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running { // the provisioning metrics (controllers' observeProvisioned)
			vmi.Status.PhaseTransitionTimestamps = []kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{t}
			break
		}
	}
	return vmi
}

func slimVolume(o *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{TypeMeta: o.TypeMeta, ObjectMeta: keptMeta(&o.ObjectMeta, keptVolumeLabels, keptVolumeAnnotations)}
	if q, ok := o.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: q}
	}
	if q, ok := o.Status.Capacity[corev1.ResourceStorage]; ok {
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: q}
	}
	return pvc
}

func slimLoadBalancer(o *lbv1.LoadBalancer) *lbv1.LoadBalancer {
	lb := &lbv1.LoadBalancer{TypeMeta: o.TypeMeta, ObjectMeta: keptMeta(&o.ObjectMeta, keptLoadBalancerLabels, keptLoadBalancerAnnotations)}
	for _, f := range o.Finalizers {
		if f == guestcloud.FinalizerHarvesterLBController { // guestcloud.PoolAddressUnguarded, in DeleteGuest
			lb.Finalizers = []string{f}
			break
		}
	}
	if o.Spec.IPAM == lbv1.DHCP || o.Spec.IPAM == lbv1.Pool { // EnsureControlPlane compares it with DHCP
		lb.Spec.IPAM = o.Spec.IPAM
	}
	lb.Status.Address = clip(o.Status.Address, maxKeptAnnotationValue)                                 // LoadBalancerAddress
	lb.Status.AllocatedAddress.IPPool = clip(o.Status.AllocatedAddress.IPPool, maxKeptAnnotationValue) // PoolAddressUnguarded
	for _, c := range o.Status.Conditions {
		if c.Type == lbv1.LoadBalancerReady && c.Status == corev1.ConditionFalse { // guestcloud.LoadBalancerProblem
			lb.Status.Conditions = []lbv1.Condition{{Type: c.Type, Status: c.Status, Message: clip(c.Message, maxKeptMessage)}}
			break
		}
	}
	return lb
}

// clip is s cut to at most limit bytes.
func clip(s string, limit int) string {
	if len(s) > limit {
		return s[:limit]
	}
	return s
}

// HostMaintenanceAnnotations are the annotations of a Harvester host that say it is being
// emptied: Harvester's maintenance mode sets them (drain requested, forced, then the status).
var HostMaintenanceAnnotations = []string{"harvesterhci.io/drain-requested", "harvesterhci.io/drain-forced", "harvesterhci.io/maintain-status"}

// HostDrainTaint is the taint a Harvester upgrade puts on a host it empties (KubeVirt's node
// drain taint: KubeVirt migrates the VMs it can off it).
const HostDrainTaint = "kubevirt.io/drain"

// HostWitnessLabel marks a Harvester witness node (v1.3+): it holds etcd's quorum and runs no VM.
const HostWitnessLabel = "node-role.harvesterhci.io/witness"

// slimNode keeps of a cached host its name, UID, resourceVersion and deletion, the labels of
// keptHostLabels, its schedulability and what says it is being emptied (the maintenance
// annotations and the drain taint).
func slimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{
		TypeMeta: node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion, DeletionTimestamp: node.DeletionTimestamp,
			Labels: pick(node.Labels, keptHostLabels, 0), Annotations: pick(node.Annotations, keptHostAnnotations, 0),
		},
		Spec: corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable},
	}
	for _, t := range node.Spec.Taints {
		if t.Key == HostDrainTaint {
			slim.Spec.Taints = append(slim.Spec.Taints, t)
		}
	}
	return slim, nil
}
