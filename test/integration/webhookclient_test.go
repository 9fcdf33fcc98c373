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

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/webhookguard"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The opt-in client authentication of the webhook port (--webhook-client-ca-file) against a real
// kube-apiserver configured as docs/security.md tells an admin: its admission configuration's
// kubeconfig names the webhook's host and port and gives the client certificate. The API server
// presents that certificate and its reviews are served; a webhook it has no certificate for (the
// same server reached by another name) is refused, so the API server's call fails closed; and a
// peer posting directly is refused before its body is read.
func TestTheAPIServerPresentsItsClientCertificateToTheWebhookPort(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	ports, err := testenv.FreeLoopbackPorts(1)
	g.Expect(err).NotTo(HaveOccurred())
	port := ports[0]

	client, err := testenv.NewClientCertificate("kube-apiserver-webhook-client")
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(dir, "webhook-clients.kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "127.0.0.1:%d"
  user:
    client-certificate-data: %q
    client-key-data: %q
`, port, base64.StdEncoding.EncodeToString(client.Cert), base64.StdEncoding.EncodeToString(client.Key))), 0o600)).To(Succeed())
	admissionConfig := filepath.Join(dir, "admission.yaml")
	plugin := func(name string) string {
		return fmt.Sprintf(`- name: %s
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %q
`, name, kubeconfig)
	}
	g.Expect(os.WriteFile(admissionConfig, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"+
		plugin("ValidatingAdmissionWebhook")+plugin("MutatingAdmissionWebhook")), 0o600)).To(Succeed())
	env, err := testenv.Start(testenv.Options{Name: "webhook-client-certificate", ConfigureAPIServer: func(s *envtest.APIServer) error {
		s.Configure().Set("admission-control-config-file", admissionConfig)
		return nil
	}})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()

	// The webhook server as main.go builds it with --webhook-client-ca-file.
	serving, err := testenv.NewServingCertificate("webhook", []string{"localhost"}, net.ParseIP("127.0.0.1"))
	g.Expect(err).NotTo(HaveOccurred())
	certDir := filepath.Join(dir, "serving")
	g.Expect(os.MkdirAll(certDir, 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(certDir, "tls.crt"), serving.Cert, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(certDir, "tls.key"), serving.Key, 0o600)).To(Succeed())
	caFile := filepath.Join(dir, "webhook-client-ca.crt")
	g.Expect(os.WriteFile(caFile, client.CA, 0o600)).To(Succeed())
	clientCA, err := webhookguard.ClientCA(caFile)
	g.Expect(err).NotTo(HaveOccurred())
	guard := webhookguard.DefaultOptions("/hooks/")
	guard.RequireClientCert, guard.WithoutClientCert = true, []string{"/hooks/"}
	server := webhookguard.Wrap(webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir,
		TLSOpts: []func(*tls.Config){clientCA}}), guard)
	var mu sync.Mutex
	var callers []string
	allow := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	server.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		callers = append(callers, r.TLS.VerifiedChains[0][0].Subject.CommonName)
		mu.Unlock()
		allow.ServeHTTP(w, r)
	}))
	go func() { _ = server.Start(ctx) }()
	g.Eventually(func() error { return server.StartedChecker()(nil) }, time.Minute).Should(Succeed())

	webhookFor := func(name, host, label string) admissionv1.ValidatingWebhook {
		return admissionv1.ValidatingWebhook{
			Name: name, AdmissionReviewVersions: []string{"v1"}, SideEffects: ptr.To(admissionv1.SideEffectClassNone),
			FailurePolicy: ptr.To(admissionv1.Fail), TimeoutSeconds: ptr.To[int32](10),
			ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/validate"), CABundle: serving.CA},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"reached-as": label}},
		}
	}
	g.Expect(env.Client.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "client-certificate"},
		Webhooks: []admissionv1.ValidatingWebhook{
			webhookFor("by-address.example.com", "127.0.0.1", "address"),
			webhookFor("by-name.example.com", "localhost", "name"),
		},
	})).To(Succeed())
	configMap := func(name, label string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"reached-as": label}}}
	}

	// The configuration takes effect within a second or so; until then creates go unchecked.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Create(ctx, configMap(fmt.Sprintf("checked-%d", time.Now().UnixNano()), "address"))).To(Succeed())
		mu.Lock()
		defer mu.Unlock()
		g.Expect(callers).NotTo(BeEmpty())
	}, time.Minute).Should(Succeed())
	mu.Lock()
	g.Expect(callers).To(HaveEach("kube-apiserver-webhook-client"))
	mu.Unlock()

	// Reached by a name its admission configuration has no certificate for, the API server
	// presents none: refused, and the create fails closed.
	err = env.Client.Create(ctx, configMap("unauthenticated", "name"))
	g.Expect(err).To(MatchError(ContainSubstring("by-name.example.com")))
	// (client-go's words for a 401.)
	g.Expect(err.Error()).To(ContainSubstring("the server has asked for the client to provide credentials"))

	// A peer without the certificate, straight to the port.
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(serving.CA)).To(BeTrue())
	peer := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	resp, err := peer.Post(fmt.Sprintf("https://127.0.0.1:%d/validate", port), "application/json", strings.NewReader("{}"))
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
}
