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

package cloudprovider

// Long file: the cloud provider's LoadBalancer interface (get, ensure, update, delete) over one
// Harvester load balancer per Service, with the checks of a guest's Service annotations it needs;
// the watch that wakes it is apart (loadbalancer_watch.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// Reasons of the events the load balancer records on guest Services (the service controller
// adds its own SyncLoadBalancerFailed with the same error).
const (
	ReasonInvalidIPAM           = "InvalidIPAM"
	ReasonIPAMChangeRefused     = "IPAMChangeRefused"
	ReasonInvalidPrimaryService = "InvalidPrimaryService"
	ReasonSharedPortConflict    = "SharedIPPortConflict"
	ReasonPrimaryServiceInUse   = "PrimaryServiceInUse"
	ReasonHealthCheckIgnored    = "HealthCheckIgnored"
	ReasonLoadBalancerLimit     = "LoadBalancerLimitReached"
	// ReasonAddressPending: Harvester reports why a Service's load balancer has no address.
	ReasonAddressPending = "LoadBalancerAddressPending"
)

const (
	// addressWait bounds how long EnsureLoadBalancer waits for the address of a secondary
	// Service's primary load balancer; when it takes longer the call fails (the service
	// controller retries with back-off). A primary Service does not wait (EnsureLoadBalancer).
	addressWait = 2 * time.Second
	// cacheWait bounds how long a call waits for the watches to be synced (only right after
	// start).
	cacheWait = 10 * time.Second
)

// loadBalancers implements cloudprovider.LoadBalancer with one Harvester load balancer
// (workloadType cluster) per guest Service, in the CCM's Harvester namespace. Harvester only
// allocates the address; kube-vip in the guest announces it, told by the Service annotation
// kube-vip.io/loadbalancerIPs, and kube-proxy forwards it to the Service's endpoints.
type loadBalancers struct {
	cloud *Cloud
	guest kubernetes.Interface
	// services is the guest's Services, indexed by the primary Service they share an address of.
	services       corelisters.ServiceLister
	servicesIndex  toolscache.Indexer
	servicesSynced toolscache.InformerSynced
	// harvesterLBs is the Harvester load balancers of this guest cluster (by label).
	harvesterLBs cache.Cache
	waiters      *addressWaiters
	// annotations is the queue of Services (namespace/name) whose load balancer got an address.
	annotations workqueue.TypedRateLimitingInterface[string]
	recorder    record.EventRecorder
}

var _ cloudprovider.LoadBalancer = &loadBalancers{}

func (l *loadBalancers) cluster() string { return l.cloud.opts.ClusterName }

// errNotShared marks a primary Service that does not share its address with the secondary's
// namespace (guestcloud.SharingAllowed): errors.Is(err, errNotShared) for a notShared error.
var errNotShared = errors.New("not shared with this namespace")

type notShared struct{ error }

func (notShared) Is(target error) bool { return target == errNotShared }

// primaryRef is the primary Service (namespace/name) a secondary Service names; an empty
// annotation names none.
func primaryRef(svc *corev1.Service) (string, bool) {
	ref := svc.Annotations[guestcloud.AnnotationServicePrimaryService]
	return ref, ref != ""
}

// nameOf is the name of the Harvester load balancer of a Service (a primary one; a secondary has
// none).
func (l *loadBalancers) nameOf(svc *corev1.Service) string {
	return guestcloud.ServiceLoadBalancerName(l.cluster(), svc.Namespace, svc.Name, svc.UID)
}

// GetLoadBalancerName names the Service's Harvester load balancer. The clusterName argument is
// --cluster-name, which the cloud already holds; all names and labels use the cloud's own.
func (l *loadBalancers) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return l.nameOf(svc)
}

// GetLoadBalancer reports whether the Service has an address from Harvester: its own load
// balancer, or, for a secondary Service, its primary's. The service controller deletes only
// what exists, so a load balancer without an address yet still exists.
func (l *loadBalancers) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	lb, err := l.get(ctx, l.nameOf(svc))
	if err != nil || lb != nil {
		return l.statusOf(svc, lb), lb != nil, err
	}
	if _, secondary := primaryRef(svc); !secondary {
		return nil, false, nil
	}
	primary, err := l.primaryOf(ctx, svc, false)
	if err != nil || primary == nil {
		return nil, false, nil //nolint:nilerr // an invalid secondary has no load balancer to delete
	}
	lb, err = l.get(ctx, l.nameOf(primary))
	if err != nil || lb == nil {
		return nil, false, err
	}
	return l.statusOf(primary, lb), true, nil
}

