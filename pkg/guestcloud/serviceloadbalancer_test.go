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

package guestcloud

import (
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestServiceLoadBalancerName(t *testing.T) {
	const uid = types.UID("6f1c2f8e-0d0a-4b8e-9a3e-2b7f5c1d9e00")
	long := strings.Repeat("x", 63)
	for _, tc := range []struct {
		name, cluster, namespace, service string
	}{
		{"short", "prod", "default", "web"},
		{"long service name", "prod", "default", long},
		{"long everything", long, long, long},
		{"cut at a separator", strings.Repeat("c", 50), "ns", "svc"},
		{"cluster ID with a dot", "capi-ns.my-cluster", "default", "web"},
		{"upper case and underscores", "My_Cluster", "default", "web"},
		{"starting with a digit", "1cluster", "default", "web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ServiceLoadBalancerName(tc.cluster, tc.namespace, tc.service, uid)
			g.Expect(len(got)).To(BeNumerically("<=", 63))
			g.Expect(validation.IsDNS1123Label(got)).To(BeEmpty())
			g.Expect(validation.IsDNS1035Label(got)).To(BeEmpty(), "Harvester names a Service after vm-type load balancers")
			g.Expect(ServiceLoadBalancerName(tc.cluster, tc.namespace, tc.service, uid)).To(Equal(got), "deterministic")
			g.Expect(ServiceLoadBalancerName(tc.cluster, tc.namespace, tc.service, "another-uid")).NotTo(Equal(got),
				"a re-created Service gets another load balancer")
		})
	}

	t.Run("as upstream names it", func(t *testing.T) {
		g := NewWithT(t)
		base := "prod-default-web-"
		g.Expect(ServiceLoadBalancerName("prod", "default", "web", uid)).To(Equal(
			fmt.Sprintf("%s%08x", base, crc32.ChecksumIEEE([]byte(base+string(uid))))))
		base = "prod-default-" + long + "-"
		g.Expect(ServiceLoadBalancerName("prod", "default", long, uid)).To(Equal(
			fmt.Sprintf("%s%08x", base[:55], crc32.ChecksumIEEE([]byte(base+string(uid))))))
	})

	t.Run("distinct for names that share the first 55 characters", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(ServiceLoadBalancerName("prod", "default", long+"a", uid)).NotTo(
			Equal(ServiceLoadBalancerName("prod", "default", long+"b", uid)))
	})
}

func TestLabelValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(LabelValue("capi-ns.my-cluster")).To(Equal("capi-ns.my-cluster"))
	for _, s := range []string{strings.Repeat("a", 80), "my cluster!", "-x-", "///", strings.Repeat("a", 52) + "---b"} {
		v := LabelValue(s)
		g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), "%q -> %q", s, v)
		g.Expect(LabelValue(s)).To(Equal(v))
	}
	g.Expect(LabelValue("my cluster!")).NotTo(Equal(LabelValue("my cluster?")))
}

func TestBuildServiceLoadBalancer(t *testing.T) {
	g := NewWithT(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u-1", Annotations: map[string]string{
			AnnotationServiceNetwork: "default/vlan10", AnnotationServiceProject: "c-1/p-1",
			AnnotationServiceNamespace: "tenant-b",
		}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053},
		}},
	}
	lb := BuildServiceLoadBalancer("guests", "ns.prod", svc, lbv1.Pool)
	g.Expect(lb.Namespace).To(Equal("guests"))
	g.Expect(lb.Name).To(Equal(ServiceLoadBalancerName("ns.prod", "shop", "web", "u-1")))
	g.Expect(lb.Labels).To(Equal(map[string]string{
		LabelLBCluster: "ns.prod", LabelLBServiceNamespace: "shop", LabelLBServiceName: "web",
	}))
	// A guest user's Service names neither the namespace nor the project Harvester selects a
	// pool by: another tenant's pool is not its to ask for.
	g.Expect(lb.Annotations).To(Equal(map[string]string{
		AnnotationLBCluster: "ns.prod", AnnotationLBNetwork: "default/vlan10",
	}))
	g.Expect(lb.Spec.WorkloadType).To(Equal(lbv1.Cluster))
	g.Expect(lb.Spec.HealthCheck).To(BeNil())
	g.Expect(lb.Spec.BackendServerSelector).To(Equal(map[string][]string{LabelHarvesterGuestCluster: {"ns.prod"}}))
	g.Expect(lb.Spec.Listeners).To(Equal([]lbv1.Listener{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, BackendPort: 30080},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, BackendPort: 30053},
	}))

	existing := lb.DeepCopy()
	existing.Annotations[AnnotationLBNamespace] = "guests" // Harvester's webhook
	existing.Status.AllocatedAddress.IP = "10.0.0.5"
	g.Expect(UpdateServiceLoadBalancer(existing, lb)).To(BeFalse())
	svc.Spec.Ports = svc.Spec.Ports[:1]
	g.Expect(UpdateServiceLoadBalancer(existing, BuildServiceLoadBalancer("guests", "ns.prod", svc, lbv1.Pool))).To(BeTrue())
	g.Expect(existing.Spec.Listeners).To(HaveLen(1))
	g.Expect(existing.Annotations).To(HaveKeyWithValue(AnnotationLBNamespace, "guests"))
	g.Expect(ServiceLoadBalancerAddress(existing)).To(Equal("10.0.0.5"))

	existing.Spec.IPAM = lbv1.DHCP
	existing.Status.AllocatedAddress.IP = AddressAskDHCP
	g.Expect(ServiceLoadBalancerAddress(existing)).To(Equal(AddressAskDHCP))
	g.Expect(ServiceLoadBalancerAddress(&lbv1.LoadBalancer{})).To(BeEmpty())
}

