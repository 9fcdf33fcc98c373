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
	"crypto/sha256"
	"fmt"
	"net/netip"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// StaticNIC is one NIC of a machine as the guest's network-data describes it: matched by its
// MAC (which the VM spec pins), with the static addresses claimed for it from IP pools, or DHCP
// when it has none.
type StaticNIC struct {
	// Name is the NIC's interface name in the VM spec; the network-data entry is keyed by it.
	Name string
	// MAC is the NIC's MAC address in the VM spec.
	MAC string
	// Addresses claimed for the NIC; empty means DHCP.
	Addresses []StaticAddress
	// Nameservers for the NIC.
	Nameservers []string
}

// StaticAddress is one address of a NIC: the address, its network's prefix length, and the
// gateway of that network (empty for none).
type StaticAddress struct {
	Address netip.Addr
	Prefix  int
	Gateway netip.Addr
}

// IPAddressClaimName is the IPAddressClaim of a machine's NIC for its pool number i: stable for
// the machine, so that a retried reconcile finds the claim it made.
func IPAddressClaimName(machine, nic string, i int) string {
	return naming.BoundedName(fmt.Sprintf("%s-%s-%d", machine, nic, i), 253)
}

// StaticMAC is the MAC address the provider pins on a NIC of a machine whose NICs take
// addresses from IP pools, so that the network-data can match each NIC by it: derived from the
// machine's namespace, name and the interface name (the same on every reconcile), locally
// administered and unicast (the first octet's two low bits are 1 and 0), in the 0x0a prefix
// range so that it never looks like QEMU's 52:54:00 or a vendor's.
func StaticMAC(namespace, machine, nic string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + machine + "/" + nic))
	return fmt.Sprintf("0a:%02x:%02x:%02x:%02x:%02x", sum[0], sum[1], sum[2], sum[3], sum[4])
}

// BuildNetworkData renders cloud-init network-config of the version (1 or 2; 0 is 2) for the
// NICs, as BuildNetworkDataV2 and BuildNetworkDataV1 describe.
func BuildNetworkData(nics []StaticNIC, version int32) ([]byte, error) {
	if version == 1 {
		return BuildNetworkDataV1(nics)
	}
	return BuildNetworkDataV2(nics)
}

// BuildNetworkDataV2 renders cloud-init network-config version 2 (netplan's format) for the NICs:
// each matched by its MAC and given the name it has in the VM spec; static NICs get their
// addresses (CIDR), a default route per address family via their gateway, and their
// nameservers; the others DHCP. Only the first NIC with a gateway of a family gets that
// family's default route, so that a guest with two static networks has one default route.
func BuildNetworkDataV2(nics []StaticNIC) ([]byte, error) {
	ethernets := map[string]any{}
	defaultRoute := map[bool]bool{} // by family: is4
	for _, nic := range nics {
		if nic.MAC == "" {
			return nil, fmt.Errorf("NIC %s has no MAC address to match", nic.Name)
		}
		entry := map[string]any{
			"match":    map[string]any{"macaddress": nic.MAC},
			"set-name": nic.Name,
		}
		if len(nic.Addresses) == 0 {
			entry["dhcp4"] = true
			ethernets[nic.Name] = entry
			continue
		}
		var addresses []any
		var routes []any
		for _, a := range nic.Addresses {
			if !a.Address.IsValid() {
				return nil, fmt.Errorf("NIC %s: an address is missing", nic.Name)
			}
			if a.Prefix < 0 || a.Prefix > a.Address.BitLen() {
				return nil, fmt.Errorf("NIC %s: prefix /%d does not fit address %s", nic.Name, a.Prefix, a.Address)
			}
			addresses = append(addresses, netip.PrefixFrom(a.Address, a.Prefix).String())
			if !a.Gateway.IsValid() {
				continue
			}
			if a.Gateway.Is4() != a.Address.Is4() {
				return nil, fmt.Errorf("NIC %s: gateway %s is not of the family of address %s", nic.Name, a.Gateway, a.Address)
			}
			if defaultRoute[a.Address.Is4()] {
				continue
			}
			defaultRoute[a.Address.Is4()] = true
			to := "0.0.0.0/0"
			if !a.Address.Is4() {
				to = "::/0"
			}
			routes = append(routes, map[string]any{"to": to, "via": a.Gateway.String()})
		}
		entry["addresses"] = addresses
		if len(routes) > 0 {
			entry["routes"] = routes
		}
		if len(nic.Nameservers) > 0 {
			ns := make([]any, 0, len(nic.Nameservers))
			for _, s := range nic.Nameservers {
				ns = append(ns, s)
			}
			entry["nameservers"] = map[string]any{"addresses": ns}
		}
		ethernets[nic.Name] = entry
	}
	return yaml.Marshal(map[string]any{"version": 2, "ethernets": ethernets})
}

