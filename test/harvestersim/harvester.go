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

// Package harvestersim plays a Harvester cluster for the tests, the demo and the benchmark: a
// real kube-apiserver (envtest) with Harvester's, KubeVirt's and the load balancer's CRDs, and
// controllers that do what Harvester's and KubeVirt's own do (VM -> volumes -> VMI running on a
// host with IPs; cascading deletes; live migration), and Harvester's own load balancer
// (harvester-load-balancer's controller and webhook, as processes: harvesterlb.go) with what
// its hosts add to it (kube-vip: kubevip.go).
// Facts it follows are in shared/HARVESTER.md; where it follows a detail of the real source,
// a comment names the source file.
package harvestersim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Host is a Harvester node.
type Host struct {
	Name   string
	Zone   string // topology.kubernetes.io/zone; empty for none
	Region string // topology.kubernetes.io/region; empty for none
	// Devices are the host's passthrough devices and vGPUs by the resource name the device
	// plugins of Harvester's pcidevices add-on register them under (what a VM's hostDevices and
	// gpus ask for), with how many the host has: they appear in the node's allocatable.
	Devices map[string]int
	// CPUManager is the host's CPU manager, enabled (Harvester's CPU pinning): KubeVirt's
	// virt-handler labels such a node `cpumanager=true`, and only there does a VMI with
	// dedicated CPUs run.
	CPUManager bool
}

// LabelCPUManager is the label KubeVirt puts on nodes whose kubelet's CPU manager is static.
const LabelCPUManager = "cpumanager"

// Network is a Harvester VM network (a Multus NetworkAttachmentDefinition on a VLAN) and the
// subnets the guests on it get addresses from (their DHCP server, as far as the simulator goes).
type Network struct {
	Namespace string
	Name      string
	VLAN      int
	CIDRs     []string // e.g. "10.10.0.0/16" and, for dual stack, "fd00:10::/64"
}

// Key is the network's `namespace/name`.
func (n Network) Key() string { return n.Namespace + "/" + n.Name }

// Options shape the simulated Harvester. Zero values take the defaults of DefaultOptions.
type Options struct {
	Hosts    []Host
	Networks []Network
	// IPPools are created as given (status is the simulator's).
	IPPools []IPPoolSpec
	// DHCPCIDR is where the fake DHCP server of vm-type load balancers leases from.
	DHCPCIDR string
	// Namespaces are created at start (the guests' target namespaces).
	Namespaces []string
	// Images are VirtualMachineImages in Namespaces[0], imported, on storage class "longhorn-<name>".
	Images []string
	// KeyPairs are KeyPairs in Namespaces[0].
	KeyPairs []string
	// Version is the `server-version` setting.
	Version string
	// BootDelay is how long a scheduled VMI takes before qemu-guest-agent reports its IPs.
	BootDelay time.Duration
}

// IPPoolSpec is a pool of load-balancer addresses.
type IPPoolSpec struct {
	Name       string
	Subnet     string
	RangeStart string
	RangeEnd   string
	Gateway    string
	Network    string // selector.network, `namespace/name`; empty matches LBs that name none
	Namespace  string // selector scope namespace; "*" for all
	// GuestCluster is the scope's guest cluster (the load balancer's cluster annotation); empty
	// means "*", "none" only load balancers without one (those of VMs).
	GuestCluster string
	Priority     uint32
	// Global makes it the global pool, the one load balancers no other pool matches take: its
	// scope is everything. Harvester's webhook labels a pool global by its scope alone, so a pool
	// with Namespace "*" and GuestCluster "" or "*" is global too (and at most one may be).
	Global bool
}

// DefaultOptions: three hosts in two zones of one region, two VLAN networks, one pool for the
// guests' namespace, an image and a keypair.
func DefaultOptions() Options {
	return Options{
		Hosts: []Host{
			{Name: "harvester-1", Zone: "zone-a", Region: "region-1"},
			{Name: "harvester-2", Zone: "zone-a", Region: "region-1"},
			{Name: "harvester-3", Zone: "zone-b", Region: "region-1"},
		},
		Networks: []Network{
			{Namespace: "default", Name: "vlan10", VLAN: 10, CIDRs: []string{"10.10.0.0/16"}},
			{Namespace: "default", Name: "vlan20", VLAN: 20, CIDRs: []string{"10.20.0.0/16", "fd00:20::/64"}},
		},
		// Selected by scope only: Harvester's webhook empties the network of VM load balancers.
		IPPools: []IPPoolSpec{{
			Name: "guests", Subnet: "10.10.0.0/16", RangeStart: "10.10.100.10", RangeEnd: "10.10.100.59",
			Gateway: "10.10.0.1", Namespace: "*",
		}},
		DHCPCIDR:   "10.10.200.0/24",
		Namespaces: []string{"default", "guests"},
		Images:     []string{"ubuntu-24.04"},
		KeyPairs:   []string{"ops"},
		Version:    "v1.8.0",
	}
}

