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

package harvester

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

const (
	// APIServerPort is the guest API server's port behind the control-plane load balancer.
	APIServerPort = 6443
	// RKE2SupervisorPort is where RKE2 servers take joining nodes: Cluster API's RKE2 provider
	// sends them to https://<control-plane endpoint>:9345 (its default registration method), so
	// an RKE2 cluster's control-plane load balancer listens there too.
	RKE2SupervisorPort = 9345
)

// ControlPlaneKindRKE2 is the kind of Cluster API's RKE2 control plane.
const ControlPlaneKindRKE2 = "RKE2ControlPlane"

// BuildControlPlaneLoadBalancer returns the Harvester load balancer in front of a cluster's
// control-plane VMs: listener 6443, TCP health check, backends selected by the labels the
// control-plane VMIs carry.
//
// controlPlaneKind is the kind of the Cluster's control plane: an RKE2 control plane gets a
// listener on RKE2SupervisorPort too.
func BuildControlPlaneLoadBalancer(hc *infrav1.HarvesterCluster, g naming.Guest, controlPlaneKind string) *lbv1.LoadBalancer {
	id := g.ID()
	lb := &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   hc.Spec.TargetNamespace,
			Name:        ControlPlaneLoadBalancerName(hc, g),
			Labels:      g.Labels(),
			Annotations: map[string]string{},
			// Harvester's controller's own finalizer, from the start (see the constant).
			Finalizers: []string{guestcloud.FinalizerHarvesterLBController},
		},
		Spec: lbv1.LoadBalancerSpec{
			Description:  fmt.Sprintf("control plane of Cluster API cluster %s/%s", g.Namespace, g.Name),
			WorkloadType: lbv1.VM,
			IPAM:         lbv1.Pool,
			IPPool:       hc.Spec.LoadBalancer.IPPoolName,
			Listeners: []lbv1.Listener{{
				Name: "apiserver", Port: APIServerPort, Protocol: corev1.ProtocolTCP, BackendPort: APIServerPort,
			}},
			BackendServerSelector: map[string][]string{
				naming.LabelCluster: {id},
				naming.LabelRole:    {naming.RoleControlPlane},
			},
			HealthCheck: &lbv1.HealthCheck{Port: APIServerPort, SuccessThreshold: 1, FailureThreshold: 3, PeriodSeconds: 5, TimeoutSeconds: 3},
		},
	}
	if controlPlaneKind == ControlPlaneKindRKE2 {
		lb.Spec.Listeners = append(lb.Spec.Listeners, lbv1.Listener{
			Name: "rke2-supervisor", Port: RKE2SupervisorPort, Protocol: corev1.ProtocolTCP, BackendPort: RKE2SupervisorPort,
		})
	}
	if hc.Spec.LoadBalancer.IPAM == infrav1.IPAMDHCP {
		lb.Spec.IPAM = lbv1.DHCP
	}
	if hc.Spec.LoadBalancer.Network != "" {
		lb.Annotations[guestcloud.AnnotationLBNetwork] = hc.Spec.LoadBalancer.Network
	}
	return lb
}

// LoadBalancerAddress returns the address a vm-type load balancer serves on, or "".
func LoadBalancerAddress(lb *lbv1.LoadBalancer) string {
	if lb.Status.Address != "" && lb.Status.Address != guestcloud.AddressAskDHCP {
		return lb.Status.Address
	}
	return ""
}

// DHCPPatience is how long a dhcp load balancer may wait for a lease before its condition asks
// whether the network has a DHCP server.
const DHCPPatience = 2 * time.Minute

// LoadBalancerService does the Harvester side of a HarvesterCluster's load balancers: the
// control plane's, and, when the cluster is deleted, those the guest's cloud controller manager
// made for its Services. It reads them from the connection's cache, whose events of them bring
// the cluster back.
type LoadBalancerService struct {
	C *transport.Client
	// SharedNamespaces, when not nil (a HarvesterClusterIdentity), confine the load balancer's
	// references as VMService's confine a machine's: its network is in the target namespace or
	// a shared one, and its IP pool is one whose scope names the target namespace (or the
	// global pool). nil (a Secret identity): the tenant's own credential, whose RBAC decides.
	SharedNamespaces []string
}

