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
// version 1 with them in the reverse order, so that only their MACs can match them. The first
// guest has spec.guestAgent Enable; the second Install, with no mirror to reach (the guest's
// networks lead nowhere): cloud-init still reports no error, the image having the agent.
func TestRealGuestAppliesTheProvidersCloudInit(t *testing.T) {
	t.Parallel()
	img, err := guestvm.ImageFromEnv()
	if err != nil {
		t.Skipf("no real guest here: %v", err)
	}
	for _, tc := range []struct {
		name     string
		version  int32
		reversed bool
		agent    infrav1.GuestAgent
	}{
		{name: "v2", version: 2, agent: infrav1.GuestAgentEnable},
		{name: "v1", version: 1, reversed: true, agent: infrav1.GuestAgentInstall},
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
				Bootstrap: []byte(bootstrapData), Extra: machineUserData, GuestAgent: tc.agent,
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
			if tc.agent == infrav1.GuestAgentInstall {
				// No mirror is reachable: apt's index refresh fails with warnings only, and the
				// install finds the image's agent, so cloud-init reports no error.
				out, err := guest.ReadFile(ctx, "/var/log/cloud-init-output.log")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(out)).To(ContainSubstring("Failed to fetch"), "the guest reached no mirror")
				g.Expect(string(out)).To(ContainSubstring("qemu-guest-agent is already the newest version"))
			}

			ifaces, err := guest.Interfaces(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			byMAC := map[string]nicSeen{}
			for _, i := range ifaces {
				n := nicSeen{name: i.Name}
				for _, a := range i.IPAddresses {
					n = n.with(a.Address)
				}
				byMAC[i.HardwareAddress] = n
			}
			guestAddrs, names := split(byMAC)
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

// reportBootstrap is bootstrap data for a guest without an agent to ask: its commands run, and a
// unit of its own writes what the test reads to the serial console, every two seconds once
// cloud-init is done (guestvm.ConsoleReport): cloud-init's result, the guest's addresses
// (ip -j), the agent's state and what the bootstrap's command wrote.
const reportBootstrap = `#cloud-config
write_files:
- path: /usr/local/bin/report
  permissions: "0755"
  content: |
    #!/bin/sh
    while sleep 2; do
      [ -f /run/cloud-init/result.json ] || continue
      echo "GUEST-RESULT $(tr -d '\n' < /run/cloud-init/result.json)" > /dev/ttyS0
      echo "GUEST-ADDRS $(ip -j addr show | tr -d '\n')" > /dev/ttyS0
      echo "GUEST-AGENT $(systemctl is-active qemu-guest-agent.service)" > /dev/ttyS0
      echo "GUEST-JOINED $(cat /run/capi/joined)" > /dev/ttyS0
    done
runcmd:
- "mkdir -p /run/capi && echo joined > /run/capi/joined"
- [systemd-run, --unit=guest-report, /usr/local/bin/report]
`

// A real guest with no guest agent, as docs/guest-images.md allows for a site without a package
// mirror (spec.guestAgent None, the management NIC's addresses from an IP pool): cloud-init
// applies the static addresses by MAC and runs the bootstrap's commands without contacting a
// mirror (none is reachable: the guest's networks lead nowhere) and without an error, and no agent
// answers, so the addresses the provider claimed are the only ones the machine can report
// (provisioned from them: test/e2e/ipam_test.go).
func TestRealGuestWithoutAnAgentTakesItsStaticAddresses(t *testing.T) {
	t.Parallel()
	img, err := guestvm.ImageFromEnv()
	if err != nil {
		t.Skipf("no real guest here: %v", err)
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	name := "guest-no-agent"
	nics := []build.StaticNIC{
		{Name: "mgmt", MAC: build.StaticMAC("ns", name, "mgmt"), Addresses: []build.StaticAddress{
			{Address: netip.MustParseAddr("10.10.0.15"), Prefix: 24, Gateway: netip.MustParseAddr("10.10.0.1")},
		}},
		{Name: "lease", MAC: build.StaticMAC("ns", name, "lease")}, // DHCP
	}
	networkData, err := build.BuildNetworkData(nics, 2)
	g.Expect(err).NotTo(HaveOccurred())
	userData, _, err := build.BuildUserData(build.UserDataInput{Bootstrap: []byte(reportBootstrap), GuestAgent: infrav1.GuestAgentNone})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(userData)).NotTo(ContainSubstring("packages"), "None adds nothing for the agent")
	g.Expect(string(userData)).NotTo(ContainSubstring("enable --now"), "None adds nothing for the agent")

	guest, err := guestvm.Boot(ctx, img, guestvm.Config{Name: name, UserData: userData, NetworkData: networkData,
		MACs: []string{nics[0].MAC, nics[1].MAC}, NoAgent: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(guest.Stop()).To(Succeed()) }()
	diagnose := func() string { return guest.Console(40) }

	var result struct {
		V1 struct {
			Datasource string   `json:"datasource"`
			Errors     []string `json:"errors"`
		} `json:"v1"`
	}
	var links []struct {
		Name     string `json:"ifname"`
		MAC      string `json:"address"`
		AddrInfo []struct {
			Local  string `json:"local"`
			Prefix int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	g.Eventually(func(g Gomega) {
		exited, err := guest.Exited()
		g.Expect(exited).To(BeFalse(), "QEMU ended: %v", err)
		for prefix, into := range map[string]any{"GUEST-RESULT": &result, "GUEST-ADDRS": &links} {
			report, ok := guest.ConsoleReport(prefix)
			g.Expect(ok).To(BeTrue(), "no %s line yet", prefix)
			g.Expect(json.Unmarshal([]byte(report), into)).To(Succeed(), prefix)
		}
		joined, _ := guest.ConsoleReport("GUEST-JOINED")
		g.Expect(joined).To(Equal("joined"), "the bootstrap's command ran")
	}, 8*time.Minute, 2*time.Second).Should(Succeed(), diagnose)
	g.Expect(result.V1.Datasource).To(HavePrefix("DataSourceNoCloud"), diagnose)
	g.Expect(result.V1.Errors).To(BeEmpty(), diagnose)
	agent, _ := guest.ConsoleReport("GUEST-AGENT")
	g.Expect(agent).NotTo(Equal("active"), "the image's agent is masked")
	_, err = guest.Interfaces(ctx)
	g.Expect(err).To(MatchError(guestvm.ErrAgentNotReady), "no agent answers")

	byMAC := map[string]nicSeen{}
	for _, l := range links {
		n := nicSeen{name: l.Name}
		for _, a := range l.AddrInfo {
			n = n.with(a.Local)
		}
		byMAC[l.MAC] = n
	}
	guestAddrs, names := split(byMAC)
	simulated := readNetworkData(networkData)
	g.Expect(names[nics[0].MAC]).To(Equal("mgmt"), "the network-data names the management NIC")
	g.Expect(guestAddrs[nics[0].MAC]).To(ConsistOf(simulated.addresses[nics[0].MAC]), "the claimed address, and only it")
	g.Expect(guestAddrs[nics[1].MAC]).To(ContainElement(HavePrefix("10.0.2.")), "QEMU's DHCP server leased an address: %v", links)
}

// nicSeen is a guest NIC as the guest reports it: its name and its global addresses (neither
// link-local nor loopback).
type nicSeen struct {
	name      string
	addresses []string
}

func (n nicSeen) with(address string) nicSeen {
	if a := netip.MustParseAddr(address); !a.IsLinkLocalUnicast() && !a.IsLoopback() {
		n.addresses = append(n.addresses, address)
	}
	return n
}

// split gives the global addresses and the names of the NICs, by MAC.
func split(byMAC map[string]nicSeen) (addresses map[string][]string, names map[string]string) {
	addresses, names = map[string][]string{}, map[string]string{}
	for mac, n := range byMAC {
		addresses[mac], names[mac] = n.addresses, n.name
	}
	return addresses, names
}