func TestServiceIPAM(t *testing.T) {
	g := NewWithT(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	g.Expect(ServiceIPAM(svc)).To(Equal(lbv1.Pool))
	svc.Annotations[AnnotationServiceIPAM] = "dhcp"
	g.Expect(ServiceIPAM(svc)).To(Equal(lbv1.DHCP))
	svc.Annotations[AnnotationServiceIPAM] = "static"
	_, err := ServiceIPAM(svc)
	g.Expect(err).To(MatchError(ContainSubstring(`"static"`)))
}

// TestServiceLoadBalancerNameAsUpstream is the table of load balancer names the upstream
// harvester-cloud-provider gives (pkg/cloud-controller-manager/loadbalancer.go): a cluster name
// that is no DNS-1035 label gets an `a` in front, then `<cluster>-<namespace>-<service>-`, cut
// to 55 characters, and 8 hex digits of the CRC-32 of the uncut base and the Service's UID. A
// guest switching from upstream must find its load balancers under these names.
func TestServiceLoadBalancerNameAsUpstream(t *testing.T) {
	const uid = "d4b50d98-39ec-4d88-8098-36579de5db4a"
	upstream := func(clusterPrefix, cluster, namespace, service string) string {
		base := clusterPrefix + cluster + "-" + namespace + "-" + service + "-"
		sum := fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(base+uid)))
		if len(base) > 55 {
			base = base[:55]
		}
		return base + sum
	}
	for _, tc := range []struct {
		name, cluster, namespace, service string
		// prefix is what upstream puts in front of the cluster name.
		prefix string
		// wantStart is the start of the name, from upstream's own test cases where there is one.
		wantStart string
	}{
		{name: "upstream case 1", cluster: "test", namespace: "default", service: "abcd", wantStart: "test-default-abcd-"},
		{name: "upstream case 2", cluster: "1test", namespace: "default", service: "abcd", prefix: "a", wantStart: "a1test-default-abcd-"},
		{name: "upstream case 3", cluster: "test", namespace: "default-default", service: "kube-system-rke2-ingress-nginx-controller",
			wantStart: "test-default-default-kube-system-rke2-ingress-nginx-con"},
		{name: "upstream case 4", cluster: "test", namespace: "default-default", service: "kube-system-rke2-ingress-nginx-co-abcd",
			wantStart: "test-default-default-kube-system-rke2-ingress-nginx-co-"},
		{name: "upstream case 5", cluster: "1test", namespace: "default-default", service: "kube-system-rke2-ingress-nginx-controller",
			prefix: "a", wantStart: "a1test-default-default-kube-system-rke2-ingress-nginx-c"},
		{name: "upstream's default cluster name", cluster: "kubernetes", namespace: "kube-system", service: "rke2-ingress-nginx-controller",
			wantStart: "kubernetes-kube-system-rke2-ingress-nginx-controller-"},
		{name: "cluster name ending with a dash", cluster: "edge-", namespace: "default", service: "web", prefix: "a", wantStart: "aedge--default-web-"},
		{name: "cluster name longer than a DNS label", cluster: strings.Repeat("c", 64), namespace: "default", service: "web", prefix: "a"},
		{name: "Rancher cluster ID", cluster: "c-m-7x2k9qpl", namespace: "default", service: "web", wantStart: "c-m-7x2k9qpl-default-web-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ServiceLoadBalancerName(tc.cluster, tc.namespace, tc.service, uid)
			g.Expect(got).To(Equal(upstream(tc.prefix, tc.cluster, tc.namespace, tc.service)))
			g.Expect(got).To(HavePrefix(tc.wantStart))
			g.Expect(validation.IsDNS1035Label(got)).To(BeEmpty())
		})
	}
}

