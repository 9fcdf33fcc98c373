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
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// AnnotationProvidedNodeIP is the annotation kubelet sets from its --node-ip flag when an
// external cloud provider runs; the cloud provider must keep those addresses as InternalIP.
const AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

// NodeAddressOptions shape how a node's addresses are classified.
type NodeAddressOptions struct {
	// ManagementNetwork is the VMI network (interface) name whose addresses are the node's;
	// empty means the one the VMI's AnnotationManagementNetwork names, else the first network
	// of the VMI spec.
	ManagementNetwork string
	// NodeIPCIDRs choose the InternalIPs when no provided-node-ip annotation does.
	NodeIPCIDRs []netip.Prefix
	// ExcludedCIDRs are never reported.
	ExcludedCIDRs []netip.Prefix
}

// NodeAddresses classifies a VMI's addresses for its guest Node, as the upstream Harvester cloud
// provider does: addresses of the Multus interfaces the VMI spec names (the management network
// first), usable ones only; InternalIP for those the node's provided-node-ip annotation names,
// else for those in NodeIPCIDRs, else for the first IPv4 and first IPv6 of the management
// network; ExternalIP for the rest; and the hostname.
func NodeAddresses(vmi *kubevirtv1.VirtualMachineInstance, node *corev1.Node, o NodeAddressOptions) []corev1.NodeAddress {
	multus := map[string]bool{}
	var order []string
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil {
			multus[n.Name] = true
			order = append(order, n.Name)
		}
	}
	mgmt := o.ManagementNetwork
	if a := vmi.Annotations[AnnotationManagementNetwork]; mgmt == "" && multus[a] {
		mgmt = a // the machine's own choice, when it is not the first NIC
	}
	if mgmt == "" && len(order) > 0 {
		mgmt = order[0]
	}
	if i := slices.Index(order, mgmt); i > 0 {
		order = append([]string{mgmt}, slices.Delete(order, i, i+1)...)
	}

	type candidate struct {
		addr netip.Addr
		mgmt bool
	}
	var candidates []candidate
	seen := map[netip.Addr]bool{}
	for _, name := range order {
		for _, iface := range vmi.Status.Interfaces {
			if iface.Name != name || !multus[name] {
				continue
			}
			for _, a := range InterfaceIPs(iface) {
				if seen[a] || inAny(a, o.ExcludedCIDRs) {
					continue
				}
				seen[a] = true
				candidates = append(candidates, candidate{addr: a, mgmt: name == mgmt})
			}
		}
	}

	internal := map[netip.Addr]bool{}
	if provided := providedIPs(node); len(provided) > 0 {
		for _, c := range candidates {
			if slices.Contains(provided, c.addr) {
				internal[c.addr] = true
			}
		}
	}
	if len(internal) == 0 && len(o.NodeIPCIDRs) > 0 {
		for _, c := range candidates {
			if inAny(c.addr, o.NodeIPCIDRs) {
				internal[c.addr] = true
			}
		}
	}
	if len(internal) == 0 {
		var have4, have6 bool
		for _, c := range candidates {
			switch {
			case !c.mgmt:
			case c.addr.Is4() && !have4:
				internal[c.addr], have4 = true, true
			case c.addr.Is6() && !have6:
				internal[c.addr], have6 = true, true
			}
		}
	}

	var out []corev1.NodeAddress
	for _, c := range candidates {
		if internal[c.addr] {
			out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: c.addr.String()})
		}
	}
	for _, c := range candidates {
		if !internal[c.addr] {
			out = append(out, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: c.addr.String()})
		}
	}
	hostname := node.Name
	if vmi.Spec.Hostname != "" {
		hostname = vmi.Spec.Hostname
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostname})
}

func providedIPs(node *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, s := range strings.Split(node.Annotations[AnnotationProvidedNodeIP], ",") {
		if a, ok := ParseInterfaceIP(s); ok {
			out = append(out, a)
		}
	}
	return out
}

func inAny(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