// LabelGlobalIPPool marks Harvester's global IP pool, which any load balancer may use
// (harvester-load-balancer's utils.KeyGlobalIPPool).
const LabelGlobalIPPool = "loadbalancer.harvesterhci.io/global-ip-pool"

// checkReferences refuses, before the control-plane load balancer is made, a network or IP
// pool the cluster's HarvesterClusterIdentity does not let it use. Harvester's load-balancer
// controller allocates from a pool the load balancer names without reading the pool's scope,
// so the scope is checked here: it is the Harvester admin's word on who may use the pool.
func (s *LoadBalancerService) checkReferences(ctx context.Context, hc *infrav1.HarvesterCluster, g naming.Guest) error {
	if s.SharedNamespaces == nil {
		return nil
	}
	target := hc.Spec.TargetNamespace
	if network := hc.Spec.LoadBalancer.Network; network != "" {
		ns, name := build.ResolveRef(network, target)
		if ns != target && !slices.Contains(s.SharedNamespaces, ns) {
			return transport.ReferenceError(infrav1.ReferenceNotAllowedReason,
				"load-balancer network %s/%s is in a Harvester namespace the cluster's HarvesterClusterIdentity does not share (its sharedNamespaces)", ns, name)
		}
	}
	name := hc.Spec.LoadBalancer.IPPoolName
	if name == "" || hc.Spec.LoadBalancer.IPAM == infrav1.IPAMDHCP {
		return nil
	}
	pool := &lbv1.IPPool{}
	err := s.C.Get(ctx, client.ObjectKey{Name: name}, pool)
	if err != nil && !apierrors.IsNotFound(err) {
		return transport.ClassifyError(err, fmt.Sprintf("reading IP pool %s", name))
	}
	// One message for a pool that does not exist and one that is not the tenant's: the
	// answer does not tell which pool names exist.
	if err != nil || !PoolAdmits(pool, target, g.ID()) {
		return transport.ReferenceError(infrav1.ReferenceNotAllowedReason,
			"IP pool %s does not exist or its scope (spec.selector.scope) does not name Harvester namespace %s: "+
				"with a HarvesterClusterIdentity a cluster uses the global pool or one scoped to its target namespace", name, target)
	}
	return nil
}

// PoolAdmits tells whether an IP pool's owner let load balancers of a namespace (and, for a
// scope that names guest clusters, of guest cluster id) use it: the global pool, or a scope
// entry that names the namespace, or one that admits every namespace of every project. An entry
// of one Rancher project (or of no project) with every namespace does not admit it: which
// project a Harvester namespace is in is not the provider's to read, so the admin names the
// namespace.
func PoolAdmits(pool *lbv1.IPPool, namespace, id string) bool {
	if pool.Labels[LabelGlobalIPPool] == "true" {
		return true
	}
	for _, t := range pool.Spec.Selector.Scope {
		if t.GuestCluster != "" && t.GuestCluster != "*" && t.GuestCluster != id {
			continue
		}
		if t.Namespace == namespace || (t.Namespace == "*" && t.Project == "*") {
			return true
		}
	}
	return false
}

// LoadBalancerState is how far the control-plane load balancer is: Ready with its Address, or
// Reason and Message say what it waits for (RecheckAfter, when set, is when that message
// changes without an event).
type LoadBalancerState struct {
	Ready           bool
	Reason, Message string
	Name, Address   string
	// Created tells that this call created the load balancer; CreatedAt is when it was.
	// Recreated, that the cluster had one before, which is gone from Harvester.
	Created, Recreated bool
	CreatedAt          time.Time
	RecheckAfter       time.Duration
}

// RecordedLoadBalancer is the name of the control-plane load balancer the provider recorded
// making for the cluster (its annotation, which clusterctl move carries, or its status), or ""
// when it made none: then an endpoint in the spec is the user's.
func RecordedLoadBalancer(hc *infrav1.HarvesterCluster) string {
	if name := hc.Annotations[infrav1.LoadBalancerAnnotation]; name != "" {
		return name
	}
	return hc.Status.LoadBalancer.Name
}

// ControlPlaneLoadBalancerName is the name of the cluster's control-plane load balancer: the one
// recorded on the HarvesterCluster (the provider's own name for it, or the name of a load
// balancer another provider made, which a take-over recorded: docs/migrating-from-caphv.md), else
// the guest's. Either way it is the cluster's only while it carries the guest's labels.
func ControlPlaneLoadBalancerName(hc *infrav1.HarvesterCluster, g naming.Guest) string {
	if name := hc.Annotations[infrav1.LoadBalancerAnnotation]; name != "" {
		return name
	}
	return g.LoadBalancerName()
}

