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
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// ParseInterfaceIP parses an address as the guest agent reports it, with or without a prefix
// length ("10.0.0.5" or "10.0.0.5/24"), and tells whether a node may use it: not loopback,
// link-local, multicast or unspecified.
func ParseInterfaceIP(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	addr = addr.Unmap().WithZone("")
	usable := !addr.IsLoopback() && !addr.IsLinkLocalUnicast() && !addr.IsLinkLocalMulticast() &&
		!addr.IsMulticast() && !addr.IsUnspecified() && !addr.IsInterfaceLocalMulticast()
	return addr, usable
}

// InterfaceIPs returns the usable addresses of one VMI interface, without duplicates, in the
// order the guest agent reported them (ipAddress first).
func InterfaceIPs(iface kubevirtv1.VirtualMachineInstanceNetworkInterface) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, s := range append([]string{iface.IP}, iface.IPs...) {
		if addr, ok := ParseInterfaceIP(s); ok && !seen[addr] {
			seen[addr] = true
			out = append(out, addr)
		}
	}
	return out
}

// MachineAddresses classifies a VMI's addresses for a machine: the interfaces named in
// networks only (the first is the management network: its addresses are InternalIP, the other
// networks' ExternalIP), usable addresses only, and the hostname.
func MachineAddresses(vmi *kubevirtv1.VirtualMachineInstance, networks []string, hostname string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	seen := map[string]bool{}
	for i, name := range networks {
		kind := corev1.NodeExternalIP
		if i == 0 {
			kind = corev1.NodeInternalIP
		}
		for _, iface := range vmi.Status.Interfaces {
			if iface.Name != name {
				continue
			}
			for _, addr := range InterfaceIPs(iface) {
				if !seen[addr.String()] {
					seen[addr.String()] = true
					out = append(out, corev1.NodeAddress{Type: kind, Address: addr.String()})
				}
			}
		}
	}
	if hostname != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostname})
	}
	return out
}

// HasInternalIP tells whether addresses contain an InternalIP.
func HasInternalIP(addresses []corev1.NodeAddress) bool {
	for _, a := range addresses {
		if a.Type == corev1.NodeInternalIP {
			return true
		}
	}
	return false
}
