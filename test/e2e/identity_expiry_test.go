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
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// tokenExpiry reads the exp claim of the identity kubeconfig's token (a TokenRequest JWT), and
// returns the token too.
func tokenExpiry(kubeconfig []byte) (time.Time, string) {
	cfg, err := clientcmd.Load(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	token := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
	parts := strings.Split(token, ".")
	Expect(parts).To(HaveLen(3))
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	Expect(err).NotTo(HaveOccurred())
	var claims struct {
		Exp int64 `json:"exp"`
	}
	Expect(json.Unmarshal(payload, &claims)).To(Succeed())
	Expect(claims.Exp).To(BeNumerically(">", 0))
	return time.Unix(claims.Exp, 0), token
}

var _ = Describe("identity expiry", func() {
	It("warns days before the identity's token expires, and stops once it is rotated", func() {
		// The bed's identity token lasts a day: well within the manager's default warning
		// period of a week (--identity-expiry-warning).
		tc := newTestCluster("expiry", "expiry")
		DeferCleanup(func() {
			deleteCluster(tc)
			leakFree(tc.Target)
		})
		secret := &corev1.Secret{}
		key := client.ObjectKey{Namespace: tc.Namespace, Name: tc.HarvesterCluster.Spec.IdentitySecret.Name}
		Expect(mgmt().Get(ctx, key, secret)).To(Succeed())
		expires, token := tokenExpiry(secret.Data[infrav1.IdentitySecretKey])
		Expect(time.Until(expires)).To(BeNumerically("<", 25*time.Hour))
		at := expires.UTC().Format(time.RFC3339)

		condition := func(g Gomega) *metav1.Condition {
			hc := &infrav1.HarvesterCluster{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), hc)).To(Succeed())
			c := conditions.Get(hc, infrav1.IdentityExpiringSoonCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(hc.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue))),
				"a credential that still works leaves the cluster Ready")
			return c
		}
		Eventually(func(g Gomega) {
			c := condition(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(infrav1.IdentityExpiresSoonReason))
			g.Expect(c.Message).To(ContainSubstring("expires at " + at))
			g.Expect(c.Message).To(ContainSubstring("docs/harvester-identity.md"))
			g.Expect(c.Message).NotTo(ContainSubstring(token))
		}).Should(Succeed())
		var warning corev1.Event
		Eventually(func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(mgmt().List(ctx, events, client.InNamespace(tc.Namespace))).To(Succeed())
			found := false
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "HarvesterCluster" && e.InvolvedObject.Name == tc.Name && e.Reason == infrav1.IdentityExpiringSoonCondition {
					warning, found = e, true
				}
			}
			g.Expect(found).To(BeTrue())
		}).Should(Succeed())
		Expect(warning.Type).To(Equal(corev1.EventTypeWarning))
		Expect(warning.Message).To(ContainSubstring(at))
		Expect(warning.Message).NotTo(ContainSubstring(token))
		Expect(warning.Count).To(BeNumerically("<=", 1), "one event, not one per reconcile")

		By("clearing the warning once a token that lasts longer is in the Secret")
		rotated, err := testBed.Harvester.Kubeconfig(ctx, harvestersim.ProviderIdentityNamespace, harvestersim.ProviderIdentityName, "", 30*24*time.Hour)
		Expect(err).NotTo(HaveOccurred())
		later, _ := tokenExpiry(rotated)
		Expect(time.Until(later)).To(BeNumerically(">", 8*24*time.Hour))
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, key, secret)).To(Succeed())
			secret.Data[infrav1.IdentitySecretKey] = rotated
			g.Expect(mgmt().Update(ctx, secret)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			c := condition(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.IdentityNotExpiringSoonReason))
			g.Expect(c.Message).To(ContainSubstring("expires at " + later.UTC().Format(time.RFC3339)))
		}).Should(Succeed())
	})

	It("rotating a lent identity as the docs say gives its clusters the new token", func() {
		tc := newTestCluster("rotate", "rotate")
		DeferCleanup(func() {
			deleteCluster(tc)
			leakFree(tc.Target)
		})
		By("lending the cluster a HarvesterClusterIdentity, as the templates name one")
		Expect(testBed.LendIdentity(ctx, "rotate", tc.Namespace, tc.Target)).To(Succeed())
		Eventually(func(g Gomega) {
			hc := &infrav1.HarvesterCluster{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), hc)).To(Succeed())
			hc.Spec.IdentitySecret = infrav1.SecretReference{}
			hc.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.HarvesterClusterIdentityKind, Name: "rotate"}
			g.Expect(mgmt().Update(ctx, hc)).To(Succeed())
		}).Should(Succeed())
		// The tenant's former Secret keeps the provider's finalizer until taken off by hand.
		Eventually(func(g Gomega) {
			old := &corev1.Secret{}
			g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: tc.HarvesterCluster.Spec.IdentitySecret.Name}, old)).To(Succeed())
			old.Finalizers = nil
			g.Expect(mgmt().Update(ctx, old)).To(Succeed())
		}).Should(Succeed())
		identity := &infrav1.HarvesterClusterIdentity{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Name: "rotate"}, identity)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(mgmt().Delete(ctx, identity))).To(Succeed())
		})
		key := client.ObjectKey{Namespace: testBed.Provider.Namespace, Name: identity.Spec.SecretName}
		secret := &corev1.Secret{}
		Expect(mgmt().Get(ctx, key, secret)).To(Succeed())
		before, oldToken := tokenExpiry(secret.Data[infrav1.IdentitySecretKey])
		Expect(time.Until(before)).To(BeNumerically("<", 25*time.Hour))
		expiring := func(g Gomega) *metav1.Condition {
			hc := &infrav1.HarvesterCluster{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), hc)).To(Succeed())
			g.Expect(conditions.IsTrue(hc, infrav1.HarvesterAvailableCondition)).To(BeTrue(), "%v", hc.Status.Conditions)
			c := conditions.Get(hc, infrav1.IdentityExpiringSoonCondition)
			g.Expect(c).NotTo(BeNil())
			return c
		}
		Eventually(func(g Gomega) {
			g.Expect(expiring(g).Reason).To(Equal(infrav1.IdentityExpiresSoonReason))
		}).Should(Succeed())
		requireTool("JQ")
		listed := tc.Namespace + "/" + tc.HarvesterCluster.Name
		Expect(runDocumentedOnManagement("harvester-identity.md", "list-expiring")).To(ContainSubstring(listed),
			"docs/harvester-identity.md's listing names the cluster that warns")

		By("running docs/harvester-identity.md's rotation commands with kubectl")
		dir := GinkgoT().TempDir()
		harvesterAdmin, err := testBed.Harvester.Env.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		management, err := testBed.Management.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		for name, data := range map[string][]byte{
			"harvester-admin.yaml": harvesterAdmin, "harvester.kubeconfig": secret.Data[infrav1.IdentitySecretKey], "management.yaml": management,
		} {
			Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
		}
		runDocumented(documentedBlock("harvester-identity.md", "rotate-lent-identity"), dir,
			"KUBECONFIG="+filepath.Join(dir, "management.yaml"), "HARVESTER_IDENTITY=rotate")

		By("the cluster takes the new token: its expiry is a month away")
		Expect(mgmt().Get(ctx, key, secret)).To(Succeed())
		after, newToken := tokenExpiry(secret.Data[infrav1.IdentitySecretKey])
		Expect(newToken).NotTo(Equal(oldToken))
		Expect(time.Until(after)).To(BeNumerically(">", 29*24*time.Hour))
		Expect(secret.Finalizers).NotTo(BeEmpty(), "the Secret keeps the provider's finalizer through kubectl apply")
		Eventually(func(g Gomega) {
			c := expiring(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.IdentityNotExpiringSoonReason))
			g.Expect(c.Message).To(ContainSubstring("expires at " + after.UTC().Format(time.RFC3339)))
		}).Should(Succeed())
		Expect(runDocumentedOnManagement("harvester-identity.md", "list-expiring")).NotTo(ContainSubstring(listed),
			"the listing leaves out the rotated cluster")
	})
})