// BuildNetworkDataV1 renders the same as BuildNetworkDataV2 in cloud-init's network-config
// version 1, which some images' cloud-init reads alone: a `physical` entry per NIC with its MAC
// and name, a `static` (IPv4) or `static6` subnet per address with the gateway on the first
// subnet of each family that has one, the nameservers on the NIC's first subnet, and `dhcp4` for
// a NIC without addresses.
func BuildNetworkDataV1(nics []StaticNIC) ([]byte, error) {
	var config []any
	gateway := map[bool]bool{} // by family: is4
	for _, nic := range nics {
		if nic.MAC == "" {
			return nil, fmt.Errorf("NIC %s has no MAC address to match", nic.Name)
		}
		var subnets []any
		if len(nic.Addresses) == 0 {
			subnets = append(subnets, map[string]any{"type": "dhcp4"})
		}
		for i, a := range nic.Addresses {
			if !a.Address.IsValid() {
				return nil, fmt.Errorf("NIC %s: an address is missing", nic.Name)
			}
			if a.Prefix < 0 || a.Prefix > a.Address.BitLen() {
				return nil, fmt.Errorf("NIC %s: prefix /%d does not fit address %s", nic.Name, a.Prefix, a.Address)
			}
			subnet := map[string]any{"type": "static", "address": netip.PrefixFrom(a.Address, a.Prefix).String()}
			if !a.Address.Is4() {
				subnet["type"] = "static6"
			}
			if a.Gateway.IsValid() {
				if a.Gateway.Is4() != a.Address.Is4() {
					return nil, fmt.Errorf("NIC %s: gateway %s is not of the family of address %s", nic.Name, a.Gateway, a.Address)
				}
				if !gateway[a.Address.Is4()] {
					gateway[a.Address.Is4()] = true
					subnet["gateway"] = a.Gateway.String()
				}
			}
			if i == 0 && len(nic.Nameservers) > 0 {
				ns := make([]any, 0, len(nic.Nameservers))
				for _, s := range nic.Nameservers {
					ns = append(ns, s)
				}
				subnet["dns_nameservers"] = ns
			}
			subnets = append(subnets, subnet)
		}
		config = append(config, map[string]any{"type": "physical", "name": nic.Name, "mac_address": nic.MAC, "subnets": subnets})
	}
	return yaml.Marshal(map[string]any{"version": 1, "config": config})
}

// ParseStaticAddress reads an IPAddress's fields (address, prefix length, gateway) as an IPAM
// provider writes them.
func ParseStaticAddress(address string, prefix *int32, gateway string) (StaticAddress, error) {
	a, err := netip.ParseAddr(address)
	if err != nil {
		return StaticAddress{}, fmt.Errorf("address %q: %w", address, err)
	}
	if a.Zone() != "" {
		return StaticAddress{}, fmt.Errorf("address %q has an IPv6 zone, which no static address can have", address)
	}
	if prefix == nil {
		return StaticAddress{}, fmt.Errorf("address %s has no prefix length", address)
	}
	if *prefix < 0 || int(*prefix) > a.BitLen() {
		return StaticAddress{}, fmt.Errorf("prefix length %s does not fit address %s", strconv.Itoa(int(*prefix)), address)
	}
	out := StaticAddress{Address: a, Prefix: int(*prefix)}
	if gateway != "" {
		g, err := netip.ParseAddr(gateway)
		if err != nil {
			return StaticAddress{}, fmt.Errorf("gateway %q: %w", gateway, err)
		}
		if g.Zone() != "" {
			return StaticAddress{}, fmt.Errorf("gateway %q has an IPv6 zone", gateway)
		}
		if g.Is4() != a.Is4() {
			return StaticAddress{}, fmt.Errorf("gateway %s is not of the family of address %s", gateway, address)
		}
		out.Gateway = g
	}
	return out, nil
}
