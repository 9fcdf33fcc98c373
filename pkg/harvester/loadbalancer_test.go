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
	"testing"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// readerCache serves a fake client's reads as the connection's cache (no informers).
type readerCache struct {
	client.Client
	cache.Informers
}

// Whether an endpoint in the spec is the user's or the provider's is decided by what the
// provider recorded, not by the endpoint: a load balancer the provider made that is deleted on
// Harvester is made again (Harvester gives the same name its former address back while it is
// free), and one that comes back with another address does not serve the endpoint.
func TestControlPlaneLoadBalancerOwnershipIsRecorded(t *testing.T) {
	g := NewWithT(t)
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	guest := naming.Guest{Namespace: "ns", Name: "prod", Mark: "0123456789"}
	cluster := func(annotations map[string]string) *infrav1.HarvesterCluster {
		return &infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod", Annotations: annotations},
			Spec: infrav1.HarvesterClusterSpec{TargetNamespace: "tenant", LoadBalancer: infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMPool},
				ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.7", Port: 6443}},
		}
	}
	ensure := func(c client.Client, hc *infrav1.HarvesterCluster) LoadBalancerState {
		svc := &LoadBalancerService{C: &transport.Client{Client: c, Cache: readerCache{Client: c}}}
		st, err := svc.EnsureControlPlane(context.Background(), hc, guest, "KubeadmControlPlane", time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		return st
	}
	key := client.ObjectKey{Namespace: "tenant", Name: guest.LoadBalancerName()}

	// The user's endpoint: nothing recorded, nothing made.
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	st := ensure(c, cluster(nil))
	g.Expect(st.Reason).To(Equal(infrav1.UserProvidedEndpointReason))
	g.Expect(st.Ready).To(BeTrue())
	g.Expect(apierrors.IsNotFound(c.Get(context.Background(), key, &lbv1.LoadBalancer{}))).To(BeTrue())

	// The provider's, gone from Harvester: made again, not ready.
	for _, hc := range []*infrav1.HarvesterCluster{
		cluster(map[string]string{infrav1.LoadBalancerAnnotation: guest.LoadBalancerName()}),
		func() *infrav1.HarvesterCluster { // recorded by a version before the annotation
			hc := cluster(nil)
			hc.Status.LoadBalancer = infrav1.LoadBalancerStatus{Name: guest.LoadBalancerName(), Address: "10.0.0.7"}
			return hc
		}(),
	} {
		c = fake.NewClientBuilder().WithScheme(scheme).Build()
		st = ensure(c, hc)
		g.Expect(st.Ready).To(BeFalse())
		g.Expect(st.Created).To(BeTrue())
		g.Expect(st.Recreated).To(BeTrue())
		g.Expect(st.Reason).To(Equal(infrav1.LoadBalancerRecreatedReason))
		g.Expect(st.Message).To(ContainSubstring("10.0.0.7"))
		g.Expect(c.Get(context.Background(), key, &lbv1.LoadBalancer{})).To(Succeed())
	}

	// Back with its address: ready. With another: not, and the message says why.
	recorded := cluster(map[string]string{infrav1.LoadBalancerAnnotation: guest.LoadBalancerName()})
	for address, ready := range map[string]bool{"10.0.0.7": true, "10.0.0.9": false} {
		lb := BuildControlPlaneLoadBalancer(recorded, guest, "KubeadmControlPlane")
		lb.Status.Address = address
		c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(lb).Build()
		st = ensure(c, recorded)
		g.Expect(st.Ready).To(Equal(ready), address)
		g.Expect(st.Address).To(Equal(address))
		if !ready {
			g.Expect(st.Reason).To(Equal(infrav1.EndpointMismatchReason))
			g.Expect(st.Message).To(And(ContainSubstring("10.0.0.9"), ContainSubstring("10.0.0.7")))
		}
	}
}

