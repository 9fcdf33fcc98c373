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
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestMachineAddresses(t *testing.T) {
	g := NewWithT(t)
	vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "nic-0", IP: "10.10.0.5/16", IPs: []string{"10.10.0.5/16", "fe80::5054:ff:fe00:1", "fd00:10::5"}},
			{Name: "storage", IP: "10.20.0.7", IPs: []string{"10.20.0.7", "127.0.0.1", "ff02::1"}},
			{InterfaceName: "cni0", IP: "10.42.0.1"}, // the guest's own, not in the spec
			{Name: "other", IP: "192.168.1.1"},       // a NIC the machine does not name
			{Name: "nic-0", IP: "10.10.0.5"},         // reported twice
		},
	}}
	got := MachineAddresses(vmi, []string{"nic-0", "storage"}, "cp-1")
	g.Expect(got).To(Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.10.0.5"},
		{Type: corev1.NodeInternalIP, Address: "fd00:10::5"},
		{Type: corev1.NodeExternalIP, Address: "10.20.0.7"},
		{Type: corev1.NodeHostName, Address: "cp-1"},
	}))
	g.Expect(HasInternalIP(got)).To(BeTrue())
	g.Expect(HasInternalIP(MachineAddresses(&kubevirtv1.VirtualMachineInstance{}, []string{"nic-0"}, "cp-1"))).To(BeFalse())
}

func TestParseInterfaceIP(t *testing.T) {
	cases := map[string]bool{
		"10.0.0.1": true, "10.0.0.1/24": true, "2001:db8::1/64": true, "::ffff:10.0.0.1": true,
		"fe80::1": false, "127.0.0.1": false, "0.0.0.0": false, "224.0.0.1": false, "169.254.1.1": false, "nonsense": false, "": false,
	}
	for in, want := range cases {
		if _, ok := ParseInterfaceIP(in); ok != want {
			t.Errorf("ParseInterfaceIP(%q) usable = %v, want %v", in, ok, want)
		}
	}
}