// EnsureControlPlane makes the cluster's control-plane load balancer, unless the user set the
// endpoint in the spec (an endpoint with no recorded load balancer), and reports its state. A
// load balancer the cluster had that is gone from Harvester is made again under the same name,
// which Harvester's pool gives its former address back while that address is free; if it gets
// another, the state says the endpoint no longer matches. A load balancer of that name that is
// not the guest cluster's is an Error NameTaken and is left untouched.
func (s *LoadBalancerService) EnsureControlPlane(ctx context.Context, hc *infrav1.HarvesterCluster, g naming.Guest, controlPlaneKind string, now time.Time) (LoadBalancerState, error) {
	want := BuildControlPlaneLoadBalancer(hc, g, controlPlaneKind)
	endpoint := hc.Spec.ControlPlaneEndpoint.Host
	recorded := RecordedLoadBalancer(hc) != ""
	lb := &lbv1.LoadBalancer{}
	err := s.C.Cache.Get(ctx, client.ObjectKeyFromObject(want), lb)
	if apierrors.IsNotFound(err) {
		if endpoint != "" && !recorded {
			return LoadBalancerState{Ready: true, Reason: infrav1.UserProvidedEndpointReason,
				Message: "the control-plane endpoint is set in the spec; no load balancer is made"}, nil
		}
		if err := s.checkReferences(ctx, hc, g); err != nil {
			return LoadBalancerState{}, err
		}
		if err := s.C.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return LoadBalancerState{}, transport.ClassifyError(err, "creating the control-plane load balancer")
		}
		st := LoadBalancerState{Name: want.Name, Created: true, CreatedAt: now,
			Reason: infrav1.WaitingForAddressReason, Message: "waiting for Harvester to allocate an address"}
		if endpoint != "" {
			st.Recreated, st.Reason = true, infrav1.LoadBalancerRecreatedReason
			st.Message = fmt.Sprintf("the control-plane load balancer %s was deleted on Harvester and is made again; "+
				"the guest's API is unreachable at %s until it has that address back", want.Name, endpoint)
		}
		return st, nil
	}
	if err != nil {
		return LoadBalancerState{}, transport.ClassifyError(err, "reading the control-plane load balancer")
	}
	if !g.Owns(lb) {
		return LoadBalancerState{}, transport.NameTaken("a load balancer named %s already exists in Harvester namespace %s and was not made for this cluster; it is left untouched", lb.Name, lb.Namespace)
	}
	st := LoadBalancerState{Name: lb.Name, CreatedAt: lb.CreationTimestamp.Time, Address: LoadBalancerAddress(lb)}
	switch {
	case st.Address != "" && endpoint != "" && st.Address != endpoint:
		st.Reason = infrav1.EndpointMismatchReason
		st.Message = fmt.Sprintf("Harvester gave the control-plane load balancer %s address %s, but the cluster's endpoint is %s, "+
			"which was taken while the load balancer was gone: the guest's API is unreachable at its endpoint "+
			"(Harvester's load balancer cannot be asked for an address; see the troubleshooting guide)", lb.Name, st.Address, endpoint)
		return st, nil
	case st.Address != "":
		st.Ready, st.Reason = true, infrav1.ReadyReason
		return st, nil
	}
	problem := guestcloud.LoadBalancerProblem(lb)
	switch {
	case isWaiting(problem):
		st.Reason, st.Message = infrav1.WaitingForAddressReason, "waiting for Harvester to allocate an address"
		if lb.Spec.IPAM == lbv1.DHCP {
			if age := now.Sub(lb.CreationTimestamp.Time); age > DHCPPatience {
				st.Message = fmt.Sprintf("no DHCP lease after %s: does the load balancer's network have a DHCP server?", age.Round(time.Second))
			} else {
				st.Message, st.RecheckAfter = "waiting for a DHCP lease", DHCPPatience-age
			}
		}
	case isPoolExhausted(problem):
		st.Reason, st.Message = infrav1.IPPoolExhaustedReason, "Harvester's IP pool is exhausted: "+problem
	default:
		st.Reason, st.Message = infrav1.LoadBalancerFailedReason, "Harvester reports: "+problem
	}
	return st, nil
}