// TestServiceLoadBalancerNameOfOurClusterIDs pins the names of load balancers for our own cluster
// IDs (`<namespace>.<name>`, which upstream cannot name load balancers after): they must never
// change, or existing load balancers would be orphaned.
func TestServiceLoadBalancerNameOfOurClusterIDs(t *testing.T) {
	g := NewWithT(t)
	const uid = types.UID("6f1c2f8e-0d0a-4b8e-9a3e-2b7f5c1d9e00")
	for cluster, want := range map[string]string{
		"capi-ns.my-cluster": "capi-ns-my-cluster-default-web-",
		"1ns.c":              "a1ns-c-default-web-",
		"Team.Prod":          "team-prod-default-web-",
	} {
		sum := crc32.ChecksumIEEE([]byte(want + string(uid)))
		g.Expect(ServiceLoadBalancerName(cluster, "default", "web", uid)).To(Equal(fmt.Sprintf("%s%08x", want, sum)), cluster)
	}
	// The IDs above are of the form naming.Guest.ID gives (TestGuestIDIsNamespaceDotName).
}

func TestPrimaryServiceLabelValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PrimaryServiceLabelValue("default", "web")).To(Equal("default.web"), "as upstream writes it")
	long := PrimaryServiceLabelValue(strings.Repeat("n", 63), strings.Repeat("s", 63))
	g.Expect(validation.IsValidLabelValue(long)).To(BeEmpty())
	g.Expect(long).NotTo(Equal(PrimaryServiceLabelValue(strings.Repeat("n", 63), strings.Repeat("s", 62)+"t")))
}

// Harvester's controller allocates a pool address before it puts its finalizer on the load
// balancer: only an address it guards may be deleted with the load balancer.
func TestPoolAddressUnguarded(t *testing.T) {
	g := NewWithT(t)
	lb := &lbv1.LoadBalancer{}
	g.Expect(PoolAddressUnguarded(lb)).To(BeFalse(), "no address yet: nothing to leak")
	lb.Status.AllocatedAddress = lbv1.AllocatedAddress{IPPool: "guests", IP: "10.0.0.10"}
	g.Expect(PoolAddressUnguarded(lb)).To(BeTrue(), "allocated, no finalizer yet")
	lb.Finalizers = []string{"someone-else", FinalizerHarvesterLBController}
	g.Expect(PoolAddressUnguarded(lb)).To(BeFalse(), "Harvester's controller releases it on delete")
	dhcp := &lbv1.LoadBalancer{Status: lbv1.LoadBalancerStatus{AllocatedAddress: lbv1.AllocatedAddress{IP: AddressAskDHCP}}}
	g.Expect(PoolAddressUnguarded(dhcp)).To(BeFalse(), "a DHCP address is not the pool's")
}

// A primary Service shares its address with its own namespace, and with another only when it
// lists it.
func TestSharingNeedsThePrimarysConsentAcrossNamespaces(t *testing.T) {
	primary := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	for _, c := range []struct {
		consent   string
		namespace string
		want      bool
	}{
		{"", "team-a", true},
		{"", "team-b", false},
		{"team-b", "team-b", true},
		{" team-c , team-b ", "team-b", true},
		{"team-bb,team", "team-b", false},
		{"*", "team-b", false},
	} {
		primary.Annotations = map[string]string{AnnotationServiceShareWithNamespaces: c.consent}
		if got := SharingAllowed(primary, c.namespace); got != c.want {
			t.Errorf("consent %q, namespace %s: %v, want %v", c.consent, c.namespace, got, c.want)
		}
	}
}
