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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// MachineCapacity is the capacity of a node made from a machine spec, as the cluster autoscaler
// reads it from a machine template's status.capacity to scale a node group up from zero: cpu
// (the VM's virtual CPUs), memory (what the guest sees) and ephemeral-storage (the size of the boot
// disk, which holds the node's root filesystem). Host devices and vGPUs are not counted: the
// resource a guest node offers for them (`nvidia.com/gpu`, say) is whatever the device plugin
// the guest runs advertises, which the spec does not say.
func MachineCapacity(spec *infrav1.HarvesterMachineSpec) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(spec.CPUTopology().VCPUs()), resource.DecimalSI),
		corev1.ResourceMemory: spec.GuestMemory(),
	}
	if disk := bootDisk(spec.Disks); disk != nil {
		out[corev1.ResourceEphemeralStorage] = disk.Size.DeepCopy()
	}
	return out
}

// bootDisk is the disk the VM boots from: the lowest boot order, else (no disk sets one; the
// webhook then gives the first disk boot order 1) the first.
func bootDisk(disks []infrav1.Disk) *infrav1.Disk {
	var boot *infrav1.Disk
	for i := range disks {
		d := &disks[i]
		if d.BootOrder != nil && (boot == nil || *d.BootOrder < *boot.BootOrder) {
			boot = d
		}
	}
	if boot == nil && len(disks) > 0 {
		boot = &disks[0]
	}
	return boot
}

// MachineNodeInfo is the architecture and operating system of the nodes this provider makes:
// Linux guests; amd64, because the VM builder asks for no architecture, so KubeVirt gives the
// VM its hosts' and Harvester's hosts are x86-64 machines (its arm64 builds are experimental
// and not supported by this provider).
func MachineNodeInfo() infrav1.NodeInfo {
	return infrav1.NodeInfo{Architecture: infrav1.ArchitectureAmd64, OperatingSystem: "linux"}
}