// EnsureLoadBalancer creates or updates the Service's Harvester load balancer, gives its address
// to kube-vip (annotation kube-vip.io/loadbalancerIPs) and returns the status the service
// controller writes:
//   - pool: the address Harvester allocated. Until it is there the call returns the Service's
//     status as it is, without waiting: the service controller runs few workers (one by
//     default), and a worker held while Harvester books addresses (two at a time, retrying its
//     conflicts on the pool) would hold the other Services behind it for seconds. The watch of
//     the load balancers writes the annotation and this status once the address comes; the
//     service controller's call that the annotation triggers then finds nothing to change. A
//     load balancer Harvester reports a problem for fails the call with it (the service
//     controller retries with back-off).
//   - dhcp: kube-vip leases the address itself (the annotation is 0.0.0.0) and writes it to the
//     Service's status; the call returns the status the Service has, so the service controller
//     never overwrites kube-vip's lease (upstream does the same).
//   - a secondary Service (primary-service annotation) gets the primary's address and no load
//     balancer of its own.
func (l *loadBalancers) EnsureLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if err := l.waitForSync(ctx); err != nil {
		return nil, err
	}
	l.warnIgnoredHealthCheck(svc)
	if _, secondary := primaryRef(svc); secondary {
		return l.ensureSecondary(ctx, svc)
	}
	lb, err := l.ensureHarvesterLB(ctx, svc)
	if err != nil {
		return nil, err
	}
	addr, lb := l.latestAddress(ctx, lb)
	if addr == "" {
		if problem := guestcloud.LoadBalancerProblem(lb); problem != "" {
			return nil, fmt.Errorf("load balancer %s/%s has no address: %s", lb.Namespace, lb.Name, problem)
		}
		return svc.Status.LoadBalancer.DeepCopy(), nil
	}
	if err := l.setKubeVIPAddress(ctx, svc, addr); err != nil {
		return nil, err
	}
	return l.statusOf(svc, lb), nil
}

// UpdateLoadBalancer is called when the guest's nodes change. Harvester selects the guest's VMs
// by label and kube-vip runs on the nodes, so only the load balancer itself is made sure of
// (re-created if someone deleted it).
func (l *loadBalancers) UpdateLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, _ []*corev1.Node) error {
	if _, secondary := primaryRef(svc); secondary {
		return nil
	}
	_, err := l.ensureHarvesterLB(ctx, svc)
	return err
}

// EnsureLoadBalancerDeleted deletes the Service's Harvester load balancer (Harvester then frees
// its address) and takes the address away from kube-vip. A primary Service that others still
// share the address of keeps it until they are gone or point elsewhere.
func (l *loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	if err := l.waitForSync(ctx); err != nil {
		return err
	}
	if _, secondary := primaryRef(svc); !secondary {
		if users := l.secondariesOf(svc, nil); len(users) > 0 {
			return l.refuse(svc, ReasonPrimaryServiceInUse, fmt.Errorf( //nolint:staticcheck // also the Service's event message, which names the kind first
				"Service %s/%s keeps its load balancer: %s still share its address (annotation %s); delete them or point them elsewhere first",
				svc.Namespace, svc.Name, strings.Join(users, ", "), guestcloud.AnnotationServicePrimaryService))
		}
	}
	if err := l.deleteHarvesterLB(ctx, svc); err != nil {
		return err
	}
	return l.clearKubeVIPAddress(ctx, svc)
}

