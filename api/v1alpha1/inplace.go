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
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InPlaceUpdate is what of desired a running machine of spec current takes without a new VM:
// current with desired's cpu when current has maxCPU (the same in both) and desired's cpu
// lies between current's and it, desired's memory likewise with maxMemory (and the same
// reservedMemory), and desired's disk sizes where image disks only grow and nothing else of the
// disks changes (Harvester's image storage classes allow volume expansion, and Longhorn and
// KubeVirt's ExpandDisks grow a running VM's volume). KubeVirt adds CPU sockets and guest memory to a running VM up to the
// maximums it was made with, and refuses fewer without a restart
// (docs/decisions/0008-in-place-updates.md). refused says why each cpu or memory change that is
// not taken cannot be; every other difference between the result and desired needs a new
// machine.
func InPlaceUpdate(current, desired *HarvesterMachineSpec, path *field.Path) (updated HarvesterMachineSpec, refused field.ErrorList) {
	updated = *current.DeepCopy()
	if desired.CPU != current.CPU {
		p := path.Child("cpu")
		switch {
		case current.MaxCPU == 0:
			refused = append(refused, field.Forbidden(p, "cannot change on a machine made without maxCPU: its VM cannot take CPUs while it runs"))
		case desired.MaxCPU != current.MaxCPU:
			refused = append(refused, field.Forbidden(path.Child("maxCPU"), "cannot change: it is the VM's maximum, fixed when it was made"))
		case desired.CPU < current.CPU:
			refused = append(refused, field.Forbidden(p, fmt.Sprintf("cannot shrink from %d while the machine runs: KubeVirt removes CPUs only with a restart", current.CPU)))
		case desired.CPU > current.MaxCPU:
			refused = append(refused, field.Forbidden(p, fmt.Sprintf("can grow only up to maxCPU (%d)", current.MaxCPU)))
		default:
			updated.CPU = desired.CPU
		}
	}
	if !desired.Memory.Equal(current.Memory) {
		p := path.Child("memory")
		switch {
		case current.MaxMemory == nil:
			refused = append(refused, field.Forbidden(p, "cannot change on a machine made without maxMemory: its VM cannot take memory while it runs"))
		case !equalQuantity(desired.MaxMemory, current.MaxMemory):
			refused = append(refused, field.Forbidden(path.Child("maxMemory"), "cannot change: it is the VM's maximum, fixed when it was made"))
		case !equalQuantity(desired.ReservedMemory, current.ReservedMemory):
			refused = append(refused, field.Forbidden(path.Child("reservedMemory"), "cannot change while the memory changes in place"))
		case desired.Memory.Cmp(current.Memory) < 0:
			refused = append(refused, field.Forbidden(p, "cannot shrink from "+current.Memory.String()+" while the machine runs: KubeVirt takes memory back only with a restart"))
		case desired.Memory.Cmp(*current.MaxMemory) > 0:
			refused = append(refused, field.Forbidden(p, "can grow only up to maxMemory ("+current.MaxMemory.String()+")"))
		default:
			updated.Memory = desired.Memory.DeepCopy()
		}
	}
	if len(desired.Disks) == len(current.Disks) {
		grown := slices.Clone(updated.Disks)
		for i := range desired.Disks {
			cur, des := current.Disks[i], desired.Disks[i]
			if cur.Size.Equal(des.Size) {
				continue
			}
			p := path.Child("disks").Index(i).Child("size")
			switch {
			case des.Size.Cmp(cur.Size) < 0:
				refused = append(refused, field.Forbidden(p, "cannot shrink from "+cur.Size.String()+": volumes only grow"))
			case cur.Image == "":
				refused = append(refused, field.Forbidden(p, "only image disks grow in place (Harvester's image storage classes allow volume expansion; storage class "+cur.StorageClassName+" may not)"))
			default:
				grown[i].Size = des.Size.DeepCopy()
			}
		}
		// The disks grow only when nothing else of them changes (a new image is a new disk).
		if reflect.DeepEqual(grown, desired.Disks) {
			updated.Disks = grown
		}
	}
	return updated, refused
}

// Resizable says whether a machine of spec can take CPUs or memory while it runs.
func (s *HarvesterMachineSpec) Resizable() bool {
	return s.MaxCPU != 0 || s.MaxMemory != nil
}

func equalQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
