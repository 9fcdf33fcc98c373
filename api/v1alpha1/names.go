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

import "fmt"

// One rule names a machine's disks and NICs and picks its management NIC. The defaulting webhook
// writes the names into the spec; the VM builder, the network data and IPAM read them through
// these methods too, so that a spec the webhook never saw (an older object, a unit test) names
// the same devices everywhere.

// DiskName is the name of disk i: its own, else `disk-<i>`.
func (s *HarvesterMachineSpec) DiskName(i int) string {
	if name := s.Disks[i].Name; name != "" {
		return name
	}
	return fmt.Sprintf("disk-%d", i)
}

// NICName is the interface name of NIC i: its own, else `nic-<i>`.
func (s *HarvesterMachineSpec) NICName(i int) string {
	if name := s.Networks[i].Name; name != "" {
		return name
	}
	return fmt.Sprintf("nic-%d", i)
}

// ManagementNIC is the index of the management NIC (whose address is the node's InternalIP):
// the one that sets `management`, else the first; -1 without NICs.
func (s *HarvesterMachineSpec) ManagementNIC() int {
	for i, n := range s.Networks {
		if n.Management {
			return i
		}
	}
	if len(s.Networks) == 0 {
		return -1
	}
	return 0
}

// NICOrder is the order of the NICs in the VM: the management NIC first, then the others in
// spec order. Harvester's load balancer takes a VM backend's address from the first IPv4 of the
// VMI's interface list, and KubeVirt lists the interfaces in the VM's order: with the management
// NIC first, the control-plane load balancer reaches each node at its InternalIP.
func (s *HarvesterMachineSpec) NICOrder() []int {
	mgmt := s.ManagementNIC()
	if mgmt < 0 {
		return nil
	}
	order := make([]int, 0, len(s.Networks))
	order = append(order, mgmt)
	for i := range s.Networks {
		if i != mgmt {
			order = append(order, i)
		}
	}
	return order
}
