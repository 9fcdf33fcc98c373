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
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// A cluster's deletion removes the load balancers its guest's cloud controller manager made,
// and waits for them to go by their events (they are in the connection's cache), not by listing
// them on Harvester again and again.
var _ = Describe("Deletion of a cluster with guest load balancers", func() {
	It("waits for them on their events, without re-listing", func() {
		tc := newTestCluster("guest-lb-gone", "guest-lb-gone")
		const held = "e2e.test/held"
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("4f1c2a9e-0000-4000-8000-000000000001")},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}},
		}
		// As the guest's CCM makes it; a finalizer keeps it while "Harvester releases its
		// address", which the test decides.
		lb := guestcloud.BuildServiceLoadBalancer(tc.Target, tc.guest().ID(), svc, lbv1.Pool)
		lb.Finalizers = []string{held}
		Expect(harvesterClient().Create(ctx, lb)).To(Succeed())

		By("deleting the cluster: the provider deletes the guest's load balancer, which stays while held")
		Expect(mgmt().Delete(ctx, tc.Cluster)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(lb), lb)).To(Succeed())
			g.Expect(lb.DeletionTimestamp.IsZero()).To(BeFalse())
		}).Should(Succeed())

		By("waiting without asking Harvester for load balancers again")
		lists := func() int { return testBed.Harvester.Faults.RequestsOf("loadbalancers", "list") }
		before := lists()
		Consistently(func() int { return lists() - before }).WithTimeout(5*time.Second).WithPolling(250*time.Millisecond).
			Should(BeZero(), "LIST requests for load balancers while the deletion waits")
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), tc.HarvesterCluster)).To(Succeed(), "the HarvesterCluster waits for the load balancer")

		By("releasing it: its deletion event lets the cluster's deletion finish")
		// Read again and patched under optimistic lock: the load balancer controller takes its own
		// finalizer off meanwhile, and a stale list would put it back.
		Eventually(func(g Gomega) {
			g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(lb), lb)).To(Succeed())
			base := lb.DeepCopy()
			controllerutil.RemoveFinalizer(lb, held)
			g.Expect(harvesterClient().Patch(ctx, lb, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
		}).Should(Succeed())
		start := time.Now()
		clusterGone(mgmt(), tc.Namespace, tc.Name)
		GinkgoWriter.Printf("cluster gone %s after its guest's load balancer\n", time.Since(start).Round(time.Millisecond))
		leakFree(tc.Target)
	})
})