func (o *Options) complete() {
	d := DefaultOptions()
	if o.Hosts == nil {
		o.Hosts = d.Hosts
	}
	if o.Networks == nil {
		o.Networks = d.Networks
	}
	if o.IPPools == nil {
		o.IPPools = d.IPPools
	}
	if o.DHCPCIDR == "" {
		o.DHCPCIDR = d.DHCPCIDR
	}
	if o.Namespaces == nil {
		o.Namespaces = d.Namespaces
	}
	if o.Images == nil {
		o.Images = d.Images
	}
	if o.KeyPairs == nil {
		o.KeyPairs = d.KeyPairs
	}
	if o.Version == "" {
		o.Version = d.Version
	}
}

// Harvester is a running simulated Harvester cluster.
type Harvester struct {
	// Env is the apiserver; Env.Client is an admin client that bypasses the fault proxy.
	Env     *testenv.Environment
	Options Options
	// Faults inject API errors, latency and outages between clients and the apiserver, and
	// misbehaviour into the simulated controllers.
	Faults *Faults

	proxy    *faultProxy
	ips      *ipAllocator
	lb       *processes // Harvester's own load balancer controller and webhook
	webhook  *processes // Harvester's own admission webhook server
	kcm      *processes // Kubernetes' token controller
	kubevirt *processes // KubeVirt's own admission

	priorities atomic.Uint32 // UniquePriority's

	mu        sync.Mutex
	endpoints []*faultProxy // NewEndpoint's

	stopOnce sync.Once
}

// Scheme knows every kind a Harvester cluster serves that the simulator handles.
func Scheme() (*runtime.Scheme, error) {
	scheme, err := guestcloud.NewScheme()
	if err != nil {
		return nil, err
	}
	return scheme, apiextensionsv1.AddToScheme(scheme)
}

// Start brings up a simulated Harvester: apiserver, CRDs, seed objects, the fault proxy and the
// simulator's controllers. Callers must Stop it.
func Start(ctx context.Context, o Options) (*Harvester, error) {
	o.complete()
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	crds, err := harvesterCRDs()
	if err != nil {
		return nil, err
	}
	env, err := testenv.Start(testenv.Options{Name: "harvester", Scheme: scheme, CRDs: crds})
	if err != nil {
		return nil, err
	}
	h := &Harvester{Env: env, Options: o, Faults: newFaults()}
	if err := h.start(ctx); err != nil {
		return nil, errors.Join(err, h.Stop())
	}
	return h, nil
}

func (h *Harvester) start(ctx context.Context) error {
	var err error
	if h.ips, err = newIPAllocator(h.Options.Networks, h.Options.DHCPCIDR); err != nil {
		return err
	}
	if err := h.seed(ctx); err != nil {
		return fmt.Errorf("seeding the simulated Harvester: %w", err)
	}
	if h.proxy, err = startFaultProxy(h.Env.Config, h.Faults); err != nil {
		return err
	}
	if err := h.startHarvesterWebhook(ctx); err != nil {
		return err
	}
	if err := h.startKubeVirtAdmission(ctx); err != nil {
		return err
	}
	if err := h.startVirtController(ctx); err != nil {
		return err
	}
	if err := h.startLoadBalancer(ctx); err != nil {
		return err
	}
	if err := h.startTokenController(ctx); err != nil {
		return err
	}
	if err := h.seedIPPools(ctx); err != nil {
		return err
	}
	if err := h.setupControllers(); err != nil {
		return err
	}
	return h.Env.StartManager(ctx)
}

// Client returns an admin client of the simulated Harvester (no faults).
func (h *Harvester) Client() client.Client { return h.Env.Client }

// Stop stops the simulator, the fault proxy and the apiserver.
func (h *Harvester) Stop() error {
	var err error
	h.stopOnce.Do(func() {
		if h.proxy != nil {
			err = h.proxy.close()
		}
		h.mu.Lock()
		for _, p := range h.endpoints {
			err = errors.Join(err, p.close())
		}
		h.mu.Unlock()
		err = errors.Join(err, h.lb.stop(), h.webhook.stop(), h.kubevirt.stop(), h.kcm.stop(), h.Env.Stop())
	})
	return err
}

func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, nil
}

// EndedPrograms describes each of Harvester's, KubeVirt's and Kubernetes' programs the simulated
// Harvester runs that ended by itself (a lost leader lease ends some) and was started again after
// the kubelet's back-off, with the end of its log: a failed test says so.
func (h *Harvester) EndedPrograms(lines int) []string {
	var out []string
	for _, p := range h.programs() {
		out = append(out, p.ended(lines)...)
	}
	return out
}

func (h *Harvester) programs() []*processes {
	return []*processes{h.lb, h.webhook, h.kcm, h.kubevirt}
}

// KillProgram ends one of the programs the simulated Harvester runs (by the name its log has:
// "virt-controller", "vmcontroller", "controller", ...) with SIGKILL, as an OOM kill ends a pod's
// container; it is started again after the kubelet's back-off. It returns how many times that
// program had ended by itself before.
func (h *Harvester) KillProgram(name string) (int, error) {
	for _, p := range h.programs() {
		if restarts, ok := p.kill(name); ok {
			return restarts, nil
		}
	}
	return 0, fmt.Errorf("the simulated Harvester runs no program %q", name)
}

// ProgramRestarts is how many times the named program ended by itself and was started again.
func (h *Harvester) ProgramRestarts(name string) int {
	for _, p := range h.programs() {
		if n, ok := p.restartCounts()[name]; ok {
			return n
		}
	}
	return 0
}
