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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// A machine whose second NIC is the management NIC reports that NIC's address as InternalIP,
// while its VM keeps the NICs in spec order.
func TestMachineAddressesFollowTheManagementNIC(t *testing.T) {
	g := NewWithT(t)
	spec := &infrav1.HarvesterMachineSpec{Networks: []infrav1.Network{
		{NetworkName: "default/storage"},
		{Name: "mgmt", NetworkName: "default/vlan10", Management: true},
		{NetworkName: "default/vlan30"},
	}}
	g.Expect(NetworkNames(spec)).To(Equal([]string{"mgmt", "nic-0", "nic-2"}))
	g.Expect(ManagementNetworkName(spec)).To(Equal("mgmt"))
	vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "nic-0", IP: "10.20.0.7"},
			{Name: "mgmt", IP: "10.10.0.5"},
			{Name: "nic-2", IP: "10.30.0.9"},
		},
	}}
	g.Expect(guestcloud.MachineAddresses(vmi, NetworkNames(spec), "w-1")).To(Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.10.0.5"},
		{Type: corev1.NodeExternalIP, Address: "10.20.0.7"},
		{Type: corev1.NodeExternalIP, Address: "10.30.0.9"},
		{Type: corev1.NodeHostName, Address: "w-1"},
	}))

	spec.Networks[1].Management = false
	g.Expect(ManagementNetworkName(spec)).To(Equal("nic-0"), "without the flag, the first NIC")
	g.Expect(NetworkNames(spec)).To(Equal([]string{"nic-0", "mgmt", "nic-2"}))
}
