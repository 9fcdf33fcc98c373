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
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func TestStaticMACIsStableLocalUnicastAndDistinct(t *testing.T) {
	g := NewWithT(t)
	a := StaticMAC("default", "md-0-abcde", "nic-0")
	g.Expect(StaticMAC("default", "md-0-abcde", "nic-0")).To(Equal(a), "the same on every reconcile")
	g.Expect(a).To(MatchRegexp(`^0a(:[0-9a-f]{2}){5}$`))
	seen := map[string]bool{a: true}
	for _, other := range []string{
		StaticMAC("default", "md-0-abcde", "nic-1"),
		StaticMAC("default", "md-0-fghij", "nic-0"),
		StaticMAC("other", "md-0-abcde", "nic-0"),
	} {
		g.Expect(seen[other]).To(BeFalse(), "%s repeats", other)
		seen[other] = true
	}
}

func TestBuildNetworkData(t *testing.T) {
	g := NewWithT(t)
	data, err := BuildNetworkData([]StaticNIC{
		{Name: "nic-0", MAC: "0a:00:00:00:00:01", Nameservers: []string{"10.0.0.53"}, Addresses: []StaticAddress{
			{Address: netip.MustParseAddr("10.0.0.5"), Prefix: 24, Gateway: netip.MustParseAddr("10.0.0.1")},
			{Address: netip.MustParseAddr("fd00::5"), Prefix: 64, Gateway: netip.MustParseAddr("fd00::1")},
		}},
		{Name: "storage", MAC: "0a:00:00:00:00:02", Addresses: []StaticAddress{
			{Address: netip.MustParseAddr("10.1.0.5"), Prefix: 16, Gateway: netip.MustParseAddr("10.1.0.1")},
		}},
		{Name: "nic-2", MAC: "0a:00:00:00:00:03"},
	}, 0)
	g.Expect(err).NotTo(HaveOccurred())
	var got map[string]any
	g.Expect(yaml.Unmarshal(data, &got)).To(Succeed())
	want := `
version: 2
ethernets:
  nic-0:
    match: {macaddress: "0a:00:00:00:00:01"}
    set-name: nic-0
    addresses: [10.0.0.5/24, fd00::5/64]
    routes: [{to: 0.0.0.0/0, via: 10.0.0.1}, {to: "::/0", via: "fd00::1"}]
    nameservers: {addresses: [10.0.0.53]}
  storage:
    match: {macaddress: "0a:00:00:00:00:02"}
    set-name: storage
    addresses: [10.1.0.5/16]
  nic-2:
    match: {macaddress: "0a:00:00:00:00:03"}
    set-name: nic-2
    dhcp4: true
`
	var wantMap map[string]any
	g.Expect(yaml.Unmarshal([]byte(want), &wantMap)).To(Succeed())
	g.Expect(got).To(Equal(wantMap), "one default route per family, from the first NIC with a gateway:\n%s", data)

	_, err = BuildNetworkData([]StaticNIC{{Name: "nic-0"}}, 2)
	g.Expect(err).To(MatchError(ContainSubstring("no MAC address")))
	_, err = BuildNetworkData([]StaticNIC{{Name: "nic-0", MAC: "0a:00:00:00:00:01", Addresses: []StaticAddress{
		{Address: netip.MustParseAddr("10.0.0.5"), Prefix: 33},
	}}}, 1)
	g.Expect(err).To(MatchError(ContainSubstring("prefix /33")))
}

// Version 1, for images whose cloud-init reads nothing else: the same NICs, addresses, one
// gateway per family and nameservers, in cloud-init's own format.
func TestBuildNetworkDataV1(t *testing.T) {
	g := NewWithT(t)
	data, err := BuildNetworkData([]StaticNIC{
		{Name: "nic-0", MAC: "0a:00:00:00:00:01", Nameservers: []string{"10.0.0.53"}, Addresses: []StaticAddress{
			{Address: netip.MustParseAddr("10.0.0.5"), Prefix: 24, Gateway: netip.MustParseAddr("10.0.0.1")},
			{Address: netip.MustParseAddr("fd00::5"), Prefix: 64, Gateway: netip.MustParseAddr("fd00::1")},
		}},
		{Name: "storage", MAC: "0a:00:00:00:00:02", Addresses: []StaticAddress{
			{Address: netip.MustParseAddr("10.1.0.5"), Prefix: 16, Gateway: netip.MustParseAddr("10.1.0.1")},
		}},
		{Name: "nic-2", MAC: "0a:00:00:00:00:03"},
	}, 1)
	g.Expect(err).NotTo(HaveOccurred())
	var got map[string]any
	g.Expect(yaml.Unmarshal(data, &got)).To(Succeed())
	want := `
version: 1
config:
- type: physical
  name: nic-0
  mac_address: "0a:00:00:00:00:01"
  subnets:
  - {type: static, address: 10.0.0.5/24, gateway: 10.0.0.1, dns_nameservers: [10.0.0.53]}
  - {type: static6, address: "fd00::5/64", gateway: "fd00::1"}
- type: physical
  name: storage
  mac_address: "0a:00:00:00:00:02"
  subnets:
  - {type: static, address: 10.1.0.5/16}
- type: physical
  name: nic-2
  mac_address: "0a:00:00:00:00:03"
  subnets:
  - {type: dhcp4}
`
	var wantMap map[string]any
	g.Expect(yaml.Unmarshal([]byte(want), &wantMap)).To(Succeed())
	g.Expect(got).To(Equal(wantMap), "one gateway per family, from the first NIC with one:\n%s", data)
}