// ensureHarvesterLB creates the Service's load balancer or brings it up to date (Update: the
// cloud-provider role has no patch on load balancers).
func (l *loadBalancers) ensureHarvesterLB(ctx context.Context, svc *corev1.Service) (*lbv1.LoadBalancer, error) {
	ipam, err := guestcloud.ServiceIPAM(svc)
	if err != nil {
		return nil, l.refuse(svc, ReasonInvalidIPAM, err)
	}
	desired := guestcloud.BuildServiceLoadBalancer(l.cloud.namespace, l.cluster(), svc, ipam)
	lb, err := l.get(ctx, desired.Name)
	if err != nil {
		return nil, err
	}
	if lb == nil {
		if err := l.checkLimit(ctx, svc); err != nil {
			return nil, err
		}
		if err := l.cloud.client.Create(ctx, desired); err != nil {
			return nil, fmt.Errorf("creating load balancer %s/%s for Service %s/%s: %w", desired.Namespace, desired.Name, svc.Namespace, svc.Name, err)
		}
		return desired, nil
	}
	if current := guestcloud.LoadBalancerIPAM(lb); current != ipam {
		return nil, l.refuse(svc, ReasonIPAMChangeRefused, fmt.Errorf( //nolint:staticcheck // also the Service's event message, which names the kind first
			"Service %s/%s asks for IPAM %s but its load balancer %s/%s has %s, which cannot change: re-create the Service to change it",
			svc.Namespace, svc.Name, ipam, lb.Namespace, lb.Name, current))
	}
	if guestcloud.UpdateServiceLoadBalancer(lb, desired) {
		if err := l.cloud.client.Update(ctx, lb); err != nil {
			return nil, fmt.Errorf("updating load balancer %s/%s for Service %s/%s: %w", lb.Namespace, lb.Name, svc.Namespace, svc.Name, err)
		}
	}
	return lb, nil
}

// latestAddress returns the address of a load balancer as the watch last saw it (the load balancer
// just created or updated may be older), and that load balancer.
func (l *loadBalancers) latestAddress(ctx context.Context, lb *lbv1.LoadBalancer) (string, *lbv1.LoadBalancer) {
	if addr := guestcloud.ServiceLoadBalancerAddress(lb); addr != "" {
		return addr, lb
	}
	latest := &lbv1.LoadBalancer{}
	if err := l.harvesterLBs.Get(ctx, client.ObjectKeyFromObject(lb), latest); err == nil {
		return guestcloud.ServiceLoadBalancerAddress(latest), latest
	}
	return "", lb
}

// waitForAddress returns the address of a load balancer, waiting up to addressWait for Harvester
// to allocate it; the load balancer returned is the latest seen.
func (l *loadBalancers) waitForAddress(ctx context.Context, lb *lbv1.LoadBalancer) (string, *lbv1.LoadBalancer, error) {
	if addr := guestcloud.ServiceLoadBalancerAddress(lb); addr != "" {
		return addr, lb, nil
	}
	ctx, cancel := context.WithTimeout(ctx, addressWait)
	defer cancel()
	for {
		changed := l.waiters.channel(lb.Name)
		latest := &lbv1.LoadBalancer{}
		if err := l.harvesterLBs.Get(ctx, client.ObjectKeyFromObject(lb), latest); err == nil {
			lb = latest
			if addr := guestcloud.ServiceLoadBalancerAddress(lb); addr != "" {
				return addr, lb, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			problem := ""
			if p := guestcloud.LoadBalancerProblem(lb); p != "" {
				problem = ": " + p
			}
			return "", nil, fmt.Errorf("load balancer %s/%s has no address yet%s (the Service gets it as soon as Harvester allocates one)",
				lb.Namespace, lb.Name, problem)
		}
	}
}

// statusOf is the status of a (primary) Service served by lb.
func (l *loadBalancers) statusOf(svc *corev1.Service, lb *lbv1.LoadBalancer) *corev1.LoadBalancerStatus {
	if lb == nil {
		return nil
	}
	if guestcloud.LoadBalancerIPAM(lb) == lbv1.DHCP {
		return svc.Status.LoadBalancer.DeepCopy()
	}
	return ingress(guestcloud.ServiceLoadBalancerAddress(lb))
}

func ingress(addr string) *corev1.LoadBalancerStatus {
	if addr == "" {
		return &corev1.LoadBalancerStatus{}
	}
	// kube-vip puts the address on the nodes: VIP mode (what the apiserver defaults to, so the
	// service controller sees no change to write back).
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: addr, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}}
}

