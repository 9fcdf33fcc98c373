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

import "k8s.io/apimachinery/pkg/api/resource"

// The size rules of a machine's VM, in one place: the VM builder lays the VM out by them, the
// resize reconciler grows a running VM to them, and the machine template's capacity (which the
// cluster autoscaler reads) reports them. Devices are named by names.go's rules, and the other
// defaults by HarvesterMachineSpec.Default, which the builder applies to a copy of a spec the
// webhook never saw.

// CPUTopology is how a machine's virtual CPUs are laid out in its VM (not a kind's field).
// +kubebuilder:object:generate=false
type CPUTopology struct {
	Sockets, Cores, Threads uint32
	// MaxSockets is how many sockets the VM can grow to; 0 when it cannot grow.
	MaxSockets uint32
}

// VCPUs is how many virtual CPUs the topology gives.
func (t CPUTopology) VCPUs() uint32 {
	return t.Sockets * t.Cores * t.Threads
}

// CPUTopology is the layout of the machine's CPUs: one socket of `cpu` cores, or, with
// `maxCPU` set, `cpu` sockets of one core each, up to `maxCPU` sockets, since KubeVirt adds
// CPUs to a running VM by socket.
func (s *HarvesterMachineSpec) CPUTopology() CPUTopology {
	cpu := uint32(s.CPU) //nolint:gosec // validated 1..MaxCPU by the webhook
	if s.MaxCPU != 0 {
		return CPUTopology{Sockets: cpu, Cores: 1, Threads: 1, MaxSockets: uint32(s.MaxCPU)} //nolint:gosec // validated cpu..MaxCPU
	}
	return CPUTopology{Sockets: 1, Cores: cpu, Threads: 1}
}

// GuestMemory is the memory the guest sees: `memory` less `reservedMemory`, the part the VM's
// pod keeps for itself.
func (s *HarvesterMachineSpec) GuestMemory() resource.Quantity {
	guest := s.Memory.DeepCopy()
	if s.ReservedMemory != nil {
		guest.Sub(*s.ReservedMemory)
	}
	return guest
}

// MaxGuestMemory is the guest memory the VM can grow to (`maxMemory` less `reservedMemory`),
// nil when it cannot grow.
func (s *HarvesterMachineSpec) MaxGuestMemory() *resource.Quantity {
	if s.MaxMemory == nil {
		return nil
	}
	most := s.MaxMemory.DeepCopy()
	if s.ReservedMemory != nil {
		most.Sub(*s.ReservedMemory)
	}
	return &most
}
