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

// Package ipam gives a HarvesterMachine's NICs their static addresses through Cluster API's IPAM
// contract: one IPAddressClaim per NIC and pool, owned by the machine, whose bound IPAddresses
// become the machine's status.ipAddresses, its addresses and its guest's network-data. It reads
// the machine and says what to report; the machine's controller writes the status, the
// IPAddressesReady condition and the events.
package ipam

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// Service claims and releases a machine's addresses on the management cluster.
type Service struct {
	// Client reads claims, addresses and pools (from the manager's cache) and writes claims.
	Client client.Client
}

// Event is an event the controller records on the machine.
type Event struct{ Type, Reason, Action, Note string }

// Report is where a machine's claims stand: Ready with the claimed addresses once every claim
// has its address; the IPAddressesReady condition the controller sets; the events it records.
type Report struct {
	Ready           bool
	Addresses       []infrav1.ClaimedIPAddress
	Status          metav1.ConditionStatus
	Reason, Message string
	Events          []Event
}

func (r *Report) waiting(reason, message string) {
	r.Ready, r.Status, r.Reason, r.Message = false, metav1.ConditionFalse, reason, message
}

// UsesIPPools tells whether any NIC of the machine takes addresses from IP pools.
func UsesIPPools(spec *infrav1.HarvesterMachineSpec) bool {
	for _, n := range spec.Networks {
		if len(n.AddressesFromPools) > 0 {
			return true
		}
	}
	return false
}

// NICMAC is the MAC a NIC has in the VM: the spec's, else (on a machine with IP pools) the one
// the provider derives and pins.
func NICMAC(hm *infrav1.HarvesterMachine, n infrav1.Network, i int) string {
	if n.MACAddress != "" {
		return n.MACAddress
	}
	return build.StaticMAC(hm.Namespace, hm.Name, hm.Spec.NICName(i))
}

// Claim makes one IPAddressClaim per NIC and pool, owned by the machine and labelled with its
// cluster, and reads the addresses bound to them. The report is Ready, with the addresses,
// once every claim has its address; until then it says why not.
func (s Service) Claim(ctx context.Context, hm *infrav1.HarvesterMachine, clusterName string) (Report, error) {
	var rep Report
	if !UsesIPPools(&hm.Spec) {
		rep.Ready, rep.Status, rep.Reason = true, metav1.ConditionTrue, infrav1.NoIPPoolsReason
		return rep, nil
	}
	var claimed []infrav1.ClaimedIPAddress
	for i, n := range hm.Spec.Networks {
		nic := hm.Spec.NICName(i)
		for j, ref := range n.AddressesFromPools {
			claim, err := s.ensureClaim(ctx, &rep, hm, clusterName, nic, j, ref)
			if err != nil || claim == nil {
				return rep, err // nil claim: the report says why
			}
			pool := ref.Kind + "/" + ref.Name
			if claim.Status.AddressRef.Name == "" {
				s.waitForAddress(ctx, &rep, hm.Namespace, claim, ref)
				return rep, nil
			}
			addr := &ipamv1.IPAddress{}
			key := client.ObjectKey{Namespace: hm.Namespace, Name: claim.Status.AddressRef.Name}
			if err := s.Client.Get(ctx, key, addr); err != nil {
				if apierrors.IsNotFound(err) { // not in the cache yet; its creation event follows
					rep.waiting(infrav1.WaitingForIPAddressReason,
						fmt.Sprintf("IPAddressClaim %s is bound to IPAddress %s, which is not visible yet", claim.Name, key.Name))
					return rep, nil
				}
				return rep, fmt.Errorf("reading IPAddress %s: %w", key, err)
			}
			parsed, err := build.ParseStaticAddress(addr.Spec.Address, addr.Spec.Prefix, addr.Spec.Gateway)
			if err != nil {
				rep.waiting(infrav1.IPAddressClaimFailedReason, fmt.Sprintf("IPAddress %s from pool %s is unusable: %v", addr.Name, pool, err))
				return rep, nil
			}
			claimed = append(claimed, infrav1.ClaimedIPAddress{
				Interface:  nic,
				MACAddress: NICMAC(hm, n, i),
				Pool:       pool,
				Claim:      claim.Name,
				Address:    fmt.Sprintf("%s/%d", parsed.Address, parsed.Prefix),
				Gateway:    addr.Spec.Gateway,
			})
		}
	}
	rep.Ready, rep.Addresses, rep.Status, rep.Reason = true, claimed, metav1.ConditionTrue, infrav1.ReadyReason
	return rep, nil
}

