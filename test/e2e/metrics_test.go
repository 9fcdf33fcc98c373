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
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// scrape GETs the manager's metrics endpoint, as shipped (https, callers authenticated by token
// and authorised by the management cluster), with token ("" for none).
func scrape(token string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+testBed.Provider.MetricsAddr+"/metrics", nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := bed.MetricsClient().Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

// metricsToken is a token of a management ServiceAccount, bound to the metrics-reader role the
// components ship when reader is true.
func metricsToken(namespace, name string, reader bool) string {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	Expect(mgmt().Create(ctx, sa)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt().Delete(ctx, sa))).To(Succeed()) })
	if reader {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capi-harvester-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		}
		Expect(mgmt().Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt().Delete(ctx, binding))).To(Succeed()) })
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(mgmt().SubResource("token").Create(ctx, sa, request)).To(Succeed())
	return request.Status.Token
}

func parseMetrics(g Gomega, text string) map[string]*dto.MetricFamily {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

// metric finds the sample of family whose labels include labels; nil when there is none.
func metric(families map[string]*dto.MetricFamily, family string, labels map[string]string) *dto.Metric {
	f, ok := families[family]
	if !ok {
		return nil
	}
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
				break
			}
		}
		if match {
			return m
		}
	}
	return nil
}

var _ = Describe("the manager's metrics", func() {
	It("count Harvester requests per connection, time provisioning and load balancers, and count machines and token renewals", func() {
		tc := newTestCluster("metrics", "metrics")
		DeferCleanup(func() {
			deleteCluster(tc)
			leakFree(tc.Target)
		})
		tc.controlPlaneMachine("metrics-cp-0")
		waitProgressing("metrics-cp-0 provisioned", tc.state, func(g Gomega) {
			hm := &infrav1.HarvesterMachine{}
			g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: "metrics-cp-0"}, hm)).To(Succeed())
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		})

		By("refusing callers without a token or without the metrics-reader role")
		code, _ := scrape("")
		Expect(code).To(Equal(http.StatusUnauthorized))
		code, _ = scrape(metricsToken(tc.Namespace, "not-a-reader", false))
		Expect(code).To(Equal(http.StatusForbidden))

		By("serving the provider's metrics to a metrics reader")
		token := metricsToken(tc.Namespace, "prometheus", true)
		connection := tc.Namespace + "/" + tc.HarvesterCluster.Spec.IdentitySecret.Name
		var text string
		Eventually(func(g Gomega) {
			var code int
			code, text = scrape(token)
			g.Expect(code).To(Equal(http.StatusOK))
			families := parseMetrics(g, text)

			created := metric(families, "capi_harvester_requests_total",
				map[string]string{"connection": connection, "verb": "create", "resource": "kubevirt.io/virtualmachines", "result": "201"})
			g.Expect(created).NotTo(BeNil(), "the VM's creation is counted on the cluster's connection")
			g.Expect(created.GetCounter().GetValue()).To(BeNumerically(">=", 1))
			g.Expect(metric(families, "capi_harvester_requests_total",
				map[string]string{"connection": connection, "verb": "watch", "resource": "kubevirt.io/virtualmachineinstances"})).NotTo(BeNil())
			g.Expect(metric(families, "capi_harvester_requests_total",
				map[string]string{"connection": connection, "verb": "create", "resource": "serviceaccounts/token", "result": "201"})).NotTo(BeNil())
			g.Expect(metric(families, "capi_harvester_request_duration_seconds",
				map[string]string{"connection": connection, "verb": "create", "resource": "loadbalancer.harvesterhci.io/loadbalancers"})).NotTo(BeNil())
			g.Expect(metric(families, "capi_harvester_management_requests_total",
				map[string]string{"connection": "management", "verb": "patch", "resource": "infrastructure.cluster.x-k8s.io/harvestermachines/status", "result": "200"})).
				NotTo(BeNil(), "the manager's requests to the management cluster are counted too, by resource")

			for _, stage := range []string{"created_to_running", "running_to_provisioned", "created_to_provisioned"} {
				h := metric(families, "capi_harvester_machine_provisioning_seconds", map[string]string{"stage": stage})
				g.Expect(h).NotTo(BeNil(), stage)
				g.Expect(h.GetHistogram().GetSampleCount()).To(BeNumerically(">=", 1), stage)
			}
			lb := metric(families, "capi_harvester_loadbalancer_allocation_seconds", nil)
			g.Expect(lb).NotTo(BeNil())
			g.Expect(lb.GetHistogram().GetSampleCount()).To(BeNumerically(">=", 1))
			provisioned := metric(families, "capi_harvester_machines", map[string]string{"phase": "Provisioned"})
			g.Expect(provisioned).NotTo(BeNil())
			g.Expect(provisioned.GetGauge().GetValue()).To(BeNumerically(">=", 1))
			renewals := metric(families, "capi_harvester_guest_credential_renewals_total", nil)
			g.Expect(renewals).NotTo(BeNil())
			g.Expect(renewals.GetCounter().GetValue()).To(BeNumerically(">=", 1))
			g.Expect(families).To(HaveKey("capi_harvester_guest_credential_renewal_failures_total"))
		}).Should(Succeed())

		By("having every metric the Grafana dashboard queries")
		dashboard, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "grafana-dashboard.json"))
		Expect(err).NotTo(HaveOccurred())
		families := parseMetrics(Default, text)
		queried := regexp.MustCompile(`capi_harvester_[a-z_]+`).FindAllString(string(dashboard), -1)
		Expect(queried).NotTo(BeEmpty())
		for _, name := range queried {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if family, ok := strings.CutSuffix(name, suffix); ok && families[family].GetType() == dto.MetricType_HISTOGRAM {
					name = family
				}
			}
			Expect(families).To(HaveKey(name), "the dashboard queries %s", name)
		}

		By("never naming a secret's value")
		secret := &corev1.Secret{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: tc.HarvesterCluster.Spec.IdentitySecret.Name}, secret)).To(Succeed())
		identity, err := clientcmd.Load(secret.Data[infrav1.IdentitySecretKey])
		Expect(err).NotTo(HaveOccurred())
		var secrets []string
		for _, auth := range identity.AuthInfos {
			secrets = append(secrets, auth.Token, string(auth.ClientKeyData), auth.Password)
		}
		_, guestToken, _ := guestCredential(Default, tc)
		secrets = append(secrets, guestToken)
		for _, value := range secrets {
			if value != "" {
				Expect(text).NotTo(ContainSubstring(value))
			}
		}
	})
})
