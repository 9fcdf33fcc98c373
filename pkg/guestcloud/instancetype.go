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

package guestcloud

import (
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// VCPUs is how many virtual CPUs a CPU topology gives: sockets x cores x threads, each at
// least one. The provider gives a VM its CPUs as cores of one socket, or, with maxCPU set (CPU
// hot-plug), as sockets of one core each: counting cores alone reads the second as 1 CPU.
func VCPUs(cpu *kubevirtv1.CPU) uint32 {
	if cpu == nil {
		return 0
	}
	atLeastOne := func(n uint32) uint32 { return max(n, 1) }
	return atLeastOne(cpu.Sockets) * atLeastOne(cpu.Cores) * atLeastOne(cpu.Threads)
}

// InstanceType is the instance type the cloud provider reports for a VM: `<vCPUs>cpu-<guest
// memory>`, or "" when the VM does not say both.
func InstanceType(vm *kubevirtv1.VirtualMachine) string {
	t := vm.Spec.Template
	if t == nil || t.Spec.Domain.CPU == nil || t.Spec.Domain.Memory == nil || t.Spec.Domain.Memory.Guest == nil {
		return ""
	}
	return fmt.Sprintf("%dcpu-%s", VCPUs(t.Spec.Domain.CPU), t.Spec.Domain.Memory.Guest.String())
}