// What Harvester's own load-balancer controller (harvester-load-balancer v1.5.0) writes on a
// load balancer without an address: the passing states wait (a DHCP one, with patience), the
// others say what Harvester reports.
func TestControlPlaneLoadBalancerReadsHarvesterControllersMessages(t *testing.T) {
	g := NewWithT(t)
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	guest := naming.Guest{Namespace: "ns", Name: "prod", Mark: "0123456789"}
	now := time.Now()
	for _, tc := range []struct {
		message     string
		dhcp        bool
		age         time.Duration
		wantReason  string
		wantMessage string
	}{
		{"service is waiting for external IP", false, time.Minute, infrav1.WaitingForAddressReason, "waiting for Harvester to allocate an address"},
		{"service is waiting for external IP", true, time.Minute, infrav1.WaitingForAddressReason, "waiting for a DHCP lease"},
		{"service is waiting for external IP", true, 3 * time.Minute, infrav1.WaitingForAddressReason, "no DHCP lease after 3m"},
		{"service is not existing, ensure it first", false, time.Minute, infrav1.WaitingForAddressReason, "waiting for Harvester to allocate an address"},
		{"no running backend servers", false, time.Minute, infrav1.WaitingForAddressReason, "waiting for Harvester to allocate an address"},
		{"running backend servers are not probed as healthy total:1, healthy:0", false, time.Minute, infrav1.WaitingForAddressReason, "waiting for Harvester"},
		{"no matched IPPool with requirement &{Network: Project:default Namespace:tenant Cluster:}", false, time.Minute, infrav1.LoadBalancerFailedReason, "Harvester reports: no matched IPPool"},
		{"no IP addresses available in range set: 10.0.0.10-10.0.0.11", false, time.Minute, infrav1.IPPoolExhaustedReason, "exhausted"},
	} {
		hc := &infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
			Spec:       infrav1.HarvesterClusterSpec{TargetNamespace: "tenant", LoadBalancer: infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMPool}},
		}
		if tc.dhcp {
			hc.Spec.LoadBalancer.IPAM = infrav1.IPAMDHCP
		}
		lb := BuildControlPlaneLoadBalancer(hc, guest, "KubeadmControlPlane")
		lb.CreationTimestamp = metav1.NewTime(now.Add(-tc.age))
		lb.Status.Conditions = []lbv1.Condition{{Type: lbv1.LoadBalancerReady, Status: "False", Message: tc.message}}
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(lb).Build()
		svc := &LoadBalancerService{C: &transport.Client{Client: c, Cache: readerCache{Client: c}}}
		st, err := svc.EnsureControlPlane(context.Background(), hc, guest, "KubeadmControlPlane", now)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Ready).To(BeFalse(), tc.message)
		g.Expect(st.Reason).To(Equal(tc.wantReason), tc.message)
		g.Expect(st.Message).To(ContainSubstring(tc.wantMessage), tc.message)
	}
}

// Cluster API's RKE2 provider registers joining nodes at https://<control-plane endpoint>:9345,
// and Harvester's load balancer forwards only its listeners' ports: an RKE2 cluster's control-plane
// load balancer listens there too, and only an RKE2 cluster's does.
func TestControlPlaneLoadBalancerServesRKE2Registration(t *testing.T) {
	g := NewWithT(t)
	hc := &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
		Spec: infrav1.HarvesterClusterSpec{TargetNamespace: "guests"}}
	guest := naming.Guest{Namespace: "default", Name: "prod", Mark: "0123456789"}
	ports := func(kind string) []int32 {
		var out []int32
		for _, l := range BuildControlPlaneLoadBalancer(hc, guest, kind).Spec.Listeners {
			out = append(out, l.Port)
		}
		return out
	}
	g.Expect(ports(ControlPlaneKindRKE2)).To(ConsistOf(int32(APIServerPort), int32(RKE2SupervisorPort)))
	for _, kind := range []string{"KubeadmControlPlane", "KThreesControlPlane", ""} {
		g.Expect(ports(kind)).To(ConsistOf(int32(APIServerPort)), kind)
	}
	lb := BuildControlPlaneLoadBalancer(hc, guest, ControlPlaneKindRKE2)
	g.Expect(lb.Spec.HealthCheck.Port).To(Equal(uint(APIServerPort)), "the health check stays on the API server")
}

