package harvestersim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The load balancer controller's vocabulary (harvester-load-balancer pkg/utils/const.go and
// pkg/controller/loadbalancer/controller.go).
const (
	AnnotationLBNetwork   = "loadbalancer.harvesterhci.io/network"
	AnnotationLBProject   = "loadbalancer.harvesterhci.io/project"
	AnnotationLBNamespace = "loadbalancer.harvesterhci.io/namespace"
	AnnotationLBCluster   = "loadbalancer.harvesterhci.io/cluster"

	// AddressAskDHCP is the allocated address of a dhcp load balancer whose address is leased
	// by someone else (kube-vip in the guest for workloadType cluster).
	AddressAskDHCP = "0.0.0.0"

	lbFinalizer = "wrangler.cattle.io/harvester-lb-controller"

	msgNoMatchedPool     = "no matched IPPool"
	msgNoRunningBackends = "no running backend servers"
)

// lbReconciler plays Harvester's load balancer controller: an address per LoadBalancer from the
// matching IPPool (sticky through the pool's allocatedHistory) or from DHCP, the backend servers
// of vm-type load balancers, and the release of the address on delete.
type lbReconciler struct {
	client.Client
	h *Harvester
}

func (r *lbReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-loadbalancer").
		For(&lbv1.LoadBalancer{}).
		// A pool that appears or frees an address may serve a waiting load balancer.
		Watches(&lbv1.IPPool{}, handler.EnqueueRequestsFromMapFunc(r.allLoadBalancers)).
		// A VMI that starts or stops changes the backend servers.
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.loadBalancersSelecting)).
		Complete(r)
}

func (r *lbReconciler) allLoadBalancers(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.list(ctx)
}