// ensureSecondary gives a secondary Service its primary's address, once it has checked the
// sharing rules: the primary exists, is of type LoadBalancer and is no secondary itself, the
// secondary is nobody's primary, and no port (number and protocol) is used twice on the address.
func (l *loadBalancers) ensureSecondary(ctx context.Context, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	primary, err := l.primaryOf(ctx, svc, true)
	if errors.Is(err, errNotShared) {
		// Its consent withdrawn, the primary's address is no longer announced for it.
		return nil, errors.Join(err, l.clearKubeVIPAddress(ctx, svc))
	}
	if err != nil {
		return nil, err
	}
	if users := l.secondariesOf(svc, nil); len(users) > 0 {
		return nil, l.refuse(svc, ReasonInvalidPrimaryService, fmt.Errorf( //nolint:staticcheck // also the Service's event message, which names the kind first
			"Service %s/%s cannot share the address of %s/%s: %s share its own address, and a primary Service cannot be a secondary one",
			svc.Namespace, svc.Name, primary.Namespace, primary.Name, strings.Join(users, ", ")))
	}
	if err := l.checkSharedPorts(svc, primary); err != nil {
		return nil, l.refuse(svc, ReasonSharedPortConflict, err)
	}
	// No load balancer of its own: one left from when it was a primary goes.
	if err := l.deleteHarvesterLB(ctx, svc); err != nil {
		return nil, err
	}
	lb, err := l.get(ctx, l.nameOf(primary))
	if err != nil {
		return nil, err
	}
	if lb == nil {
		return nil, fmt.Errorf("primary Service %s/%s of %s/%s has no load balancer yet", primary.Namespace, primary.Name, svc.Namespace, svc.Name)
	}
	var addr string
	if guestcloud.LoadBalancerIPAM(lb) == lbv1.DHCP {
		// The address is the one kube-vip leased for the primary.
		for _, in := range primary.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				addr = in.IP
				break
			}
		}
		if addr == "" {
			return nil, fmt.Errorf("primary Service %s/%s of %s/%s has no DHCP lease yet", primary.Namespace, primary.Name, svc.Namespace, svc.Name)
		}
	} else if addr, _, err = l.waitForAddress(ctx, lb); err != nil {
		return nil, fmt.Errorf("primary Service %s/%s of %s/%s: %w", primary.Namespace, primary.Name, svc.Namespace, svc.Name, err)
	}
	if err := l.setSharedAddress(ctx, svc, primary, addr); err != nil {
		return nil, err
	}
	return ingress(addr), nil
}

// primaryOf returns the primary Service a secondary names. With refuse, an invalid reference is
// recorded as an event on the Service; without, it is just an error.
func (l *loadBalancers) primaryOf(ctx context.Context, svc *corev1.Service, refuse bool) (*corev1.Service, error) {
	invalid := func(format string, args ...any) error {
		err := fmt.Errorf("Service %s/%s: annotation %s: "+format,
			append([]any{svc.Namespace, svc.Name, guestcloud.AnnotationServicePrimaryService}, args...)...)
		if refuse {
			return l.refuse(svc, ReasonInvalidPrimaryService, err)
		}
		return err
	}
	ref, _ := primaryRef(svc)
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, invalid("%q is not namespace/name", ref)
	}
	if ns == svc.Namespace && name == svc.Name {
		return nil, invalid("names the Service itself")
	}
	primary, err := l.guest.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, invalid("primary Service %s does not exist", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("reading primary Service %s of %s/%s: %w", ref, svc.Namespace, svc.Name, err)
	}
	if primary.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil, invalid("primary Service %s is of type %s, not LoadBalancer", ref, primary.Spec.Type)
	}
	if next, chained := primaryRef(primary); chained {
		return nil, invalid("primary Service %s shares the address of %s itself; secondary Services cannot be chained", ref, next)
	}
	if !guestcloud.SharingAllowed(primary, svc.Namespace) {
		return nil, notShared{invalid("primary Service %s does not share its address with namespace %s (its annotation %s lists the other namespaces it shares with)",
			ref, svc.Namespace, guestcloud.AnnotationServiceShareWithNamespaces)}
	}
	return primary, nil
}

// secondariesOf lists (as namespace/name) the Services of type LoadBalancer, not being deleted,
// that share the address of primary; except is left out.
func (l *loadBalancers) secondariesOf(primary, except *corev1.Service) []string {
	objs, err := l.servicesIndex.ByIndex(byPrimaryIndex, primary.Namespace+"/"+primary.Name)
	if err != nil {
		return nil // the index exists from the start
	}
	var out []string
	for _, obj := range objs {
		s, ok := obj.(*corev1.Service)
		// A Service of a namespace the primary does not share with gets nothing of it, and
		// neither holds up its deletion nor takes its ports.
		if !ok || s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.DeletionTimestamp != nil ||
			(except != nil && s.Namespace == except.Namespace && s.Name == except.Name) ||
			!guestcloud.SharingAllowed(primary, s.Namespace) {
			continue
		}
		out = append(out, s.Namespace+"/"+s.Name)
	}
	slices.Sort(out)
	return out
}