// With a HarvesterClusterIdentity the control-plane load balancer's references are confined as
// a machine's are: its network to the target and shared namespaces, its IP pool to one whose
// owner scoped it to the target namespace (or the global pool), because Harvester allocates from
// a pool a load balancer names without reading the pool's scope. Nothing is made when refused,
// and a pool that does not exist reads as one that is not the tenant's. A Secret identity is the
// tenant's own credential: its RBAC decides.
func TestControlPlaneLoadBalancerReferencesStayInTheTenantsScope(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	guest := naming.Guest{Namespace: "ns", Name: "prod", Mark: "0123456789abcdef"}
	pools := []client.Object{
		&lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "tenant-only"}, Spec: lbv1.IPPoolSpec{Selector: lbv1.Selector{Scope: []lbv1.Tuple{{Project: "p-1", Namespace: "tenant"}}}}},
		&lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "everyone"}, Spec: lbv1.IPPoolSpec{Selector: lbv1.Selector{Scope: []lbv1.Tuple{{Project: "*", Namespace: "*", GuestCluster: "*"}}}}},
		&lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "global", Labels: map[string]string{LabelGlobalIPPool: "true"}}},
		&lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "other-tenant"}, Spec: lbv1.IPPoolSpec{Selector: lbv1.Selector{Scope: []lbv1.Tuple{{Namespace: "tenant-b"}}}}},
		&lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "one-project"}, Spec: lbv1.IPPoolSpec{Selector: lbv1.Selector{Scope: []lbv1.Tuple{{Project: "p-1", Namespace: "*"}}}}},
		&lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "another-guest"}, Spec: lbv1.IPPoolSpec{Selector: lbv1.Selector{Scope: []lbv1.Tuple{{Namespace: "tenant", GuestCluster: "ns.other-0123456789abcdef"}}}}},
	}
	ensure := func(shared []string, lb infrav1.LoadBalancerSpec) (LoadBalancerState, bool, error) {
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pools...).Build()
		hc := &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
			Spec: infrav1.HarvesterClusterSpec{TargetNamespace: "tenant", LoadBalancer: lb}}
		svc := &LoadBalancerService{C: &transport.Client{Client: c, Cache: readerCache{Client: c}}, SharedNamespaces: shared}
		st, err := svc.EnsureControlPlane(ctx, hc, guest, "KubeadmControlPlane", time.Now())
		made := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: guest.LoadBalancerName()}, &lbv1.LoadBalancer{}) == nil
		return st, made, err
	}
	refused := func(shared []string, lb infrav1.LoadBalancerSpec) string {
		_, made, err := ensure(shared, lb)
		g.Expect(made).To(BeFalse(), "%+v", lb)
		e, ok := transport.AsError(err)
		g.Expect(ok).To(BeTrue(), "%+v: %v", lb, err)
		g.Expect(e.Reason).To(Equal(infrav1.ReferenceNotAllowedReason))
		return e.Message
	}
	identity := []string{"public"}
	for _, name := range []string{"other-tenant", "one-project", "another-guest", "no-such-pool"} {
		msg := refused(identity, infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMPool, IPPoolName: name})
		g.Expect(msg).To(ContainSubstring("does not exist or its scope"), name)
	}
	g.Expect(refused(identity, infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMPool, Network: "tenant-b/vlan20"})).To(ContainSubstring("tenant-b/vlan20"))

	for _, lb := range []infrav1.LoadBalancerSpec{
		{IPAM: infrav1.IPAMPool, IPPoolName: "tenant-only"},
		{IPAM: infrav1.IPAMPool, IPPoolName: "everyone"},
		{IPAM: infrav1.IPAMPool, IPPoolName: "global"},
		{IPAM: infrav1.IPAMPool, Network: "public/vlan10"},
		{IPAM: infrav1.IPAMPool, Network: "tenant/vlan10"},
		{IPAM: infrav1.IPAMPool},
	} {
		_, made, err := ensure(identity, lb)
		g.Expect(err).NotTo(HaveOccurred(), "%+v", lb)
		g.Expect(made).To(BeTrue(), "%+v", lb)
	}
	// A pool scoped to this guest cluster by its ID is its own.
	g.Expect(PoolAdmits(&lbv1.IPPool{Spec: lbv1.IPPoolSpec{Selector: lbv1.Selector{Scope: []lbv1.Tuple{{Namespace: "tenant", GuestCluster: guest.ID()}}}}}, "tenant", guest.ID())).To(BeTrue())

	// A Secret identity: its own RBAC decides.
	_, made, err := ensure(nil, infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMPool, IPPoolName: "other-tenant", Network: "tenant-b/vlan20"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(made).To(BeTrue())
}