// ensureClaim returns the machine's claim for a NIC's pool number j, creating it when missing.
// A claim of that name that is not the machine's is reported (nil, nil).
func (s Service) ensureClaim(ctx context.Context, rep *Report, hm *infrav1.HarvesterMachine, clusterName, nic string, j int, ref infrav1.IPPoolReference) (*ipamv1.IPAddressClaim, error) {
	name := build.IPAddressClaimName(hm.Name, nic, j)
	claim := &ipamv1.IPAddressClaim{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: hm.Namespace, Name: name}, claim)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(claim, hm) {
			rep.waiting(infrav1.IPAddressClaimFailedReason,
				fmt.Sprintf("IPAddressClaim %s exists and is not this machine's; it is left untouched", name))
			return nil, nil
		}
		return claim, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading IPAddressClaim %s/%s: %w", hm.Namespace, name, err)
	}
	claim = &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: hm.Namespace,
			Name:      name,
			Labels:    map[string]string{clusterv1.ClusterNameLabel: clusterName},
		},
		Spec: ipamv1.IPAddressClaimSpec{
			ClusterName: clusterName,
			PoolRef:     ipamv1.IPPoolReference{APIGroup: ref.APIGroup, Kind: ref.Kind, Name: ref.Name},
		},
	}
	if err := controllerutil.SetControllerReference(hm, claim, s.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := s.Client.Create(ctx, claim); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier reconcile the cache has not shown yet: its event brings us back.
			rep.waiting(infrav1.WaitingForIPAddressReason, "waiting for IPAddressClaim "+name)
			return nil, nil
		}
		return nil, fmt.Errorf("creating IPAddressClaim %s/%s: %w", hm.Namespace, name, err)
	}
	rep.Events = append(rep.Events, Event{Type: corev1.EventTypeNormal, Reason: "IPAddressClaimCreated", Action: "Claim",
		Note: fmt.Sprintf("Claimed an address for %s from %s %s", nic, ref.Kind, ref.Name)})
	return claim, nil
}

// waitForAddress says why a claim has no address yet: the IPAM provider's own word on the claim
// when it gives one (CAPI's contract has the reason PoolExhausted), else the pool's status when
// it is readable and has no free address (the in-cluster provider v1.1.0 only logs its "no
// address available"), else that the pool is missing or that the claim waits.
func (s Service) waitForAddress(ctx context.Context, rep *Report, namespace string, claim *ipamv1.IPAddressClaim, ref infrav1.IPPoolReference) {
	pool := ref.Kind + " " + ref.Name
	if c := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition); c != nil && c.Status == metav1.ConditionFalse {
		reason := infrav1.IPAddressClaimFailedReason
		if c.Reason == ipamv1.IPAddressClaimReadyPoolExhaustedReason {
			reason = infrav1.IPPoolExhaustedReason
		}
		rep.waiting(reason, fmt.Sprintf("IPAddressClaim %s from %s: %s: %s", claim.Name, pool, c.Reason, c.Message))
		return
	}
	status, err := s.poolStatus(ctx, namespace, ref)
	switch {
	case err != nil:
		rep.waiting(infrav1.WaitingForIPAddressReason, fmt.Sprintf("IPAddressClaim %s waits for an address from %s (%v)", claim.Name, pool, err))
	case status.total > 0 && status.free == 0:
		rep.waiting(infrav1.IPPoolExhaustedReason,
			fmt.Sprintf("%s has no free address (%d in use of %d) for IPAddressClaim %s: add addresses to the pool or free some", pool, status.used, status.total, claim.Name))
	default:
		rep.waiting(infrav1.WaitingForIPAddressReason, fmt.Sprintf("IPAddressClaim %s waits for an address from %s", claim.Name, pool))
	}
}

type poolCounts struct{ total, used, free int64 }

// poolStatus reads a pool's address counts as the in-cluster provider writes them
// (status.ipAddresses.{total,used,free}); other providers' pools may have none (all zero).
func (s Service) poolStatus(ctx context.Context, namespace string, ref infrav1.IPPoolReference) (poolCounts, error) {
	mapping, err := s.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		if meta.IsNoMatchError(err) {
			return poolCounts{}, fmt.Errorf("no IPAM provider serves kind %s in %s: is one installed?", ref.Kind, ref.APIGroup)
		}
		return poolCounts{}, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	key := client.ObjectKey{Name: ref.Name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		key.Namespace = namespace
	}
	if err := s.Client.Get(ctx, key, u); err != nil {
		if apierrors.IsNotFound(err) {
			return poolCounts{}, fmt.Errorf("the pool does not exist")
		}
		if apierrors.IsForbidden(err) {
			return poolCounts{}, nil // a pool kind the provider may not read: the claim tells
		}
		return poolCounts{}, err
	}
	var c poolCounts
	c.total, _, _ = unstructured.NestedInt64(u.Object, "status", "ipAddresses", "total")
	c.used, _, _ = unstructured.NestedInt64(u.Object, "status", "ipAddresses", "used")
	c.free, _, _ = unstructured.NestedInt64(u.Object, "status", "ipAddresses", "free")
	return c, nil
}

