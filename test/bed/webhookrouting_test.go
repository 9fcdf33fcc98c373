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

package bed

import (
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
)

// A webhook is pointed at the manager's port with its Service's path; one that an earlier
// manager's routing already pointed at that manager's port keeps its path (the upgraded manager
// used to get "/" for every webhook clusterctl's upgrade had been routed to the old one).
func TestToLoopbackKeepsEachWebhooksPath(t *testing.T) {
	g := NewWithT(t)
	ca := []byte("ca")
	fromService := admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
		Namespace: "capi-harvester-system", Name: "capi-harvester-webhook-service", Path: ptr.To("/mutate-x"),
	}}
	toLoopback(&fromService, 1234, ca)
	g.Expect(fromService.Service).To(BeNil())
	g.Expect(fromService.URL).To(Equal(ptr.To("https://127.0.0.1:1234/mutate-x")))
	g.Expect(fromService.CABundle).To(Equal(ca))

	fromEarlierManager := admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:999/validate-y"), CABundle: []byte("old")}
	toLoopback(&fromEarlierManager, 1234, ca)
	g.Expect(fromEarlierManager.URL).To(Equal(ptr.To("https://127.0.0.1:1234/validate-y")))
	g.Expect(fromEarlierManager.CABundle).To(Equal(ca))

	noPath := admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "n", Name: "s"}}
	toLoopback(&noPath, 1234, ca)
	g.Expect(noPath.URL).To(Equal(ptr.To("https://127.0.0.1:1234/")))
}
