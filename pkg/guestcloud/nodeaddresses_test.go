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
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func dualStackVMI() *kubevirtv1.VirtualMachineInstance {
	multus := func(n string) kubevirtv1.NetworkSource {
		return kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: n}}
	}
	return &kubevirtv1.VirtualMachineInstance{
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Hostname: "node-1",
			Networks: []kubevirtv1.Network{
				{Name: "mgmt", NetworkSource: multus("default/vlan10")},
				{Name: "data", NetworkSource: multus("default/vlan20")},
				{Name: "pod", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
			},
		},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "mgmt", IP: "10.10.0.5", IPs: []string{"10.10.0.5/16", "10.10.0.6", "fd00:10::5/64", "fe80::1"}},
			{Name: "data", IP: "10.20.0.7", IPs: []string{"10.20.0.7", "fd00:20::7"}},
			{Name: "pod", IP: "10.52.0.9"},
			{InterfaceName: "cni0", IP: "10.42.0.1"},
		}},
	}
}

func TestNodeAddressesDefaultToFirstIPv4AndIPv6OfManagement(t *testing.T) {
	g := NewWithT(t)
	got := NodeAddresses(dualStackVMI(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, NodeAddressOptions{})
	g.Expect(got).To(Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.10.0.5"},
		{Type: corev1.NodeInternalIP, Address: "fd00:10::5"},
		{Type: corev1.NodeExternalIP, Address: "10.10.0.6"},
		{Type: corev1.NodeExternalIP, Address: "10.20.0.7"},
		{Type: corev1.NodeExternalIP, Address: "fd00:20::7"},
		{Type: corev1.NodeHostName, Address: "node-1"},
	}), "only Multus interfaces of the spec, no link-local, prefix lengths dropped")
}

func TestNodeAddressesFollowFlagsAndAnnotation(t *testing.T) {
	g := NewWithT(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}

	got := NodeAddresses(dualStackVMI(), node, NodeAddressOptions{ManagementNetwork: "data"})
	g.Expect(got[:2]).To(Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.20.0.7"}, {Type: corev1.NodeInternalIP, Address: "fd00:20::7"},
	}))

	got = NodeAddresses(dualStackVMI(), node, NodeAddressOptions{
		NodeIPCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")},
		ExcludedCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00::/8")},
	})
	g.Expect(got).To(Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.20.0.7"},
		{Type: corev1.NodeExternalIP, Address: "10.10.0.5"},
		{Type: corev1.NodeExternalIP, Address: "10.10.0.6"},
		{Type: corev1.NodeHostName, Address: "node-1"},
	}))

	node.Annotations = map[string]string{AnnotationProvidedNodeIP: "10.10.0.6,fd00:20::7"}
	got = NodeAddresses(dualStackVMI(), node, NodeAddressOptions{NodeIPCIDRs: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}})
	g.Expect(got[:2]).To(Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.10.0.6"}, {Type: corev1.NodeInternalIP, Address: "fd00:20::7"},
	}), "kubelet's --node-ip wins over the CIDR flag")
}

// The management NIC a machine chose (the VM builder's annotation) gives the node its
// InternalIPs, unless the cloud provider's flag names another.
func TestNodeAddressesFollowTheMachinesManagementNIC(t *testing.T) {
	g := NewWithT(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	vmi := dualStackVMI()
	vmi.Annotations = map[string]string{AnnotationManagementNetwork: "data"}
	got := NodeAddresses(vmi, node, NodeAddressOptions{})
	g.Expect(got[:2]).To(Equal([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.20.0.7"}, {Type: corev1.NodeInternalIP, Address: "fd00:20::7"},
	}))
	got = NodeAddresses(vmi, node, NodeAddressOptions{ManagementNetwork: "mgmt"})
	g.Expect(got[0]).To(Equal(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.10.0.5"}), "the flag wins")

	vmi.Annotations[AnnotationManagementNetwork] = "pod" // not a Multus network: ignored
	got = NodeAddresses(vmi, node, NodeAddressOptions{})
	g.Expect(got[0]).To(Equal(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.10.0.5"}))
}
