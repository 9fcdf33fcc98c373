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
	"strconv"
	"strings"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	harvestercloud "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates/addons"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// ccmGuestClient installs the CCM's ServiceAccount and guest RBAC from templates/addons/ccm.yaml
// into the guest and returns a client with that ServiceAccount's token: what the CCM does in the
// guest is checked against the rights the addon grants it.
func ccmGuestClient(tc *testCluster) kubernetes.Interface {
	manifest, err := addons.Render(addons.CCM, map[string]string{"CLUSTER_NAME": tc.Name, "CCM_IMAGE": "ccm:test"})
	Expect(err).NotTo(HaveOccurred())
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			break
		}
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
			Expect(client.IgnoreAlreadyExists(tc.Guest.Env.Client.Create(ctx, obj))).To(Succeed())
		}
	}
	admin, err := kubernetes.NewForConfig(tc.Guest.Env.Config)
	Expect(err).NotTo(HaveOccurred())
	token, err := admin.CoreV1().ServiceAccounts(metav1.NamespaceSystem).CreateToken(ctx, "harvester-cloud-controller-manager",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	cfg := rest.AnonymousClientConfig(tc.Guest.Env.Config)
	cfg.BearerToken = token.Status.Token
	guest, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return guest
}

func lbService(name string, annotations map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name, Annotations: annotations},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports},
	}
}

func tcp(port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: "tcp-" + strconv.Itoa(int(port)), Port: port, Protocol: corev1.ProtocolTCP}
}

func udp(port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: "udp-" + strconv.Itoa(int(port)), Port: port, Protocol: corev1.ProtocolUDP}
}