// isWaiting recognises what Harvester's load-balancer controller (harvester-load-balancer v1.5.0,
// pkg/controller/loadbalancer and pkg/lb) reports on a load balancer that has no address yet
// for a passing reason: its Service is not in the controller's cache yet, or kube-vip has not
// given it an address yet (every vm-type load balancer, pool or DHCP, goes through both), no
// backend VM runs yet, or none has passed its health check yet (v1.5.0 writes the last two
// with the address already set, which the provider reads as ready).
func isWaiting(problem string) bool {
	return problem == "" || problem == "no running backend servers" ||
		strings.HasPrefix(problem, "service is waiting for external IP") ||
		strings.HasPrefix(problem, "service is not existing") ||
		strings.HasPrefix(problem, "running backend servers are not probed as healthy")
}

// isPoolExhausted recognises host-local IPAM's message, which Harvester passes on.
func isPoolExhausted(msg string) bool { return strings.HasPrefix(msg, "no IP addresses available") }

// DeleteControlPlane deletes the cluster's control-plane load balancer (not another's of the
// same name). gone tells whether none is left; deleted, whether this call asked for it.
func (s *LoadBalancerService) DeleteControlPlane(ctx context.Context, hc *infrav1.HarvesterCluster, g naming.Guest) (gone, deleted bool, err error) {
	lb := &lbv1.LoadBalancer{}
	name := ControlPlaneLoadBalancerName(hc, g)
	// Live: the cache would still show it a moment after its deletion was seen.
	err = s.C.Get(ctx, client.ObjectKey{Namespace: hc.Spec.TargetNamespace, Name: name}, lb)
	switch {
	case apierrors.IsNotFound(err):
		return true, false, nil
	case err != nil:
		return false, false, transport.ClassifyError(err, "reading the control-plane load balancer")
	case !g.Owns(lb):
		return true, false, nil
	case !lb.DeletionTimestamp.IsZero():
		return false, false, nil
	case guestcloud.PoolAddressUnguarded(lb):
		// Harvester's controller adds its finalizer next; that update brings us back.
		return false, false, nil
	}
	if err := s.C.Delete(ctx, lb, client.Preconditions{UID: &lb.UID, ResourceVersion: &lb.ResourceVersion}); err != nil {
		if apierrors.IsConflict(err) {
			return false, false, nil // changed since read: the change brings us back
		}
		if !apierrors.IsNotFound(err) {
			return false, false, transport.ClassifyError(err, "deleting the control-plane load balancer")
		}
	}
	return false, true, nil
}

// DeleteGuest deletes the load balancers the guest's cloud controller manager made for its
// Services (labelled with the guest's cluster ID, from the CCM's --cluster-name), which would
// otherwise hold their addresses after the guest is gone. left is how many are still there;
// deleted, those this call asked Harvester to delete.
func (s *LoadBalancerService) DeleteGuest(ctx context.Context, hc *infrav1.HarvesterCluster, g naming.Guest) (left int, deleted []*lbv1.LoadBalancer, err error) {
	lbs := &lbv1.LoadBalancerList{}
	if err := s.C.Cache.List(ctx, lbs, client.InNamespace(hc.Spec.TargetNamespace), client.MatchingLabels{
		guestcloud.LabelLBCluster: guestcloud.LabelValue(g.ID()),
	}); err != nil {
		return 0, nil, transport.ClassifyError(err, "listing the guest's load balancers")
	}
	for i := range lbs.Items {
		lb := &lbs.Items[i]
		// One whose pool address Harvester's controller does not guard yet waits for its
		// finalizer, whose update brings us back.
		if !lb.DeletionTimestamp.IsZero() || guestcloud.PoolAddressUnguarded(lb) {
			continue
		}
		// As read: a newer version (an address allocated since) is looked at again on its event.
		err := s.C.Delete(ctx, lb, client.Preconditions{UID: &lb.UID, ResourceVersion: &lb.ResourceVersion})
		if apierrors.IsConflict(err) {
			continue
		}
		if client.IgnoreNotFound(err) != nil {
			return len(lbs.Items), deleted, transport.ClassifyError(err, "deleting a load balancer of the guest")
		}
		deleted = append(deleted, lb)
	}
	return len(lbs.Items), deleted, nil
}
