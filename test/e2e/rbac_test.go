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
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
)

// The manager runs with the RBAC its components ship, so a rule missing from config/rbac fails a
// scenario: here the rule on ClusterResourceSets is taken away from the installed ClusterRole,
// and the guest gets no addons until it is back.
var _ = Describe("The manager's shipped RBAC", func() {
	It("is what the manager runs with: without its ClusterResourceSet rule no guest gets addons", func() {
		// The manager must run its controllers before the rule goes: one that starts without it
		// does not start at all (its ClusterResourceSet watch never syncs), by design. Run first
		// in its shard, this spec used to take the rule away while the shared manager was still
		// waiting for its leadership.
		workersStarted := func(g Gomega) {
			started, err := testBed.Provider.WorkersStarted("harvestercluster")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(started).To(BeTrue(), "the manager's HarvesterCluster controller runs")
		}
		Eventually(workersStarted, 3*time.Minute).Should(Succeed())
		role := &rbacv1.ClusterRole{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Name: "capi-harvester-manager-role"}, role)).To(Succeed())
		shipped := role.DeepCopy()
		i := slices.IndexFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, addonsv1.GroupVersion.Group) && slices.Contains(r.Resources, "clusterresourcesets")
		})
		Expect(i).To(BeNumerically(">=", 0), "config/rbac grants ClusterResourceSets")
		role.Rules = slices.Delete(role.Rules, i, i+1)
		Expect(mgmt().Update(ctx, role)).To(Succeed())
		restored := false
		restore := func() {
			if restored {
				return
			}
			latest := &rbacv1.ClusterRole{}
			Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(role), latest)).To(Succeed())
			latest.Rules = shipped.Rules
			Expect(mgmt().Update(ctx, latest)).To(Succeed())
			restored = true
			// Whatever happened meanwhile (a manager restarted without the rule does not start),
			// the next spec finds the shared manager running.
			Eventually(workersStarted, 3*time.Minute).Should(Succeed())
		}
		DeferCleanup(restore)

		tc := newTestCluster("rbac", "rbac")
		crs := &addonsv1.ClusterResourceSet{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: controllers.AddonsResourceSetName(tc.Name)}}
		Eventually(func(g Gomega) {
			log, err := testBed.Provider.Log()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(log)).To(MatchRegexp(`clusterresourcesets\.addons\.cluster\.x-k8s\.io.* is forbidden`))
		}).Should(Succeed())
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(crs), crs)).NotTo(Succeed())

		By("working again once the rule is back")
		restore()
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(crs), crs)).To(Succeed())
			c := conditionOf(g, tc.HarvesterCluster, infrav1.AddonsReadyCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, 2*time.Minute).Should(Succeed())

		By("writing the ClusterResourceSet again when it is deleted by hand")
		first := crs.UID
		Expect(mgmt().Delete(ctx, crs)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(crs), crs)).To(Succeed())
			g.Expect(crs.UID).NotTo(Equal(first))
		}).Should(Succeed())
		deleteCluster(tc)
		leakFree(tc.Target)
	})
})
