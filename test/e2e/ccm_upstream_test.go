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

package e2e

import (
	"context"
	"fmt"
	"hash/crc32"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	harvestercloud "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// What the upstream harvester-cloud-provider (pkg/cloud-controller-manager, v0.2.x) leaves in a
// guest and on Harvester, spelled out here from its source rather than taken from our package, so
// that the test sees a difference between the two.
const (
	upstreamLabelCluster          = "cloudprovider.harvesterhci.io/cluster"
	upstreamLabelServiceNamespace = "cloudprovider.harvesterhci.io/serviceNamespace"
	upstreamLabelServiceName      = "cloudprovider.harvesterhci.io/serviceName"
	upstreamPrimaryService        = "cloudprovider.harvesterhci.io/primary-service" // annotation and label
	upstreamIPAM                  = "cloudprovider.harvesterhci.io/ipam"
	upstreamKubeVIP               = "kube-vip.io/loadbalancerIPs"
	upstreamLBAnnotationCluster   = "loadbalancer.harvesterhci.io/cluster"
	upstreamLBAnnotationNetwork   = "loadbalancer.harvesterhci.io/network"
	upstreamLBAnnotationProject   = "loadbalancer.harvesterhci.io/project"
	upstreamLBAnnotationNamespace = "loadbalancer.harvesterhci.io/namespace"
)

// upstreamLBName is upstream's loadBalancerName.
func upstreamLBName(cluster, namespace, name string, uid types.UID) string {
	if len(validation.IsDNS1035Label(cluster)) > 0 {
		cluster = "a" + cluster
	}
	base := cluster + "-" + namespace + "-" + name + "-"
	sum := crc32.ChecksumIEEE([]byte(base + string(uid)))
	if len(base) > 55 {
		base = base[:55]
	}
	return fmt.Sprintf("%s%08x", base, sum)
}

// upstreamLB is the load balancer upstream's constructLB creates for a primary Service.
func upstreamLB(namespace, cluster string, svc *corev1.Service) *lbv1.LoadBalancer {
	ipam := lbv1.Pool
	if v, ok := svc.Annotations[upstreamIPAM]; ok {
		ipam = lbv1.IPAM(v)
	}
	return &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      upstreamLBName(cluster, svc.Namespace, svc.Name, svc.UID),
			Labels: map[string]string{
				upstreamLabelCluster: cluster, upstreamLabelServiceNamespace: svc.Namespace, upstreamLabelServiceName: svc.Name,
			},
			Annotations: map[string]string{
				upstreamLBAnnotationNetwork: "", upstreamLBAnnotationProject: "", upstreamLBAnnotationNamespace: "",
				upstreamLBAnnotationCluster: cluster,
			},
		},
		Spec: lbv1.LoadBalancerSpec{IPAM: ipam, WorkloadType: lbv1.Cluster},
	}
}

// upstreamCredential makes a credential as upstream's deploy/generate_addon.sh makes it: a
// ServiceAccount of the guest's Harvester namespace (not one the provider made, whose load
// balancers an admission policy ties to its cluster ID) bound to harvesterhci.io:cloudprovider,
// here in that namespace only. It returns a token of it and what to delete.
func upstreamCredential(tc *testCluster) (string, []client.Object) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: "harvester-cloud-provider"}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: "harvester-cloud-provider"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "harvesterhci.io:cloudprovider"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, obj := range []client.Object{sa, binding} {
		Expect(harvesterClient().Create(ctx, obj)).To(Succeed())
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(harvesterClient().SubResource("token").Create(ctx, sa, request)).To(Succeed())
	return request.Status.Token, []client.Object{binding, sa}
}