// loadBalancersSelecting maps a VMI to the load balancers of its namespace whose backend
// selector matches it (an update maps both the old and the new VMI), not to all of them: with a
// thousand VMIs and fifty load balancers in one namespace, reconciling every load balancer on
// every VMI change was the bench process's largest simulator cost.
func (r *lbReconciler) loadBalancersSelecting(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &lbv1.LoadBalancerList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		selector, err := backendSelector(&list.Items[i])
		if err != nil || selector.Matches(labels.Set(obj.GetLabels())) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// backendSelector is a load balancer's backendServerSelector as a label selector.
func backendSelector(lb *lbv1.LoadBalancer) (labels.Selector, error) {
	selector := labels.NewSelector()
	for key, values := range lb.Spec.BackendServerSelector {
		req, err := labels.NewRequirement(key, "in", values)
		if err != nil {
			return nil, err
		}
		selector = selector.Add(*req)
	}
	return selector, nil
}

func (r *lbReconciler) list(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	return requestsFor(ctx, r.Client, &lbv1.LoadBalancerList{}, opts...)
}

func (r *lbReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lb := &lbv1.LoadBalancer{}
	if err := r.Get(ctx, req.NamespacedName, lb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lb.DeletionTimestamp != nil {
		return ctrl.Result{}, r.delete(ctx, lb)
	}
	if controllerutil.AddFinalizer(lb, lbFinalizer) {
		if err := r.Update(ctx, lb); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := lb.Status.DeepCopy()
	problem, err := r.ensureAddress(ctx, lb)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem == "" && lb.Spec.WorkloadType != lbv1.Cluster {
		if problem, err = r.ensureBackends(ctx, lb); err != nil {
			return ctrl.Result{}, err
		}
	}
	setLBReady(lb, problem)
	if equalJSON(before, &lb.Status) {
		return ctrl.Result{}, nil
	}
	// LoadBalancers have no status subresource: the controller updates the whole object.
	return ctrl.Result{}, r.Update(ctx, lb)
}

// ensureAddress allocates the load balancer's address; a problem is reported in its Ready
// condition (harvester-load-balancer ensureAllocatedAddress{Pool,DHCP}).
func (r *lbReconciler) ensureAddress(ctx context.Context, lb *lbv1.LoadBalancer) (string, error) {
	key := lb.Namespace + "/" + lb.Name
	if lb.Spec.IPAM == lbv1.DHCP {
		lb.Status.AllocatedAddress = lbv1.AllocatedAddress{IP: AddressAskDHCP}
		if lb.Spec.WorkloadType != lbv1.Cluster {
			// Harvester's own kube-vip leases the address of a vm-type load balancer.
			addr, err := r.h.ips.leaseDHCP(key)
			if err != nil {
				return err.Error(), nil
			}
			lb.Status.Address = addr.String()
		}
		return "", nil
	}
	if lb.Spec.IPPool != "" && lb.Status.AllocatedAddress.IPPool != "" && lb.Status.AllocatedAddress.IPPool != lb.Spec.IPPool {
		if err := r.release(ctx, lb.Status.AllocatedAddress.IPPool, key); err != nil {
			return "", err
		}
		lb.Status.AllocatedAddress = lbv1.AllocatedAddress{}
	}
	if lb.Status.AllocatedAddress.IPPool == "" {
		poolName := lb.Spec.IPPool
		if poolName == "" {
			pool, err := r.selectPool(ctx, lb)
			if err != nil {
				return "", err
			}
			if pool == nil {
				return msgNoMatchedPool, nil
			}
			poolName = pool.Name
		}
		addr, err := r.allocate(ctx, poolName, key)
		if err != nil {
			var full *poolFullError
			if errors.As(err, &full) {
				return full.Error(), nil
			}
			return "", err
		}
		lb.Status.AllocatedAddress = *addr
	}
	if lb.Spec.WorkloadType != lbv1.Cluster {
		lb.Status.Address = lb.Status.AllocatedAddress.IP
	}
	return "", nil
}

// selectPool picks the pool for a load balancer without spec.ipPool: the highest-priority pool
// whose selector matches its network, project, namespace and cluster, else the global pool
// (harvester-load-balancer pkg/ipam/selector.go).
func (r *lbReconciler) selectPool(ctx context.Context, lb *lbv1.LoadBalancer) (*lbv1.IPPool, error) {
	pools := &lbv1.IPPoolList{}
	if err := r.List(ctx, pools); err != nil {
		return nil, err
	}
	slices.SortFunc(pools.Items, func(a, b lbv1.IPPool) int { return cmp.Compare(a.Name, b.Name) })
	req := lbv1.Tuple{
		Project:      lb.Annotations[AnnotationLBProject],
		Namespace:    lb.Annotations[AnnotationLBNamespace],
		GuestCluster: lb.Annotations[AnnotationLBCluster],
	}
	if req.Namespace == "" {
		req.Namespace = lb.Namespace
	}
	network := lb.Annotations[AnnotationLBNetwork]
	var selected, global *lbv1.IPPool
	for i := range pools.Items {
		p := &pools.Items[i]
		if p.Labels[LabelGlobalIPPool] == "true" {
			global = p
			continue
		}
		if p.Spec.Selector.Network != network {
			continue
		}
		for _, t := range p.Spec.Selector.Scope {
			if matchScope(t, req) && (selected == nil || p.Spec.Selector.Priority >= selected.Spec.Selector.Priority) {
				selected = p
				break
			}
		}
	}
	if selected != nil {
		return selected, nil
	}
	return global, nil
}

func matchScope(t, r lbv1.Tuple) bool {
	match := func(a, b string) bool { return a == "*" || b == "*" || a == b }
	return match(t.Project, r.Project) && match(t.Namespace, r.Namespace) && match(t.GuestCluster, r.GuestCluster)
}

type poolFullError struct{ ranges string }

// The message host-local IPAM gives, which Harvester shows on the load balancer.
func (e *poolFullError) Error() string { return "no IP addresses available in range set: " + e.ranges }

// allocate books an address of the pool for applicant: the one it had before if the pool's
// history remembers it and it is free, else the next free one after the last allocated.
func (r *lbReconciler) allocate(ctx context.Context, poolName, applicant string) (*lbv1.AllocatedAddress, error) {
	pool := &lbv1.IPPool{}
	if err := r.Get(ctx, client.ObjectKey{Name: poolName}, pool); err != nil {
		return nil, fmt.Errorf("reading IPPool %s: %w", poolName, err)
	}
	for ip, who := range pool.Status.Allocated {
		if who == applicant { // booked before the load balancer recorded it
			return addressOf(pool, ip)
		}
	}
	candidates := poolAddresses(pool)
	chosen := ""
	for ip, who := range pool.Status.AllocatedHistory {
		if who == applicant && pool.Status.Allocated[ip] == "" && slices.Contains(candidates, ip) {
			chosen = ip
		}
	}
	if chosen == "" {
		start := 0
		if i := slices.Index(candidates, pool.Status.LastAllocated); i >= 0 {
			start = i + 1
		}
		for n := range candidates {
			ip := candidates[(start+n)%len(candidates)]
			if _, taken := pool.Status.Allocated[ip]; !taken {
				chosen = ip
				break
			}
		}
	}
	if chosen == "" {
		return nil, &poolFullError{ranges: rangesString(pool)}
	}
	if pool.Status.Allocated == nil {
		pool.Status.Allocated = map[string]string{}
	}
	pool.Status.Allocated[chosen] = applicant
	delete(pool.Status.AllocatedHistory, chosen)
	pool.Status.LastAllocated = chosen
	pool.Status.Total = int64(len(candidates))
	pool.Status.Available = pool.Status.Total - int64(len(pool.Status.Allocated))
	if err := r.Update(ctx, pool); err != nil {
		return nil, fmt.Errorf("booking %s in IPPool %s: %w", chosen, poolName, err)
	}
	return addressOf(pool, chosen)
}

// release returns applicant's address to the pool and remembers it in the history.
func (r *lbReconciler) release(ctx context.Context, poolName, applicant string) error {
	pool := &lbv1.IPPool{}
	if err := r.Get(ctx, client.ObjectKey{Name: poolName}, pool); err != nil {
		return client.IgnoreNotFound(err)
	}
	changed := false
	for ip, who := range pool.Status.Allocated {
		if who == applicant {
			if pool.Status.AllocatedHistory == nil {
				pool.Status.AllocatedHistory = map[string]string{}
			}
			pool.Status.AllocatedHistory[ip] = applicant
			delete(pool.Status.Allocated, ip)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	pool.Status.Available = pool.Status.Total - int64(len(pool.Status.Allocated))
	return r.Update(ctx, pool)
}

func (r *lbReconciler) delete(ctx context.Context, lb *lbv1.LoadBalancer) error {
	key := lb.Namespace + "/" + lb.Name
	if lb.Status.AllocatedAddress.IPPool != "" {
		if err := r.release(ctx, lb.Status.AllocatedAddress.IPPool, key); err != nil {
			return err
		}
	}
	r.h.ips.release(key)
	if controllerutil.RemoveFinalizer(lb, lbFinalizer) {
		return r.Update(ctx, lb)
	}
	return nil
}

// ensureBackends lists the running VMIs the selector matches, as the vm-type implementation
// does; none makes the load balancer not ready (the address stays).
func (r *lbReconciler) ensureBackends(ctx context.Context, lb *lbv1.LoadBalancer) (string, error) {
	selector, err := backendSelector(lb)
	if err != nil {
		return "invalid backendServerSelector: " + err.Error(), nil
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := r.List(ctx, vmis, client.InNamespace(lb.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return "", err
	}
	var servers []string
	for _, vmi := range vmis.Items {
		if vmi.DeletionTimestamp != nil || vmi.Status.Phase != kubevirtv1.Running {
			continue
		}
		// As harvester-load-balancer's servicelb does: the first IPv4 of the VMI's interface
		// list, whichever interface reports it.
		for _, iface := range vmi.Status.Interfaces {
			if ip := net.ParseIP(iface.IP); ip.To4() != nil {
				servers = append(servers, iface.IP)
				break
			}
		}
	}
	slices.Sort(servers)
	lb.Status.BackendServers = servers
	if len(servers) == 0 {
		return msgNoRunningBackends, nil
	}
	return "", nil
}

func setLBReady(lb *lbv1.LoadBalancer, problem string) {
	status := corev1.ConditionTrue
	if problem != "" {
		status = corev1.ConditionFalse
	}
	now := time.Now().UTC().Format(time.RFC3339)
	for i := range lb.Status.Conditions {
		c := &lb.Status.Conditions[i]
		if c.Type == lbv1.LoadBalancerReady {
			if c.Status != status || c.Message != problem {
				c.LastUpdateTime = now
			}
			if c.Status != status {
				c.LastTransitionTime = now
			}
			c.Status, c.Message = status, problem
			return
		}
	}
	lb.Status.Conditions = append(lb.Status.Conditions, lbv1.Condition{
		Type: lbv1.LoadBalancerReady, Status: status, Message: problem, LastUpdateTime: now, LastTransitionTime: now,
	})
}

// poolAddresses lists a pool's assignable addresses in order: each range from rangeStart (or the
// subnet's first host) to rangeEnd (or its last host), without the network, broadcast and
// gateway addresses.
func poolAddresses(pool *lbv1.IPPool) []string {
	var out []string
	for _, rg := range pool.Spec.Ranges {
		prefix, err := netip.ParsePrefix(rg.Subnet)
		if err != nil {
			continue
		}
		prefix = prefix.Masked()
		first, last := prefix.Addr().Next(), lastAddr(prefix)
		if a, err := netip.ParseAddr(rg.RangeStart); err == nil {
			first = a
		}
		if a, err := netip.ParseAddr(rg.RangeEnd); err == nil {
			last = a
		} else if last.Is4() {
			last = last.Prev() // broadcast
		}
		for a := first; a.IsValid() && a.Compare(last) <= 0 && prefix.Contains(a); a = a.Next() {
			if a.String() != rg.Gateway {
				out = append(out, a.String())
			}
		}
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	bits := p.Addr().BitLen()
	b := p.Addr().AsSlice()
	n := new(big.Int).SetBytes(b)
	host := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits-p.Bits())), big.NewInt(1))
	n.Or(n, host)
	out := n.FillBytes(make([]byte, len(b)))
	a, _ := netip.AddrFromSlice(out)
	return a
}

func addressOf(pool *lbv1.IPPool, ip string) (*lbv1.AllocatedAddress, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, err
	}
	for _, rg := range pool.Spec.Ranges {
		prefix, err := netip.ParsePrefix(rg.Subnet)
		if err != nil || !prefix.Contains(addr) {
			continue
		}
		mask := net.IP(net.CIDRMask(prefix.Bits(), addr.BitLen())).String()
		return &lbv1.AllocatedAddress{IPPool: pool.Name, IP: ip, Mask: mask, Gateway: rg.Gateway}, nil
	}
	return &lbv1.AllocatedAddress{IPPool: pool.Name, IP: ip}, nil
}

func rangesString(pool *lbv1.IPPool) string {
	s := ""
	for i, rg := range pool.Spec.Ranges {
		if i > 0 {
			s += ","
		}
		s += rg.RangeStart + "-" + rg.RangeEnd
	}
	return s
}

// ipPoolReconciler keeps a pool's total and available counts, as Harvester's pool controller does.
type ipPoolReconciler struct {
	client.Client
}

func (r *ipPoolReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).WithOptions(controllerOptions).Named("sim-ippool").For(&lbv1.IPPool{}).Complete(r)
}

func (r *ipPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &lbv1.IPPool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	total := int64(len(poolAddresses(pool)))
	available := total - int64(len(pool.Status.Allocated))
	if pool.Status.Total == total && pool.Status.Available == available {
		return ctrl.Result{}, nil
	}
	pool.Status.Total, pool.Status.Available = total, available
	return ctrl.Result{}, r.Update(ctx, pool)
}