func TestParseStaticAddress(t *testing.T) {
	g := NewWithT(t)
	a, err := ParseStaticAddress("10.0.0.5", ptr.To[int32](24), "10.0.0.1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(StaticAddress{Address: netip.MustParseAddr("10.0.0.5"), Prefix: 24, Gateway: netip.MustParseAddr("10.0.0.1")}))
	for _, bad := range []struct {
		address, gateway string
		prefix           *int32
		msg              string
	}{
		{"10.0.0", "", ptr.To[int32](24), "address"},
		{"10.0.0.5", "", nil, "no prefix length"},
		{"10.0.0.5", "", ptr.To[int32](40), "does not fit"},
		{"10.0.0.5", "fd00::1", ptr.To[int32](24), "not of the family"},
	} {
		_, err := ParseStaticAddress(bad.address, bad.prefix, bad.gateway)
		g.Expect(err).To(MatchError(ContainSubstring(bad.msg)), strings.Join([]string{bad.address, bad.gateway}, " "))
	}
}

// Whatever an IPAM provider writes into an IPAddress, the network-data is either refused with an
// error or renders the address, with its prefix, under the NIC's MAC; and the claim name and
// the pinned MAC stay valid for any machine and interface name.
func FuzzNetworkData(f *testing.F) {
	f.Add("10.0.0.5", int32(24), "10.0.0.1", "md-0-abcde", "nic-0")
	f.Add("fd00::5", int32(64), "fd00::1", strings.Repeat("w", 300), "storage")
	f.Add("10.0.0.5", int32(33), "", "m", "n")
	f.Add("10.0.0.5", int32(-1), "fd00::1", "m", "n")
	f.Add("not-an-ip", int32(8), "10.0.0.1", "", "")
	f.Add("fe80::5%eth0", int32(64), "fe80::1", "m", "n")
	f.Add("::ffff:10.0.0.5", int32(120), "::ffff:10.0.0.1", "m", "n")
	f.Fuzz(func(t *testing.T, address string, prefix int32, gateway, machine, nic string) {
		mac := StaticMAC("default", machine, nic)
		if len(mac) != 17 || mac[:3] != "0a:" {
			t.Fatalf("StaticMAC(%q, %q) = %q", machine, nic, mac)
		}
		if n := IPAddressClaimName(machine, nic, 0); len(n) > 253 {
			t.Fatalf("claim name of %d characters", len(n))
		}
		a, err := ParseStaticAddress(address, &prefix, gateway)
		if err != nil {
			return // refused, with a message
		}
		data, err := BuildNetworkData([]StaticNIC{{Name: "nic-0", MAC: mac, Addresses: []StaticAddress{a}}}, 2)
		if err != nil {
			t.Fatalf("a parsed address did not render: %v", err)
		}
		var got struct {
			Ethernets map[string]struct {
				Match     map[string]string `json:"match"`
				Addresses []string          `json:"addresses"`
			} `json:"ethernets"`
		}
		if err := yaml.Unmarshal(data, &got); err != nil {
			t.Fatalf("network-data does not parse: %v\n%s", err, data)
		}
		e := got.Ethernets["nic-0"]
		want := netip.PrefixFrom(a.Address, int(prefix)).String()
		if e.Match["macaddress"] != mac || len(e.Addresses) != 1 || e.Addresses[0] != want {
			t.Fatalf("rendered %+v, want %s on %s", e, want, mac)
		}
		if p, err := netip.ParsePrefix(e.Addresses[0]); err != nil || p.Addr() != a.Address || p.Bits() != int(prefix) {
			t.Fatalf("rendered address %q is not %s/%d: %v", e.Addresses[0], a.Address, prefix, err)
		}
	})
}
