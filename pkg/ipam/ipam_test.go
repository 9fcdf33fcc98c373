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

package ipam

import (
	"testing"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// The management NIC is the one that sets `management`, wherever it is in the spec: its claimed
// address is the machine's one InternalIP (it was the first NIC's, so a machine whose management
// NIC was second had two InternalIPs, the wrong one first), and its network data comes first,
// with the default route.
func TestClaimedAddressesFollowTheManagementNIC(t *testing.T) {
	g := NewWithT(t)
	hm := &infrav1.HarvesterMachine{Spec: infrav1.HarvesterMachineSpec{Networks: []infrav1.Network{
		{NetworkName: "default/storage", AddressesFromPools: []infrav1.IPPoolReference{{Kind: "InClusterIPPool", Name: "storage"}}},
		{NetworkName: "default/mgmt", Management: true, AddressesFromPools: []infrav1.IPPoolReference{{Kind: "InClusterIPPool", Name: "mgmt"}}},
	}}}
	hm.Status.IPAddresses = []infrav1.ClaimedIPAddress{
		{Interface: "nic-0", Pool: "InClusterIPPool/storage", Claim: "a", Address: "10.1.0.5/24", Gateway: "10.1.0.1"},
		{Interface: "nic-1", Pool: "InClusterIPPool/mgmt", Claim: "b", Address: "10.0.0.5/24", Gateway: "10.0.0.1"},
	}
	g.Expect(MachineAddresses(hm)).To(ConsistOf(
		clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"},
		clusterv1.MachineAddress{Type: clusterv1.MachineExternalIP, Address: "10.1.0.5"},
	))

	data, macs, err := NetworkData(hm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(macs).To(HaveLen(2))
	g.Expect(string(data)).To(ContainSubstring("10.0.0.1"), "the management NIC's gateway is the default route")
	g.Expect(string(data)).NotTo(ContainSubstring("via: 10.1.0.1"))
}