var _ = Describe("cloud provider LoadBalancer", Ordered, func() {
	var (
		tc          *testCluster
		cloud       *harvestercloud.Cloud
		balancer    cloudprovider.LoadBalancer
		clusterName string
		guestAdmin  client.Client
		ccmClient   kubernetes.Interface
		stop        context.CancelFunc
	)

	BeforeAll(func() {
		tc = newTestCluster("ccmlb", "ccmlb")
		clusterName = tc.guest().ID()
		cloud = guestCloud(tc, harvestercloud.Options{ClusterName: clusterName})
		guestAdmin = tc.Guest.Env.Client
		ccmClient = ccmGuestClient(tc)
		var lbCtx context.Context
		lbCtx, stop = context.WithCancel(ctx)
		Expect(cloud.StartLoadBalancers(lbCtx, ccmClient)).To(Succeed())
		var ok bool
		balancer, ok = cloud.LoadBalancer()
		Expect(ok).To(BeTrue())
	})

	AfterAll(func() {
		if stop != nil {
			stop()
		}
		if tc != nil {
			deleteCluster(tc)
			leakFree(tc.Target)
		}
	})

	create := func(svc *corev1.Service) *corev1.Service {
		Expect(guestAdmin.Create(ctx, svc)).To(Succeed())
		return svc
	}
	// latest is the Service as the service controller's informer hands it over.
	latest := func(svc *corev1.Service) *corev1.Service {
		out := &corev1.Service{}
		Expect(guestAdmin.Get(ctx, client.ObjectKeyFromObject(svc), out)).To(Succeed())
		return out
	}
	ensure := func(svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
		return balancer.EnsureLoadBalancer(ctx, clusterName, latest(svc), nil)
	}
	harvesterLB := func(g Gomega, name string) *lbv1.LoadBalancer {
		lb := &lbv1.LoadBalancer{}
		g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: name}, lb)).To(Succeed())
		return lb
	}
	lbGone := func(name string) {
		Eventually(func() bool {
			return apierrors.IsNotFound(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: name}, &lbv1.LoadBalancer{}))
		}).Should(BeTrue())
	}
	kubeVIP := func(svc *corev1.Service) func(Gomega) string {
		return func(g Gomega) string {
			out := &corev1.Service{}
			g.Expect(guestAdmin.Get(ctx, client.ObjectKeyFromObject(svc), out)).To(Succeed())
			return out.Annotations[guestcloud.AnnotationKubeVIPLoadBalancerIPs]
		}
	}
	events := func(svc *corev1.Service) func(Gomega) []corev1.Event {
		return func(g Gomega) []corev1.Event {
			list := &corev1.EventList{}
			g.Expect(guestAdmin.List(ctx, list, client.InNamespace(svc.Namespace))).To(Succeed())
			var out []corev1.Event
			for _, e := range list.Items {
				if e.InvolvedObject.Name == svc.Name && e.InvolvedObject.UID == svc.UID {
					out = append(out, e)
				}
			}
			return out
		}
	}
	event := func(reason, message string) OmegaMatcher {
		return ContainElement(And(HaveField("Reason", reason), HaveField("Message", ContainSubstring(message))))
	}
	pool := func(g Gomega, name string) *lbv1.IPPool {
		p := &lbv1.IPPool{}
		g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: name}, p)).To(Succeed())
		return p
	}
	// gone deletes a Service as the service controller lets it go: its load balancer first.
	gone := func(svc *corev1.Service) {
		Expect(balancer.EnsureLoadBalancerDeleted(ctx, clusterName, latest(svc))).To(Succeed())
		Expect(guestAdmin.Delete(ctx, svc)).To(Succeed())
	}

	It("gives a Service a pool address, shares it with secondary Services and frees it", func() {
		// A pool for this guest's Services: Harvester picks it by the load balancers' namespace
		// (its webhook replaces the network the Service asks for; see docs/cloud-provider.md).
		const services = "ccmlb-services"
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: services, Subnet: "10.10.0.0/16", RangeStart: "10.10.101.10", RangeEnd: "10.10.101.59",
			Namespace: tc.Target, Priority: testBed.Harvester.UniquePriority(),
		})).To(Succeed())
		DeferCleanup(func() {
			Expect(harvesterClient().Delete(ctx, &lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: services}})).To(Succeed())
		})
		web := create(lbService("web", map[string]string{
			guestcloud.AnnotationServiceNetwork: "default/vlan10",
			// Rancher's UI writes these for the cloud provider before v0.2.0.
			guestcloud.AnnotationServiceHealthCheckPrefix + "port": "80",
		}, tcp(80), tcp(443)))
		// Harvester's pool controller counts a new pool's addresses shortly after it is made.
		var free int64
		Eventually(func(g Gomega) {
			free = pool(g, services).Status.Available
			g.Expect(free).To(BeNumerically(">", 0))
		}).Should(Succeed())

		// The first call does not wait for Harvester to book the address (it holds no worker of
		// the service controller); the watch gives it to kube-vip and to the Service's status as
		// it comes (no service controller runs here), and the next call returns it.
		_, err := ensure(web)
		Expect(err).NotTo(HaveOccurred())
		var ip string
		Eventually(func(g Gomega) {
			ip = kubeVIP(web)(g)
			g.Expect(ip).To(HavePrefix("10.10.101."), "kube-vip is told the address")
		}).Should(Succeed())
		Eventually(func() []corev1.LoadBalancerIngress { return latest(web).Status.LoadBalancer.Ingress }).
			Should(ConsistOf(And(HaveField("IP", ip), HaveField("IPMode", HaveValue(Equal(corev1.LoadBalancerIPModeVIP))))),
				"the watch wrote the status the call returns")
		status, err := ensure(web)
		Expect(err).NotTo(HaveOccurred())
		Expect(status.Ingress).To(ConsistOf(HaveField("IP", ip)))

		name := balancer.GetLoadBalancerName(ctx, clusterName, web)
		Expect(len(name)).To(BeNumerically("<=", 63))
		lb := harvesterLB(Default, name)
		Expect(lb.Spec.WorkloadType).To(Equal(lbv1.Cluster))
		Expect(lb.Spec.IPAM).To(Equal(lbv1.Pool))
		Expect(lb.Labels).To(Equal(map[string]string{
			guestcloud.LabelLBCluster: clusterName, guestcloud.LabelLBServiceNamespace: "default", guestcloud.LabelLBServiceName: "web",
		}))
		// Asked for, then replaced by Harvester's webhook (no node-driver VMs here).
		Expect(lb.Annotations).To(HaveKeyWithValue(guestcloud.AnnotationLBNetwork, ""))
		Expect(lb.Annotations).To(HaveKeyWithValue(guestcloud.AnnotationLBCluster, clusterName))
		Expect(lb.Spec.BackendServerSelector).To(Equal(map[string][]string{guestcloud.LabelHarvesterGuestCluster: {clusterName}}))
		Expect(lb.Spec.HealthCheck).To(BeNil())
		Eventually(events(web)).Should(event(harvestercloud.ReasonHealthCheckIgnored, "readiness probes"))
		svc := latest(web)
		Expect(lb.Spec.Listeners).To(ConsistOf(
			lbv1.Listener{Name: "tcp-80", Port: 80, Protocol: corev1.ProtocolTCP, BackendPort: svc.Spec.Ports[0].NodePort},
			lbv1.Listener{Name: "tcp-443", Port: 443, Protocol: corev1.ProtocolTCP, BackendPort: svc.Spec.Ports[1].NodePort},
		))
		Expect(pool(Default, services).Status.Allocated).To(HaveKeyWithValue(ip, tc.Target+"/"+name))
		_, exists, err := balancer.GetLoadBalancer(ctx, clusterName, web)
		Expect(err).NotTo(HaveOccurred())
		Expect(exists).To(BeTrue())

		By("updating the load balancer when the ports change")
		Eventually(func(g Gomega) {
			svc := latest(web)
			svc.Spec.Ports = append(svc.Spec.Ports, tcp(8443))
			g.Expect(guestAdmin.Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())
		Expect(ensure(web)).To(HaveField("Ingress", ConsistOf(HaveField("IP", ip))))
		Expect(harvesterLB(Default, name).Spec.Listeners).To(HaveLen(3))

		By("sharing the address with a secondary Service")
		primary := map[string]string{guestcloud.AnnotationServicePrimaryService: "default/web"}
		// 443/UDP does not collide with the primary's 443/TCP.
		alt := create(lbService("web-alt", primary, tcp(8080), udp(443)))
		Expect(ensure(alt)).To(HaveField("Ingress", ConsistOf(HaveField("IP", ip))))
		Expect(kubeVIP(alt)(Default)).To(Equal(ip))
		altOwn := balancer.GetLoadBalancerName(ctx, clusterName, alt)
		Expect(apierrors.IsNotFound(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: altOwn}, &lbv1.LoadBalancer{}))).
			To(BeTrue(), "a secondary Service has no load balancer of its own")

		By("refusing a port that is already used on the shared address")
		clash := create(lbService("web-clash", primary, tcp(9090), tcp(443)))
		_, err = ensure(clash)
		Expect(err).To(MatchError(ContainSubstring("port 443/TCP")))
		Eventually(events(clash)).Should(event(harvestercloud.ReasonSharedPortConflict, "port 443/TCP"))
		Expect(kubeVIP(clash)(Default)).To(BeEmpty())
		clash2 := create(lbService("web-clash2", primary, udp(443)))
		Eventually(func() error { _, err := ensure(clash2); return err }).Should(MatchError(ContainSubstring("port 443/UDP")),
			"the ports of the other secondaries count too")

		By("refusing chains and unknown primaries")
		chain := create(lbService("web-chain", map[string]string{guestcloud.AnnotationServicePrimaryService: "default/web-alt"}, tcp(7070)))
		_, err = ensure(chain)
		Expect(err).To(MatchError(ContainSubstring("cannot be chained")))
		Eventually(events(chain)).Should(event(harvestercloud.ReasonInvalidPrimaryService, "cannot be chained"))
		orphan := create(lbService("web-orphan", map[string]string{guestcloud.AnnotationServicePrimaryService: "default/nobody"}, tcp(7070)))
		_, err = ensure(orphan)
		Expect(err).To(MatchError(ContainSubstring("does not exist")))
		Eventually(events(orphan)).Should(event(harvestercloud.ReasonInvalidPrimaryService, "default/nobody does not exist"))
		_, exists, err = balancer.GetLoadBalancer(ctx, clusterName, latest(orphan))
		Expect(err).NotTo(HaveOccurred())
		Expect(exists).To(BeFalse(), "nothing to delete, so deleting the Service is never blocked")

		By("sharing with another namespace only with the primary's consent")
		Expect(guestAdmin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}})).To(Succeed())
		borrower := lbService("borrower", primary, tcp(6060))
		borrower.Namespace = "team-b"
		create(borrower)
		_, err = ensure(borrower)
		Expect(err).To(MatchError(ContainSubstring("does not share its address with namespace team-b")))
		Eventually(events(borrower)).Should(event(harvestercloud.ReasonInvalidPrimaryService, guestcloud.AnnotationServiceShareWithNamespaces))
		Expect(kubeVIP(borrower)(Default)).To(BeEmpty())
		consent := func(namespaces string) {
			Eventually(func(g Gomega) {
				svc := latest(web)
				if namespaces == "" {
					delete(svc.Annotations, guestcloud.AnnotationServiceShareWithNamespaces)
				} else {
					svc.Annotations[guestcloud.AnnotationServiceShareWithNamespaces] = namespaces
				}
				g.Expect(guestAdmin.Update(ctx, svc)).To(Succeed())
			}).Should(Succeed())
		}
		consent("team-a, team-b")
		Eventually(func() (*corev1.LoadBalancerStatus, error) { return ensure(borrower) }).Should(HaveField("Ingress", ConsistOf(HaveField("IP", ip))))
		Expect(kubeVIP(borrower)(Default)).To(Equal(ip))
		By("a namespace whose consent is withdrawn neither gets the address nor holds up the primary")
		consent("")
		Eventually(func() error { _, err := ensure(borrower); return err }).Should(MatchError(ContainSubstring("does not share its address")))
		Expect(kubeVIP(borrower)(Default)).To(BeEmpty(), "kube-vip no longer announces the address for it")

		By("refusing a change of IPAM")
		Eventually(func(g Gomega) {
			svc := latest(web)
			svc.Annotations[guestcloud.AnnotationServiceIPAM] = "dhcp"
			g.Expect(guestAdmin.Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())
		_, err = ensure(web)
		Expect(err).To(MatchError(ContainSubstring("cannot change")))
		Eventually(events(web)).Should(event(harvestercloud.ReasonIPAMChangeRefused, "asks for IPAM dhcp"))
		Expect(harvesterLB(Default, name).Spec.IPAM).To(Equal(lbv1.Pool))
		Expect(kubeVIP(web)(Default)).To(Equal(ip))
		Eventually(func(g Gomega) {
			svc := latest(web)
			delete(svc.Annotations, guestcloud.AnnotationServiceIPAM)
			g.Expect(guestAdmin.Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())

		By("keeping the address while a secondary Service shares it")
		for _, svc := range []*corev1.Service{clash, clash2, chain, orphan} {
			gone(svc)
		}
		Eventually(func() error { return balancer.EnsureLoadBalancerDeleted(ctx, clusterName, latest(web)) }).
			Should(MatchError(And(ContainSubstring("default/web-alt"), Not(ContainSubstring("team-b/borrower")))))
		Eventually(events(web)).Should(event(harvestercloud.ReasonPrimaryServiceInUse, "default/web-alt"))
		harvesterLB(Default, name)

		By("freeing the address once both are gone (the borrower without consent does not count)")
		gone(alt)
		Eventually(func() error { return balancer.EnsureLoadBalancerDeleted(ctx, clusterName, latest(web)) }).Should(Succeed())
		Expect(guestAdmin.Delete(ctx, web)).To(Succeed())
		lbGone(name)
		Eventually(func(g Gomega) {
			p := pool(g, services)
			g.Expect(p.Status.Allocated).NotTo(HaveKey(ip))
			g.Expect(p.Status.Available).To(Equal(free))
		}).Should(Succeed())
		_, exists, err = balancer.GetLoadBalancer(ctx, clusterName, web)
		Expect(err).NotTo(HaveOccurred())
		Expect(exists).To(BeFalse())
		Expect(balancer.EnsureLoadBalancerDeleted(ctx, clusterName, web)).To(Succeed(), "deleting what is gone is a no-op")
	})

	It("with the service controller: hands over a late address at once and leaves DHCP to kube-vip", func() {
		// The real service controller of k8s.io/cloud-provider, with the CCM's guest RBAC.
		factory := informers.NewSharedInformerFactory(ccmClient, 0)
		controller, err := servicecontroller.New(cloud, ccmClient, factory.Core().V1().Services(), factory.Core().V1().Nodes(),
			clusterName, utilfeature.DefaultFeatureGate)
		Expect(err).NotTo(HaveOccurred())
		scCtx, stopController := context.WithCancel(ctx)
		defer stopController()
		factory.Start(scCtx.Done())
		// The workers the CCM ships with (its addon's --concurrent-service-syncs).
		workers, err := testenv.CCMServiceWorkers()
		Expect(err).NotTo(HaveOccurred())
		go controller.Run(scCtx, workers, controllersmetrics.NewControllerManagerMetrics("service-controller-test"))

		By("saying why while Harvester has no pool for the guest's Services")
		late := create(lbService("late", nil, tcp(80)))
		// Said by the watch once Harvester reports it, or by the service controller when its call
		// found the report already there.
		Eventually(events(late)).Should(Or(
			event(harvestercloud.ReasonAddressPending, "no matched IPPool"), event("SyncLoadBalancerFailed", "no matched IPPool")))
		name := balancer.GetLoadBalancerName(ctx, clusterName, late)

		By("writing the address to the Service as soon as Harvester allocates it, not at the next retry")
		lateIPs := "ccmlb-late"
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: lateIPs, Subnet: "10.30.0.0/16", RangeStart: "10.30.100.10", RangeEnd: "10.30.100.19",
			Namespace: tc.Target, Priority: testBed.Harvester.UniquePriority(),
		})).To(Succeed())
		allocated := time.Now()
		var ip string
		Eventually(func(g Gomega) {
			ip = kubeVIP(late)(g)
			g.Expect(ip).To(HavePrefix("10.30.100."))
		}).Should(Succeed())
		annotated := time.Since(allocated)
		Eventually(func(g Gomega) {
			g.Expect(latest(late).Status.LoadBalancer.Ingress).To(ConsistOf(HaveField("IP", ip)))
		}).Should(Succeed())
		inStatus := time.Since(allocated)
		GinkgoWriter.Printf("pool created -> kube-vip annotation %s, -> Service status %s\n", annotated, inStatus)
		// The service controller's first retry comes 5 s after the failure; this is well before.
		Expect(inStatus).To(BeNumerically("<", 3*time.Second))
		Expect(harvesterLB(Default, name).Status.AllocatedAddress.IPPool).To(Equal(lateIPs))

		By("leaving a DHCP address to kube-vip")
		lease := create(lbService("lease", map[string]string{guestcloud.AnnotationServiceIPAM: "dhcp"}, tcp(53), udp(53)))
		Eventually(kubeVIP(lease)).Should(Equal(guestcloud.AddressAskDHCP))
		Eventually(events(lease)).Should(event("EnsuredLoadBalancer", ""))
		leaseLB := balancer.GetLoadBalancerName(ctx, clusterName, lease)
		Eventually(func(g Gomega) {
			lb := harvesterLB(g, leaseLB)
			g.Expect(lb.Spec.IPAM).To(Equal(lbv1.DHCP))
			g.Expect(lb.Status.AllocatedAddress.IP).To(Equal(guestcloud.AddressAskDHCP))
		}).Should(Succeed())
		Expect(latest(lease).Status.LoadBalancer.Ingress).To(BeEmpty(), "0.0.0.0 is no address; kube-vip writes the lease")
		// kube-vip leases an address and writes it to the Service's status.
		Eventually(func(g Gomega) {
			svc := latest(lease)
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.10.200.77", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
			g.Expect(guestAdmin.Status().Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())
		leaseAlt := create(lbService("lease-alt", map[string]string{guestcloud.AnnotationServicePrimaryService: "default/lease"}, tcp(853)))
		Eventually(kubeVIP(leaseAlt)).Should(Equal("10.10.200.77"), "a secondary shares the primary's lease")
		Eventually(func(g Gomega) {
			g.Expect(latest(leaseAlt).Status.LoadBalancer.Ingress).To(ConsistOf(HaveField("IP", "10.10.200.77")))
		}).Should(Succeed())
		// Any later sync of the primary keeps kube-vip's status.
		Eventually(func(g Gomega) {
			svc := latest(lease)
			svc.Labels = map[string]string{"touched": "yes"}
			svc.Annotations["touched"] = "yes"
			g.Expect(guestAdmin.Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(latest(lease).Status.LoadBalancer.Ingress).To(ConsistOf(HaveField("IP", "10.10.200.77")))
		}, time.Second).Should(Succeed())

		By("deleting the load balancer of a Service that is no longer of type LoadBalancer")
		Eventually(func(g Gomega) {
			svc := latest(late)
			svc.Spec.Type = corev1.ServiceTypeClusterIP
			g.Expect(guestAdmin.Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())
		lbGone(name)
		Eventually(func(g Gomega) {
			g.Expect(kubeVIP(late)(g)).To(BeEmpty(), "kube-vip no longer announces it")
			g.Expect(latest(late).Status.LoadBalancer.Ingress).To(BeEmpty())
			g.Expect(pool(g, lateIPs).Status.Allocated).To(BeEmpty())
		}).Should(Succeed())

		By("deleting the load balancers with the Services")
		for _, svc := range []*corev1.Service{late, leaseAlt, lease} {
			Expect(guestAdmin.Delete(ctx, svc)).To(Succeed())
		}
		for _, svc := range []*corev1.Service{late, leaseAlt, lease} {
			Eventually(func() bool {
				return apierrors.IsNotFound(guestAdmin.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}))
			}).Should(BeTrue(), "the service controller removes its finalizer once the load balancer is gone")
		}
		lbGone(leaseLB)
		Expect(harvesterClient().Delete(ctx, &lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: lateIPs}})).To(Succeed())
	})

	It("gives a guest at most --max-load-balancers load balancers, however many Services its users make", func() {
		// A CCM of the same cluster with a cap of 2 (the shipped default is DefaultMaxLoadBalancers).
		capped := guestCloud(tc, harvestercloud.Options{ClusterName: clusterName, MaxLoadBalancers: 2})
		cappedCtx, stopCapped := context.WithCancel(ctx)
		defer stopCapped()
		Expect(capped.StartLoadBalancers(cappedCtx, ccmClient)).To(Succeed())
		limited, ok := capped.LoadBalancer()
		Expect(ok).To(BeTrue())
		dhcp := map[string]string{guestcloud.AnnotationServiceIPAM: "dhcp"}
		ensureCapped := func(svc *corev1.Service) error {
			_, err := limited.EnsureLoadBalancer(ctx, clusterName, latest(svc), nil)
			return err
		}

		By("serving the first two Services")
		first, second := create(lbService("cap-1", dhcp, tcp(80))), create(lbService("cap-2", dhcp, tcp(80)))
		for _, svc := range []*corev1.Service{first, second} {
			Eventually(func() error { return ensureCapped(svc) }).Should(Succeed(), svc.Name)
		}
		By("refusing a third, with an event that says why, and making no load balancer for it")
		third := create(lbService("cap-3", dhcp, tcp(80)))
		Expect(ensureCapped(third)).To(MatchError(ContainSubstring("its limit (--max-load-balancers)")))
		Eventually(events(third)).Should(event(harvestercloud.ReasonLoadBalancerLimit, "the cluster has 2"))
		Expect(apierrors.IsNotFound(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target,
			Name: limited.GetLoadBalancerName(ctx, clusterName, third)}, &lbv1.LoadBalancer{}))).To(BeTrue())
		By("a Service that shares an address needs no load balancer of its own")
		// kube-vip leases the primary's address and writes it to its status.
		Eventually(func(g Gomega) {
			svc := latest(first)
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.10.200.78", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
			g.Expect(guestAdmin.Status().Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())
		sharing := create(lbService("cap-shares", map[string]string{guestcloud.AnnotationServicePrimaryService: first.Namespace + "/" + first.Name}, tcp(81)))
		Eventually(func() error { return ensureCapped(sharing) }).Should(Succeed())
		By("serving the third once one of the first two is gone")
		Expect(limited.EnsureLoadBalancerDeleted(ctx, clusterName, latest(second))).To(Succeed())
		Expect(guestAdmin.Delete(ctx, second)).To(Succeed())
		lbGone(limited.GetLoadBalancerName(ctx, clusterName, second))
		Eventually(func() error { return ensureCapped(third) }).Should(Succeed())

		for _, svc := range []*corev1.Service{sharing, third, first} {
			Expect(limited.EnsureLoadBalancerDeleted(ctx, clusterName, latest(svc))).To(Succeed())
			Expect(guestAdmin.Delete(ctx, svc)).To(Succeed())
		}
		for _, svc := range []*corev1.Service{third, first} {
			lbGone(limited.GetLoadBalancerName(ctx, clusterName, svc))
		}
	})
})
