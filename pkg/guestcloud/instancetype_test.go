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
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// A machine's instance type counts every vCPU, whichever topology the provider gave it: cores
// of one socket, or (with CPU hot-plug) sockets of one core, as KubeVirt adds CPUs by socket.
func TestInstanceTypeCountsEveryVCPU(t *testing.T) {
	g := NewWithT(t)
	vm := func(cpu *kubevirtv1.CPU) *kubevirtv1.VirtualMachine {
		guest := resource.MustParse("8Gi")
		return &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{CPU: cpu, Memory: &kubevirtv1.Memory{Guest: &guest}}}}}}
	}
	g.Expect(InstanceType(vm(&kubevirtv1.CPU{Cores: 4, Sockets: 1, Threads: 1}))).To(Equal("4cpu-8Gi"))
	g.Expect(InstanceType(vm(&kubevirtv1.CPU{Cores: 1, Sockets: 4, Threads: 1, MaxSockets: 8}))).To(Equal("4cpu-8Gi"), "hot-pluggable: sockets of one core")
	g.Expect(InstanceType(vm(&kubevirtv1.CPU{Cores: 2, Sockets: 2, Threads: 2}))).To(Equal("8cpu-8Gi"))
	g.Expect(InstanceType(vm(&kubevirtv1.CPU{Cores: 4}))).To(Equal("4cpu-8Gi"), "unset counts as one")
	g.Expect(InstanceType(vm(nil))).To(BeEmpty())
	g.Expect(InstanceType(&kubevirtv1.VirtualMachine{})).To(BeEmpty())
}