// NetworkData renders the guest's network-data from the machine's claimed addresses
// (status.ipAddresses), and the MACs the VM pins (every NIC's, so that the network-data matches
// each).
func NetworkData(hm *infrav1.HarvesterMachine) ([]byte, map[string]string, error) {
	byNIC := map[string][]infrav1.ClaimedIPAddress{}
	for _, a := range hm.Status.IPAddresses {
		byNIC[a.Interface] = append(byNIC[a.Interface], a)
	}
	macs := map[string]string{}
	nics := make([]build.StaticNIC, 0, len(hm.Spec.Networks))
	// In the VM's order: the management NIC, listed first, gets the default route.
	for _, i := range hm.Spec.NICOrder() {
		n := hm.Spec.Networks[i]
		nic := build.StaticNIC{Name: hm.Spec.NICName(i), MAC: NICMAC(hm, n, i), Nameservers: n.Nameservers}
		macs[nic.Name] = nic.MAC
		for _, a := range byNIC[nic.Name] {
			ip, prefix, err := splitCIDR(a.Address)
			if err != nil {
				return nil, nil, err
			}
			parsed, err := build.ParseStaticAddress(ip, &prefix, a.Gateway)
			if err != nil {
				return nil, nil, err
			}
			nic.Addresses = append(nic.Addresses, parsed)
		}
		nics = append(nics, nic)
	}
	data, err := build.BuildNetworkData(nics, hm.Spec.NetworkConfigVersion)
	return data, macs, err
}

func splitCIDR(cidr string) (string, int32, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", cidr, err)
	}
	return p.Addr().String(), int32(p.Bits()), nil //nolint:gosec // a prefix length, at most 128
}

// MachineAddresses are the machine's claimed addresses as machine addresses: the management
// NIC's (the one that sets `management`, else the first) as InternalIP, the others' as
// ExternalIP.
func MachineAddresses(hm *infrav1.HarvesterMachine) []clusterv1.MachineAddress {
	if len(hm.Spec.Networks) == 0 {
		return nil
	}
	mgmt := build.ManagementNetworkName(&hm.Spec)
	var out []clusterv1.MachineAddress
	for _, a := range hm.Status.IPAddresses {
		ip, _, err := splitCIDR(a.Address)
		if err != nil {
			continue
		}
		t := clusterv1.MachineExternalIP
		if a.Interface == mgmt {
			t = clusterv1.MachineInternalIP
		}
		out = append(out, clusterv1.MachineAddress{Type: t, Address: ip})
	}
	return out
}

// Release deletes the machine's claims, once its VM is gone: the IPAM provider then frees their
// addresses. Each claim's name follows from the spec; a claim the cache does not show yet goes
// with the machine by its owner reference (garbage collection).
func (s Service) Release(ctx context.Context, hm *infrav1.HarvesterMachine) error {
	for i, n := range hm.Spec.Networks {
		for j := range n.AddressesFromPools {
			claim := &ipamv1.IPAddressClaim{}
			key := client.ObjectKey{Namespace: hm.Namespace, Name: build.IPAddressClaimName(hm.Name, hm.Spec.NICName(i), j)}
			if err := s.Client.Get(ctx, key, claim); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("reading IPAddressClaim %s: %w", key, err)
			}
			if !metav1.IsControlledBy(claim, hm) || !claim.DeletionTimestamp.IsZero() {
				continue
			}
			if err := s.Client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting IPAddressClaim %s: %w", key, err)
			}
		}
	}
	return nil
}

// MachineOf maps an IPAddress to the machine that owns its claim.
func (s Service) MachineOf(ctx context.Context, obj client.Object) []reconcile.Request {
	addr, ok := obj.(*ipamv1.IPAddress)
	if !ok || addr.Spec.ClaimRef.Name == "" {
		return nil
	}
	claim := &ipamv1.IPAddressClaim{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: addr.Namespace, Name: addr.Spec.ClaimRef.Name}, claim); err != nil {
		return nil
	}
	owner := metav1.GetControllerOf(claim)
	if owner == nil || owner.Kind != "HarvesterMachine" || owner.APIVersion != infrav1.GroupVersion.String() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: claim.Namespace, Name: owner.Name}}}
}