// A recorded name other than the guest's (a load balancer another provider made, which a
// take-over recorded and labelled as the guest's) is the cluster's load balancer: it is read,
// kept as it is and deleted with the cluster; under that name, one without the guest's labels
// is another's and is neither used nor deleted.
func TestControlPlaneLoadBalancerUnderARecordedName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	guest := naming.Guest{Namespace: "ns", Name: "prod", Mark: "0123456789abcdef"}
	hc := &infrav1.HarvesterCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod", Annotations: map[string]string{infrav1.LoadBalancerAnnotation: "ns-prod-lb"}},
		Spec: infrav1.HarvesterClusterSpec{TargetNamespace: "tenant", LoadBalancer: infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMDHCP},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.7", Port: 6443}},
	}
	g.Expect(ControlPlaneLoadBalancerName(hc, guest)).To(Equal("ns-prod-lb"))
	g.Expect(ControlPlaneLoadBalancerName(&infrav1.HarvesterCluster{}, guest)).To(Equal(guest.LoadBalancerName()))

	made := func(labels map[string]string) *lbv1.LoadBalancer {
		return &lbv1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "ns-prod-lb", Labels: labels},
			Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.VM, IPAM: lbv1.DHCP,
				BackendServerSelector: map[string][]string{"harvestercluster/machinetype": {"controlplane-prod"}}},
			Status: lbv1.LoadBalancerStatus{Address: "10.0.0.7"},
		}
	}
	service := func(c client.Client) *LoadBalancerService {
		return &LoadBalancerService{C: &transport.Client{Client: c, Cache: readerCache{Client: c}}}
	}

	adopted := fake.NewClientBuilder().WithScheme(scheme).WithObjects(made(guest.Labels())).Build()
	st, err := service(adopted).EnsureControlPlane(ctx, hc, guest, "RKE2ControlPlane", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Ready).To(BeTrue())
	g.Expect(st.Name).To(Equal("ns-prod-lb"))
	g.Expect(st.Created).To(BeFalse())
	lbs := &lbv1.LoadBalancerList{}
	g.Expect(adopted.List(ctx, lbs)).To(Succeed())
	g.Expect(lbs.Items).To(HaveLen(1), "no load balancer is made under the guest's own name")
	g.Expect(lbs.Items[0].Spec.BackendServerSelector).To(HaveKey("harvestercluster/machinetype"), "the recorded one is kept as it is")
	_, deleted, err := service(adopted).DeleteControlPlane(ctx, hc, guest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted).To(BeTrue())
	g.Expect(apierrors.IsNotFound(adopted.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "ns-prod-lb"}, &lbv1.LoadBalancer{}))).To(BeTrue())

	foreign := fake.NewClientBuilder().WithScheme(scheme).WithObjects(made(nil)).Build()
	_, err = service(foreign).EnsureControlPlane(ctx, hc, guest, "RKE2ControlPlane", time.Now())
	e, ok := transport.AsError(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(e.Reason).To(Equal(infrav1.NameTakenReason))
	gone, deleted, err := service(foreign).DeleteControlPlane(ctx, hc, guest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeTrue())
	g.Expect(deleted).To(BeFalse())
	g.Expect(foreign.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "ns-prod-lb"}, &lbv1.LoadBalancer{})).To(Succeed(), "another's load balancer stays")
}