// checkSharedPorts refuses a port of svc that the primary or another of its secondaries already
// uses on the shared address. Ports are told apart by number and protocol, so a TCP and a UDP
// Service (DNS) can share port 53.
func (l *loadBalancers) checkSharedPorts(svc, primary *corev1.Service) error {
	type port struct {
		number   int32
		protocol corev1.Protocol
	}
	used := map[port]string{}
	add := func(s *corev1.Service) {
		for _, p := range s.Spec.Ports {
			k := port{p.Port, p.Protocol}
			if _, taken := used[k]; !taken {
				used[k] = s.Namespace + "/" + s.Name
			}
		}
	}
	add(primary)
	for _, key := range l.secondariesOf(primary, svc) {
		ns, name, _ := strings.Cut(key, "/")
		if other, err := l.services.Services(ns).Get(name); err == nil {
			add(other)
		}
	}
	for _, p := range svc.Spec.Ports {
		if owner, taken := used[port{p.Port, p.Protocol}]; taken {
			return fmt.Errorf("port %d/%s of Service %s/%s is already used on the address it shares with %s/%s (by %s)",
				p.Port, p.Protocol, svc.Namespace, svc.Name, primary.Namespace, primary.Name, owner)
		}
	}
	return nil
}

// checkLimit refuses a new load balancer when the guest cluster has Options.MaxLoadBalancers of
// them already: every load balancer holds an address of a pool other guests may draw from, and
// a guest user who can create Services must not be able to empty it. The count is a live list
// (by this cluster's label), not the cache, so that Services made one after the other are each
// counted with the ones before.
func (l *loadBalancers) checkLimit(ctx context.Context, svc *corev1.Service) error {
	limit := l.cloud.opts.MaxLoadBalancers
	if limit <= 0 {
		return nil
	}
	list := &lbv1.LoadBalancerList{}
	if err := l.cloud.client.List(ctx, list, client.InNamespace(l.cloud.namespace),
		client.MatchingLabels{guestcloud.LabelLBCluster: guestcloud.LabelValue(l.cluster())}); err != nil {
		return fmt.Errorf("counting the cluster's load balancers in %s: %w", l.cloud.namespace, err)
	}
	if len(list.Items) >= limit {
		return l.refuse(svc, ReasonLoadBalancerLimit, fmt.Errorf( //nolint:staticcheck // also the Service's event message, which names the kind first
			"Service %s/%s gets no load balancer: the cluster has %d, its limit (--max-load-balancers); delete a Service of type LoadBalancer or share an address (annotation %s)",
			svc.Namespace, svc.Name, len(list.Items), guestcloud.AnnotationServicePrimaryService))
	}
	return nil
}

// get reads a load balancer of this cluster from Harvester; nil when there is none.
func (l *loadBalancers) get(ctx context.Context, name string) (*lbv1.LoadBalancer, error) {
	lb := &lbv1.LoadBalancer{}
	err := l.cloud.client.Get(ctx, client.ObjectKey{Namespace: l.cloud.namespace, Name: name}, lb)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading load balancer %s/%s: %w", l.cloud.namespace, name, err)
	}
	return lb, nil
}

// deleteHarvesterLB deletes the Service's load balancer once Harvester's controller guards its
// pool address (guestcloud.PoolAddressUnguarded), and only as it was when checked (a write in
// between, such as an address allocated after the check, makes it look again).
func (l *loadBalancers) deleteHarvesterLB(ctx context.Context, svc *corev1.Service) error {
	lb, err := l.get(ctx, l.nameOf(svc))
	if err != nil || lb == nil {
		return err
	}
	if guestcloud.PoolAddressUnguarded(lb) {
		return fmt.Errorf("load balancer %s/%s of Service %s/%s holds address %s of pool %s, which Harvester's load balancer controller has not taken charge of yet; deleting it now would leave the address allocated in the pool, so it is deleted once the controller's finalizer is on it",
			lb.Namespace, lb.Name, svc.Namespace, svc.Name, lb.Status.AllocatedAddress.IP, lb.Status.AllocatedAddress.IPPool)
	}
	if !lb.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := l.cloud.client.Delete(ctx, lb, client.Preconditions{UID: &lb.UID, ResourceVersion: &lb.ResourceVersion}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting load balancer %s/%s of Service %s/%s: %w", lb.Namespace, lb.Name, svc.Namespace, svc.Name, err)
	}
	return nil
}

// setKubeVIPAddress writes the address kube-vip announces for a primary Service, and takes away
// the label of a secondary Service it may carry from before. The patch carries the Service's UID,
// so a Service re-created under the same name is never given the old address.
func (l *loadBalancers) setKubeVIPAddress(ctx context.Context, svc *corev1.Service, addr string) error {
	return l.setAddress(ctx, svc, addr, nil)
}

