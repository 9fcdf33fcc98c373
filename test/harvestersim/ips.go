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
	"fmt"
	"net/netip"
	"strings"
	"sync"
)

// ipAllocator plays the DHCP servers of the VM networks (guest NIC addresses) and of the
// network vm-type load balancers lease on. Leases are sticky per owner key, as a DHCP server
// remembers a client's MAC.
type ipAllocator struct {
	mu       sync.Mutex
	subnets  map[string][]*subnet // network key -> its subnets (IPv4 first)
	dhcp     *subnet
	byOwner  map[string][]netip.Addr
	ownerNet map[string]string
}

type subnet struct {
	prefix netip.Prefix
	next   netip.Addr
	used   map[netip.Addr]bool
}

func newSubnet(cidr string) (*subnet, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", cidr, err)
	}
	p = p.Masked()
	// Leave the first addresses to the network, its gateway and infrastructure.
	first := p.Addr()
	for range 10 {
		first = first.Next()
	}
	return &subnet{prefix: p, next: first, used: map[netip.Addr]bool{}}, nil
}

func (s *subnet) take() (netip.Addr, error) {
	start := s.next
	for a := s.next; ; {
		if !s.used[a] {
			s.used[a] = true
			s.next = a.Next()
			return a, nil
		}
		a = a.Next()
		if !s.prefix.Contains(a) {
			a = s.prefix.Addr().Next()
		}
		if a == start {
			return netip.Addr{}, fmt.Errorf("subnet %s is full", s.prefix)
		}
	}
}

func newIPAllocator(networks []Network, dhcpCIDR string) (*ipAllocator, error) {
	a := &ipAllocator{subnets: map[string][]*subnet{}, byOwner: map[string][]netip.Addr{}, ownerNet: map[string]string{}}
	for _, n := range networks {
		if err := a.addNetwork(n); err != nil {
			return nil, err
		}
	}
	var err error
	if a.dhcp, err = newSubnet(dhcpCIDR); err != nil {
		return nil, fmt.Errorf("DHCP range: %w", err)
	}
	return a, nil
}

// addNetwork gives a network its subnets.
func (a *ipAllocator) addNetwork(n Network) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var subnets []*subnet
	for _, cidr := range n.CIDRs {
		s, err := newSubnet(cidr)
		if err != nil {
			return fmt.Errorf("network %s: %w", n.Key(), err)
		}
		subnets = append(subnets, s)
	}
	a.subnets[n.Key()] = subnets
	return nil
}

// lease returns the owner's addresses on a network, one per subnet, leasing them the first time.
func (a *ipAllocator) lease(network, owner string) ([]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := network + "|" + owner
	if addrs, ok := a.byOwner[key]; ok {
		return addrs, nil
	}
	subnets, ok := a.subnets[network]
	if !ok {
		return nil, fmt.Errorf("network %s has no subnet in the simulator", network)
	}
	var addrs []netip.Addr
	for _, s := range subnets {
		addr, err := s.take()
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	a.byOwner[key] = addrs
	a.ownerNet[key] = network
	return addrs, nil
}

// leaseDHCP leases one address of the load balancers' DHCP range.
func (a *ipAllocator) leaseDHCP(owner string) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := "dhcp|" + owner
	if addrs, ok := a.byOwner[key]; ok {
		return addrs[0], nil
	}
	addr, err := a.dhcp.take()
	if err != nil {
		return netip.Addr{}, err
	}
	a.byOwner[key] = []netip.Addr{addr}
	return addr, nil
}

// release frees every lease whose owner starts with prefix.
func (a *ipAllocator) release(prefix string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, addrs := range a.byOwner {
		_, owner, _ := strings.Cut(key, "|")
		if !strings.HasPrefix(owner, prefix) {
			continue
		}
		subnets := a.subnets[a.ownerNet[key]]
		if a.ownerNet[key] == "" {
			subnets = []*subnet{a.dhcp}
		}
		for _, addr := range addrs {
			for _, s := range subnets {
				delete(s.used, addr)
			}
		}
		delete(a.byOwner, key)
		delete(a.ownerNet, key)
	}
}
