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

package harvestersim

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guestvm"
)

// bootstrapData is cloud-config as CAPI's kubeadm bootstrap provider writes it: a Jinja template
// (it names the node by the meta data's local host name) with files and commands.
const bootstrapData = `## template: jinja
#cloud-config
write_files:
- path: /run/capi/hostname
  content: "{{ ds.meta_data.local_hostname }}"
runcmd:
- "echo joined > /run/capi/joined"
`

// The machine's own cloud-config (spec.userData), merged under the bootstrap data.
const machineUserData = `write_files:
- path: /etc/site.conf
  content: from the machine's userData
`

// A real Debian guest (kernel, systemd, cloud-init 22.4, qemu-guest-agent), booted under QEMU
// with the user data and network data the provider writes for a machine whose NICs take
// addresses from IP pools, applies them, and the guest agent reports what the simulated guest
// (readNetworkData, reportAddresses) says it does: each static NIC, matched by its MAC, has
// exactly the addresses of its entry and the name the entry gives it; a NIC without addresses gets a DHCP lease; the user's
// cloud-config and the bootstrap data both take effect, the bootstrap's Jinja rendered with the
// VM's name. Network-config version 2 (the default) with the NICs in the VM's order, and
// version 1 with them in the reverse order, so that only their MACs can match them.
func TestRealGuestAppliesTheProvidersCloudInit(t *testing.T) {
	img, err := guestvm.ImageFromEnv()
	if err != nil {
		t.Skipf("no real guest here: %v", err)
	}
	for _, tc := range []struct {
		name     string
		version  int32
		reversed bool
	}{
		{name: "v2", version: 2},
		{name: "v1", version: 1, reversed: true},
	} {
		t.Run("network-config "+tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()

			name := "guest-" + tc.name
			nics := []build.StaticNIC{
				// The management NIC, first in the VM, with the default route.
				{Name: "mgmt", MAC: build.StaticMAC("ns", name, "mgmt"), Addresses: []build.StaticAddress{
					{Address: netip.MustParseAddr("10.10.0.14"), Prefix: 24, Gateway: netip.MustParseAddr("10.10.0.1")},
				}},
				{Name: "storage", MAC: build.StaticMAC("ns", name, "storage"), Addresses: []build.StaticAddress{
					{Address: netip.MustParseAddr("192.168.50.20"), Prefix: 24, Gateway: netip.MustParseAddr("192.168.50.1")},
					{Address: netip.MustParseAddr("fd00:50::20"), Prefix: 64},
				}},
				{Name: "lease", MAC: build.StaticMAC("ns", name, "lease")}, // DHCP
			}
			networkData, err := build.BuildNetworkData(nics, tc.version)
			g.Expect(err).NotTo(HaveOccurred())
			userData, _, err := build.BuildUserData(build.UserDataInput{
				Bootstrap: []byte(bootstrapData), Extra: machineUserData, GuestAgent: infrav1.GuestAgentEnable,
			})
			g.Expect(err).NotTo(HaveOccurred())
			macs := make([]string, 0, len(nics))
			for _, n := range nics {
				macs = append(macs, n.MAC)
			}
			if tc.reversed {
				slices.Reverse(macs)
			}

			guest, err := guestvm.Boot(ctx, img, guestvm.Config{Name: name, UserData: userData, NetworkData: networkData, MACs: macs})
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { g.Expect(guest.Stop()).To(Succeed()) }()
			diagnose := func() string { return guest.Console(40) }

			// cloud-init writes result.json when its last stage is done.
			var result struct {
				V1 struct {
					Datasource string   `json:"datasource"`
					Errors     []string `json:"errors"`
				} `json:"v1"`
			}
			g.Eventually(func(g Gomega) {
				exited, err := guest.Exited()
				g.Expect(exited).To(BeFalse(), "QEMU ended: %v", err)
				data, err := guest.ReadFile(ctx, "/run/cloud-init/result.json")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(json.Unmarshal(data, &result)).To(Succeed())
			}, 8*time.Minute, 2*time.Second).Should(Succeed(), diagnose)
			g.Expect(result.V1.Datasource).To(HavePrefix("DataSourceNoCloud"), diagnose)
			g.Expect(result.V1.Errors).To(BeEmpty(), diagnose)

			ifaces, err := guest.Interfaces(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			guestAddrs := map[string][]string{} // by MAC: the global addresses
			names := map[string]string{}
			for _, i := range ifaces {
				for _, a := range i.IPAddresses {
					if addr := netip.MustParseAddr(a.Address); !addr.IsLinkLocalUnicast() && !addr.IsLoopback() {
						guestAddrs[i.HardwareAddress] = append(guestAddrs[i.HardwareAddress], a.Address)
					}
				}
				names[i.HardwareAddress] = i.Name
			}
			simulated := readNetworkData(networkData)
			for _, n := range nics {
				g.Expect(names[n.MAC]).To(Equal(n.Name), "the network-data names NIC %s", n.Name)
				g.Expect(simulated.names[n.MAC]).To(Equal(names[n.MAC]), "NIC %s: the real guest's name and the simulated one's", n.Name)
			}
			for _, n := range nics[:2] {
				g.Expect(guestAddrs[n.MAC]).To(ConsistOf(simulated.addresses[n.MAC]), "NIC %s: the real guest's addresses and the simulated one's", n.Name)
			}
			lease := nics[2].MAC
			g.Expect(simulated.addresses).NotTo(HaveKey(lease), "the simulated guest leases it from the network's pool")
			g.Expect(guestAddrs[lease]).To(ContainElement(HavePrefix("10.0.2.")), "QEMU's DHCP server leased an address: %v", ifaces)

			host, err := guest.HostName(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(host).To(Equal(name))
			osInfo, err := guest.OSInfo(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(osInfo.ID).To(Equal("debian"))
			for path, want := range map[string]string{
				"/etc/site.conf":     "from the machine's userData",
				"/run/capi/hostname": name,
				"/run/capi/joined":   "joined",
			} {
				data, err := guest.ReadFile(ctx, path)
				g.Expect(err).NotTo(HaveOccurred(), "%s: %s", path, diagnose())
				g.Expect(strings.TrimSpace(string(data))).To(Equal(want), path)
			}
		})
	}
}