// setSharedAddress writes the address a secondary Service shares with primary, and labels it
// with its primary (LabelServicePrimaryService), as the upstream cloud provider does: kube-vip
// announces the address once for all the Services that carry it.
func (l *loadBalancers) setSharedAddress(ctx context.Context, svc, primary *corev1.Service, addr string) error {
	return l.setAddress(ctx, svc, addr, ptr.To(guestcloud.PrimaryServiceLabelValue(primary.Namespace, primary.Name)))
}

// setAddress writes the kube-vip annotation and the primary-service label (nil: none) of a
// Service, when they are not so already.
func (l *loadBalancers) setAddress(ctx context.Context, svc *corev1.Service, addr string, primaryLabel *string) error {
	label, labelled := svc.Labels[guestcloud.LabelServicePrimaryService]
	labelOK := (primaryLabel == nil && !labelled) || (primaryLabel != nil && labelled && label == *primaryLabel)
	if svc.Annotations[guestcloud.AnnotationKubeVIPLoadBalancerIPs] == addr && labelOK {
		return nil
	}
	if err := l.patchService(ctx, svc, &addr, primaryLabel); err != nil {
		return fmt.Errorf("giving address %s to kube-vip on Service %s/%s: %w", addr, svc.Namespace, svc.Name, err)
	}
	return nil
}

// clearKubeVIPAddress takes the address (and the primary-service label) away from a Service that
// stays (it no longer wants a load balancer); one being deleted is left alone.
func (l *loadBalancers) clearKubeVIPAddress(ctx context.Context, svc *corev1.Service) error {
	_, annotated := svc.Annotations[guestcloud.AnnotationKubeVIPLoadBalancerIPs]
	_, labelled := svc.Labels[guestcloud.LabelServicePrimaryService]
	if (!annotated && !labelled) || svc.DeletionTimestamp != nil {
		return nil
	}
	err := l.patchService(ctx, svc, nil, nil)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
		return nil // gone, or re-created (another UID)
	}
	if err != nil {
		return fmt.Errorf("taking the address away from kube-vip on Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// patchService sets (or, with nil, removes) the kube-vip annotation and the primary-service label
// of a Service, guarded by its UID.
func (l *loadBalancers) patchService(ctx context.Context, svc *corev1.Service, addr, primaryLabel *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         svc.UID,
		"annotations": map[string]*string{guestcloud.AnnotationKubeVIPLoadBalancerIPs: addr},
		"labels":      map[string]*string{guestcloud.LabelServicePrimaryService: primaryLabel},
	}})
	if err != nil {
		return err
	}
	_, err = l.guest.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// setStatus writes a Service's status.loadBalancer, when it is not so already.
func (l *loadBalancers) setStatus(ctx context.Context, svc *corev1.Service, status *corev1.LoadBalancerStatus) error {
	if equality.Semantic.DeepEqual(svc.Status.LoadBalancer, *status) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": svc.UID},
		"status":   map[string]any{"loadBalancer": status},
	})
	if err != nil {
		return err
	}
	if _, err := l.guest.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("writing the address of Service %s/%s to its status: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// refuse records err as a warning event on the Service and returns it.
func (l *loadBalancers) refuse(svc *corev1.Service, reason string, err error) error {
	l.recorder.Event(svc, corev1.EventTypeWarning, reason, err.Error())
	return err
}

func (l *loadBalancers) warnIgnoredHealthCheck(svc *corev1.Service) {
	for key := range svc.Annotations {
		if strings.HasPrefix(key, guestcloud.AnnotationServiceHealthCheckPrefix) {
			l.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonHealthCheckIgnored,
				"annotations %s* are ignored: Harvester health-checks only load balancers of VMs, not those of guest Services, "+
					"whose traffic kube-vip and kube-proxy send to ready endpoints only; use readiness probes",
				guestcloud.AnnotationServiceHealthCheckPrefix)
			return
		}
	}
}

// waitForSync waits, bounded, until the watches have listed what there is.
func (l *loadBalancers) waitForSync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	if !toolscache.WaitForCacheSync(ctx.Done(), l.servicesSynced) || !l.harvesterLBs.WaitForCacheSync(ctx) {
		return errors.New("the watches of guest Services and Harvester load balancers are not synced yet")
	}
	return nil
}
