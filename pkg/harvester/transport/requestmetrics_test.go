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

package transport

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRequestVerbResource(t *testing.T) {
	for _, tc := range []struct {
		method, path, watch string
		verb, resource      string
	}{
		{"GET", "/apis/kubevirt.io/v1/namespaces/guests/virtualmachines/vm-1", "", "get", "kubevirt.io/virtualmachines"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/guests/virtualmachines", "", "list", "kubevirt.io/virtualmachines"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/guests/virtualmachineinstances", "true", "watch", "kubevirt.io/virtualmachineinstances"},
		{"GET", "/apis/kubevirt.io/v1/virtualmachines", "", "list", "kubevirt.io/virtualmachines"},
		{"POST", "/apis/loadbalancer.harvesterhci.io/v1beta1/namespaces/guests/loadbalancers", "", "create", "loadbalancer.harvesterhci.io/loadbalancers"},
		{"PUT", "/api/v1/namespaces/guests/secrets/s", "", "update", "secrets"},
		{"PATCH", "/api/v1/namespaces/guests/serviceaccounts/sa", "", "patch", "serviceaccounts"},
		{"POST", "/api/v1/namespaces/guests/serviceaccounts/sa/token", "", "create", "serviceaccounts/token"},
		{"DELETE", "/api/v1/namespaces/guests/persistentvolumeclaims/pvc-1", "", "delete", "persistentvolumeclaims"},
		{"DELETE", "/api/v1/namespaces/guests/persistentvolumeclaims", "", "deletecollection", "persistentvolumeclaims"},
		{"GET", "/api/v1/nodes", "", "list", "nodes"},
		{"GET", "/api/v1/namespaces/guests", "", "get", "namespaces"},
		{"GET", "/api/v1/namespaces", "", "list", "namespaces"},
		{"PUT", "/api/v1/namespaces/guests/finalize", "", "update", "namespaces/finalize"},
		{"GET", "/api/v1/namespaces/guests/pods", "", "list", "pods"},
		{"PUT", "/api/v1/nodes/host-1/status", "", "update", "nodes/status"},
		{"GET", "/apis/harvesterhci.io/v1beta1/settings/server-version", "", "get", "harvesterhci.io/settings"},
		{"GET", "/apis", "", "get", "nonresource"},
		{"GET", "/api/v1", "", "get", "nonresource"},
		{"GET", "/version", "", "get", "nonresource"},
	} {
		verb, resource := RequestVerbResource(tc.method, tc.path, tc.watch)
		if verb != tc.verb || resource != tc.resource {
			t.Errorf("%s %s watch=%q: got %s %s, want %s %s", tc.method, tc.path, tc.watch, verb, resource, tc.verb, tc.resource)
		}
	}
}

func TestRequestMetricsRoundTripper(t *testing.T) {
	g := NewWithT(t)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer server.Close()
	reg := prometheus.NewRegistry()
	m, err := NewRequestMetrics(reg)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := NewRequestMetrics(reg)
	g.Expect(err).NotTo(HaveOccurred(), "a second factory in the process shares the collectors")
	c := &http.Client{Transport: m.WrapTransport("capi/identity")(http.DefaultTransport)}
	for _, path := range []string{"/api/v1/namespaces/g/secrets/s", "/api/v1/namespaces/g/secrets/missing"} {
		resp, err := c.Get(server.URL + path)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
	}
	unreachable := &http.Client{Transport: again.WrapTransport("capi/identity")(http.DefaultTransport)}
	_, err = unreachable.Get("http://127.0.0.1:1/api/v1/namespaces/g/secrets/s")
	g.Expect(err).To(HaveOccurred())

	g.Expect(testutil.ToFloat64(m.requests.WithLabelValues("capi/identity", "get", "secrets", "200"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.requests.WithLabelValues("capi/identity", "get", "secrets", "404"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.requests.WithLabelValues("capi/identity", "get", "secrets", "error"))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(m.duration)).To(Equal(1))
}

func TestManagementRequestMetricsAreTheirOwnFamily(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	_, err := NewRequestMetrics(reg)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := NewManagementRequestMetrics(reg)
	g.Expect(err).NotTo(HaveOccurred(), "both families register in one registry")
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusConflict) }))
	defer server.Close()
	c := &http.Client{Transport: m.WrapTransport("management")(http.DefaultTransport)}
	req, err := http.NewRequest(http.MethodPatch, server.URL+"/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/n/harvestermachines/m/status", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()

	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	names := []string{}
	for _, f := range families {
		names = append(names, f.GetName())
	}
	g.Expect(names).To(ContainElements("capi_harvester_management_requests_total", "capi_harvester_management_request_duration_seconds"))
	g.Expect(testutil.ToFloat64(m.requests.WithLabelValues("management", "patch", "infrastructure.cluster.x-k8s.io/harvestermachines/status", "409"))).To(Equal(1.0))
}