var _ = Describe("cloud provider switching from the upstream Harvester CCM", Ordered, func() {
	var (
		tc         *testCluster
		guest      client.Client
		pool       = "ccmup-services"
		kubeconfig []byte // the guest's cloud-config
		token      string // of the upstream-style credential
		credential []client.Object
	)

	BeforeAll(func() {
		tc = newTestCluster("ccmup", "ccmup")
		guest = tc.Guest.Env.Client
		Eventually(func(g Gomega) { kubeconfig, _, _ = guestCredential(g, tc) }).Should(Succeed())
		token, credential = upstreamCredential(tc)
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: pool, Subnet: "10.40.0.0/16", RangeStart: "10.40.100.10", RangeEnd: "10.40.100.29", Namespace: tc.Target,
			Priority: testBed.Harvester.UniquePriority(),
		})).To(Succeed())
	})

	AfterAll(func() {
		for _, obj := range credential {
			Expect(client.IgnoreNotFound(harvesterClient().Delete(ctx, obj))).To(Succeed())
		}
		if tc != nil {
			Expect(client.IgnoreNotFound(harvesterClient().Delete(ctx, &lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: pool}}))).To(Succeed())
			deleteCluster(tc)
			leakFree(tc.Target)
		}
	})

	latest := func(g Gomega, svc *corev1.Service) *corev1.Service {
		out := &corev1.Service{}
		g.Expect(guest.Get(ctx, client.ObjectKeyFromObject(svc), out)).To(Succeed())
		return out
	}
	// asKubeVIP writes what kube-vip writes once it announces an address: the Service's status.
	asKubeVIP := func(svc *corev1.Service, ip string) {
		Eventually(func(g Gomega) {
			s := latest(g, svc)
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
			g.Expect(guest.Status().Update(ctx, s)).To(Succeed())
		}).Should(Succeed())
	}
	// asUpstream writes the kube-vip annotation and primary-service label upstream writes.
	asUpstream := func(svc *corev1.Service, ip, primaryLabel string) {
		Eventually(func(g Gomega) {
			s := latest(g, svc)
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[upstreamKubeVIP] = ip
			if primaryLabel != "" {
				s.Labels = map[string]string{upstreamPrimaryService: primaryLabel}
			}
			g.Expect(guest.Update(ctx, s)).To(Succeed())
		}).Should(Succeed())
		asKubeVIP(svc, ip)
	}
	// lbs are the load balancers of guest Services (not the control plane's), by name.
	lbs := func(g Gomega) map[string]types.UID {
		list := &lbv1.LoadBalancerList{}
		g.Expect(harvesterClient().List(ctx, list, client.InNamespace(tc.Target), client.HasLabels{upstreamLabelCluster})).To(Succeed())
		out := map[string]types.UID{}
		for _, lb := range list.Items {
			out[lb.Name] = lb.UID
		}
		return out
	}

	// Each entry is a guest cluster that ran upstream's CCM with a --cluster-name, left with a
	// pool Service, a DHCP Service and a Service sharing the pool Service's address; ours takes
	// over with the same --cluster-name.
	DescribeTable("adopts the load balancers and keeps their addresses",
		func(cluster, svcNamespace string, wantLBPrefix string) {
			Expect(client.IgnoreAlreadyExists(guest.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: svcNamespace}}))).To(Succeed())
			svc := func(name string, annotations map[string]string, ports ...corev1.ServicePort) *corev1.Service {
				if annotations == nil {
					annotations = map[string]string{}
				}
				s := lbService(name, annotations, ports...)
				s.Namespace = svcNamespace
				Expect(guest.Create(ctx, s)).To(Succeed())
				return s
			}
			web := svc("web-with-a-name-long-enough-to-be-cut", nil, tcp(80))
			lease := svc("lease", map[string]string{upstreamIPAM: "dhcp"}, tcp(53), udp(53))
			alt := svc("web-alt", map[string]string{upstreamPrimaryService: svcNamespace + "/" + web.Name}, tcp(8080))
			altLabel := svcNamespace + "." + web.Name

			By("leaving what upstream's CCM leaves")
			webLB := upstreamLB(tc.Target, cluster, web)
			Expect(webLB.Name).To(HavePrefix(wantLBPrefix))
			leaseLB := upstreamLB(tc.Target, cluster, lease)
			Expect(harvesterClient().Create(ctx, webLB)).To(Succeed())
			Expect(harvesterClient().Create(ctx, leaseLB)).To(Succeed())
			var ip string
			Eventually(func(g Gomega) {
				lb := &lbv1.LoadBalancer{}
				g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(webLB), lb)).To(Succeed())
				ip = lb.Status.AllocatedAddress.IP
				g.Expect(ip).To(HavePrefix("10.40.100."))
			}).Should(Succeed())
			asUpstream(web, ip, "")
			asUpstream(lease, "0.0.0.0", "")
			asKubeVIP(lease, "10.40.200.7") // kube-vip's DHCP lease
			asUpstream(alt, ip, altLabel)
			before := lbs(Default)
			Expect(before).To(HaveLen(2))

			By("starting ours with the same --cluster-name")
			cloud := cloudFromCredential(kubeconfig, token, harvestercloud.Options{ClusterName: cluster})
			lbCtx, stop := context.WithCancel(ctx)
			DeferCleanup(stop)
			Expect(cloud.StartLoadBalancers(lbCtx, ccmGuestClient(tc))).To(Succeed())
			balancer, ok := cloud.LoadBalancer()
			Expect(ok).To(BeTrue())
			ensure := func(s *corev1.Service) *corev1.LoadBalancerStatus {
				var status *corev1.LoadBalancerStatus
				Eventually(func(g Gomega) {
					var err error
					status, err = balancer.EnsureLoadBalancer(ctx, cluster, latest(g, s), nil)
					g.Expect(err).NotTo(HaveOccurred())
				}).Should(Succeed())
				return status
			}

			Expect(balancer.GetLoadBalancerName(ctx, cluster, web)).To(Equal(webLB.Name))
			Expect(ensure(web).Ingress).To(ConsistOf(HaveField("IP", ip)), "the pool address stays")
			Expect(ensure(lease).Ingress).To(ConsistOf(HaveField("IP", "10.40.200.7")), "kube-vip's lease stays")
			Expect(ensure(alt).Ingress).To(ConsistOf(HaveField("IP", ip)), "the shared address stays")
			Expect(lbs(Default)).To(Equal(before), "the same load balancers: none created, none re-created")
			adopted := &lbv1.LoadBalancer{}
			Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(webLB), adopted)).To(Succeed())
			Expect(adopted.Labels).To(Equal(webLB.Labels), "upstream's labels, which ours selects its load balancers by")
			Expect(adopted.Annotations).To(HaveKeyWithValue(upstreamLBAnnotationCluster, cluster))
			Expect(adopted.Status.AllocatedAddress.IP).To(Equal(ip))
			p := &lbv1.IPPool{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: pool}, p)).To(Succeed())
			Expect(p.Status.Allocated).To(HaveKeyWithValue(ip, tc.Target+"/"+webLB.Name))
			for _, s := range []*corev1.Service{web, alt} {
				Expect(latest(Default, s).Annotations).To(HaveKeyWithValue(upstreamKubeVIP, ip))
			}
			Expect(latest(Default, alt).Labels).To(HaveKeyWithValue(upstreamPrimaryService, altLabel))
			Expect(latest(Default, web).Labels).NotTo(HaveKey(upstreamPrimaryService))

			By("labelling a new secondary Service as upstream does")
			alt2 := svc("web-alt2", map[string]string{upstreamPrimaryService: svcNamespace + "/" + web.Name}, tcp(9090))
			Expect(ensure(alt2).Ingress).To(ConsistOf(HaveField("IP", ip)))
			Expect(latest(Default, alt2).Labels).To(HaveKeyWithValue(upstreamPrimaryService, altLabel))
			Expect(latest(Default, alt2).Annotations).To(HaveKeyWithValue(upstreamKubeVIP, ip))

			By("dropping the label from a secondary Service that becomes a primary")
			Eventually(func(g Gomega) {
				s := latest(g, alt2)
				delete(s.Annotations, upstreamPrimaryService)
				g.Expect(guest.Update(ctx, s)).To(Succeed())
			}).Should(Succeed())
			// Its own load balancer is new: the calls return without an address until Harvester
			// books one (the service controller calls again when the watch hands it over).
			var own *corev1.LoadBalancerStatus
			Eventually(func(g Gomega) {
				var err error
				own, err = balancer.EnsureLoadBalancer(ctx, cluster, latest(g, alt2), nil)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(own.Ingress).To(ConsistOf(HaveField("IP", Not(Equal(ip)))))
			}).Should(Succeed())
			Expect(latest(Default, alt2).Labels).NotTo(HaveKey(upstreamPrimaryService))
			Expect(latest(Default, alt2).Annotations).To(HaveKeyWithValue(upstreamKubeVIP, own.Ingress[0].IP))

			By("deleting the adopted load balancers with their Services")
			del := func(s *corev1.Service) {
				Eventually(func() error { return balancer.EnsureLoadBalancerDeleted(ctx, cluster, latest(Default, s)) }).Should(Succeed())
				Expect(guest.Delete(ctx, s)).To(Succeed())
			}
			Expect(balancer.EnsureLoadBalancerDeleted(ctx, cluster, latest(Default, web))).To(MatchError(ContainSubstring("web-alt")),
				"a primary keeps its address while a secondary shares it")
			for _, s := range []*corev1.Service{alt, alt2, lease, web} {
				del(s)
			}
			Eventually(func(g Gomega) {
				g.Expect(lbs(g)).To(BeEmpty())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: pool}, p)).To(Succeed())
				g.Expect(p.Status.Allocated).To(BeEmpty())
			}).Should(Succeed())
		},
		Entry("--cluster-name=kubernetes, upstream's default", "kubernetes", "shop",
			"kubernetes-shop-web-with-a-name-long-enough-to-be-cut-"),
		Entry("a cluster name upstream prefixes with a", "1edge", "default",
			"a1edge-default-web-with-a-name-long-enough-to-be-cut-"),
		Entry("a Rancher cluster ID cut at 55 characters", "c-m-7x2k9qpl", "kube-system",
			"c-m-7x2k9qpl-kube-system-web-with-a-name-long-enough-to"),
	)
})
