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

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Each size rule of a machine's VM: one socket of cpu cores, or sockets of one core up to maxCPU
// with hot-plug; the guest's memory and its maximum less the reserved memory.
func TestAMachinesSizeRules(t *testing.T) {
	s := HarvesterMachineSpec{CPU: 4, Memory: resource.MustParse("8Gi")}
	if got, want := s.CPUTopology(), (CPUTopology{Sockets: 1, Cores: 4, Threads: 1}); got != want {
		t.Fatalf("without maxCPU: %+v, want %+v", got, want)
	}
	s.MaxCPU = 8
	if got, want := s.CPUTopology(), (CPUTopology{Sockets: 4, Cores: 1, Threads: 1, MaxSockets: 8}); got != want {
		t.Fatalf("with maxCPU: %+v, want %+v", got, want)
	}
	if got := s.CPUTopology().VCPUs(); got != 4 {
		t.Fatalf("VCPUs with maxCPU = %d, want 4", got)
	}

	if got := s.GuestMemory(); got.String() != "8Gi" {
		t.Fatalf("guest memory without reservedMemory = %s", got.String())
	}
	if s.MaxGuestMemory() != nil {
		t.Fatal("a machine without maxMemory has a maximum guest memory")
	}
	s.ReservedMemory = ptr.To(resource.MustParse("256Mi"))
	s.MaxMemory = ptr.To(resource.MustParse("16Gi"))
	if got := s.GuestMemory(); got.String() != "7936Mi" {
		t.Fatalf("guest memory = %s, want 7936Mi", got.String())
	}
	if got := s.MaxGuestMemory(); got == nil || got.String() != "16128Mi" {
		t.Fatalf("max guest memory = %v, want 16128Mi", got)
	}
	if s.Memory.String() != "8Gi" || s.MaxMemory.String() != "16Gi" {
		t.Fatal("a size rule changed the spec")
	}
}
