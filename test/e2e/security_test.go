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
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// tenantServer is an https endpoint a hostile tenant controls: it records every request.
type tenantServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func newTenantServer() *tenantServer {
	s := &tenantServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path+" agent="+r.UserAgent()+" auth="+r.Header.Get("Authorization"))
		s.mu.Unlock()
		http.NotFound(w, r)
	}))
	return s
}

func (s *tenantServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// hostileCluster creates a Cluster and a HarvesterCluster whose identity Secret holds kubeconfig.
func hostileCluster(namespace, name string, kubeconfig []byte) *infrav1.HarvesterCluster {
	Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	Expect(mgmt().Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-identity"},
		Data:       map[string][]byte{infrav1.IdentitySecretKey: kubeconfig},
	})).To(Succeed())
	hc := &infrav1.HarvesterCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: infrav1.HarvesterClusterSpec{
			IdentitySecret:  infrav1.SecretReference{Name: name + "-identity"},
			TargetNamespace: "h-" + namespace,
		},
	}
	Expect(mgmt().Create(ctx, hc)).To(Succeed())
	Expect(mgmt().Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name,
			},
		},
	})).To(Succeed())
	return hc
}

// tenantKubeconfig points at the tenant's server and lets edit add the hostile part.
func tenantKubeconfig(server *tenantServer, edit func(u *clientcmdapi.AuthInfo)) []byte {
	user := &clientcmdapi.AuthInfo{}
	edit(user)
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"harvester": {
			Server:                   server.URL,
			CertificateAuthorityData: pemOf(server.Certificate().Raw),
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"tenant": user},
		Contexts:       map[string]*clientcmdapi.Context{"harvester": {Cluster: "harvester", AuthInfo: "tenant"}},
		CurrentContext: "harvester",
	})
	Expect(err).NotTo(HaveOccurred())
	return data
}

var _ = Describe("Hostile identity kubeconfigs", func() {
	// Each case is a kubeconfig that, handed to client-go as it is, would make the manager send a
	// secret it can read to the tenant's server or run the tenant's program. The provider refuses
	// it before any connection: the tenant's server sees nothing, and the condition names the
	// field (never its value).
	type attack struct {
		name  string
		field string
		edit  func(dir string, u *clientcmdapi.AuthInfo)
	}
	// secretFile stands for the manager's ServiceAccount token or any file it can read.
	secretFile := func(dir string) string {
		path := filepath.Join(dir, "token")
		Expect(os.WriteFile(path, []byte("managers-own-token-"+dir), 0o600)).To(Succeed())
		return path
	}
	// marker is created by the tenant's program if it ever runs.
	marker := func(dir string) string { return filepath.Join(dir, "exec-ran") }
	attacks := []attack{
		{"tokenFile naming a file that holds a secret", "users[tenant].user.tokenFile", func(dir string, u *clientcmdapi.AuthInfo) {
			u.TokenFile = secretFile(dir)
		}},
		{"an exec credential plugin", "users[tenant].user.exec", func(dir string, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{
				APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh",
				Args: []string{"-c", "touch " + marker(dir) + "; echo '{}'"}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			}
		}},
		{"an auth provider", "users[tenant].user.auth-provider", func(dir string, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{
				"idp-issuer-url": "https://issuer.invalid", "client-id": "x", "id-token": "y",
			}}
		}},
		{"a client key read from a file", "users[tenant].user.client-key", func(dir string, u *clientcmdapi.AuthInfo) {
			u.ClientCertificateData = []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
			u.ClientKey = secretFile(dir)
		}},
	}
	for i, a := range attacks {
		It("refuses "+a.name+" without contacting the tenant's server", func() {
			server := newTenantServer()
			defer server.Close()
			dir := GinkgoT().TempDir()
			namespace := "hostile-" + string(rune('a'+i))
			hc := hostileCluster(namespace, "attack", tenantKubeconfig(server, func(u *clientcmdapi.AuthInfo) { a.edit(dir, u) }))

			Eventually(func(g Gomega) {
				g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
				c := conditions.Get(hc, infrav1.HarvesterAvailableCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(infrav1.InvalidKubeconfigReason))
				g.Expect(c.Message).To(ContainSubstring(a.field))
				g.Expect(c.Message).NotTo(ContainSubstring(dir), "the refused value is not quoted")
			}).Should(Succeed())
			// The refusal happens before any connection is built; a while later nothing has
			// reached the tenant's server and the tenant's program never ran.
			Consistently(server.seen, 2*time.Second).Should(BeEmpty())
			Expect(marker(dir)).NotTo(BeAnExistingFile())

			// Nothing can be cleaned up through a refused identity: the documented way out, as
			// docs/troubleshooting.md writes it.
			runDocumentedOnManagement("troubleshooting.md", "skip-harvester-cleanup", "NAMESPACE="+hc.Namespace, "NAME="+hc.Name)
			Expect(mgmt().Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "attack"}})).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc))
			}).Should(BeTrue())
			Expect(server.seen()).To(BeEmpty())
		})
	}

	It("has no way to name an identity Secret in another namespace", func() {
		hc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": "HarvesterCluster",
			"metadata": map[string]any{"namespace": "default", "name": "elsewhere"},
			"spec": map[string]any{
				"identitySecret":  map[string]any{"name": "identity", "namespace": "capi-harvester-system"},
				"targetNamespace": "tenant",
			},
		}}
		err := mgmt().Create(ctx, hc, client.FieldValidation("Strict"))
		Expect(err).To(MatchError(ContainSubstring(`unknown field "spec.identitySecret.namespace"`)))
	})
})

func pemOf(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }

// The manager's webhook port takes any peer (docs/security.md, "Who reaches which port"). A few
// MiB of tiny JSON values once cost it gigabytes to decode; the guard refuses them unread or
// after a scan that builds nothing, and the manager's peak memory stays where it was.
var _ = Describe("A peer on the webhook port", func() {
	It("cannot grow the manager's memory with oversized, many-valued or concurrent requests", func() {
		pid := testBed.Provider.Pid()
		Expect(pid).NotTo(BeZero())
		base, caPEM := testBed.Provider.WebhookEndpoint()
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
		peer := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
		post := func(path string, body []byte) (int, string) {
			resp, err := peer.Post(base+path, "application/json", bytes.NewReader(body))
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return resp.StatusCode, string(answer)
		}
		// A HarvesterCluster review whose status holds n empty conditions.
		attack := func(n int) []byte {
			return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE",` +
				`"kind":{"group":"infrastructure.cluster.x-k8s.io","version":"v1alpha1","kind":"HarvesterCluster"},` +
				`"resource":{"group":"infrastructure.cluster.x-k8s.io","version":"v1alpha1","resource":"harvesterclusters"},` +
				`"object":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"HarvesterCluster","metadata":{"name":"c","namespace":"n"},` +
				`"status":{"conditions":[` + strings.TrimSuffix(strings.Repeat("{},", n), ",") + `]}}}}`)
		}
		peakBefore := peakRSS(pid)

		By("7 MiB, the most controller-runtime itself reads, is refused unread")
		status, answer := post("/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestercluster", attack((7<<20)/3))
		Expect(status).To(Equal(http.StatusRequestEntityTooLarge), answer)

		By("just under the byte limit, but a million tiny values, is refused before decoding, on every kind of path")
		body := attack((4<<20)/3 - 1000)
		for _, path := range []string{
			"/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestercluster",
			"/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine",
			"/validate-guest-kubeconfig-secret",
		} {
			status, answer := post(path, body)
			Expect(status).To(Equal(http.StatusBadRequest), path)
			Expect(answer).To(ContainSubstring("more than 256 elements"), path)
		}

		// atOnce posts body to the defaulting path n times at once and returns the statuses.
		atOnce := func(n int, body []byte) []int {
			var wg sync.WaitGroup
			statuses := make(chan int, n)
			for range n {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					s, _ := post("/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestercluster", body)
					statuses <- s
				}()
			}
			wg.Wait()
			close(statuses)
			var all []int
			for s := range statuses {
				all = append(all, s)
			}
			return all
		}

		By("sixteen such requests at once are each refused (400, or 429 past the eight served at once)")
		for _, s := range atOnce(16, body) {
			Expect(s).To(BeElementOf(http.StatusBadRequest, http.StatusTooManyRequests))
		}

		By("the manager's peak memory grew by less than 64 MiB: each was refused after its first bytes")
		Expect(peakRSS(pid)-peakBefore).To(BeNumerically("<", 64<<10), "peak RSS before %d KiB", peakBefore)

		By("sixteen reviews at once of the right shape, each one 4 MiB string, are served 8 MiB at a time")
		long := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE",` +
			`"kind":{"group":"infrastructure.cluster.x-k8s.io","version":"v1alpha1","kind":"HarvesterCluster"},` +
			`"resource":{"group":"infrastructure.cluster.x-k8s.io","version":"v1alpha1","resource":"harvesterclusters"},` +
			`"object":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"HarvesterCluster","metadata":{"name":"c","namespace":"n",` +
			`"annotations":{"a":"` + strings.Repeat("x", (4<<20)-4096) + `"}}}}}`)
		served := 0
		for _, s := range atOnce(16, long) {
			Expect(s).To(BeElementOf(http.StatusOK, http.StatusTooManyRequests))
			if s == http.StatusOK {
				served++
			}
		}
		Expect(served).To(BeNumerically(">=", 2), "at least the two that fit the budget at once are served")

		By("the manager's peak memory grew by less than the budget allows (8 MiB of bodies, each costing at most 28 times its size), and it still admits a real object")
		Expect(peakRSS(pid)-peakBefore).To(BeNumerically("<", 28*8<<10), "peak RSS before %d KiB", peakBefore)
		hc := &infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-the-attack"},
			Spec: infrav1.HarvesterClusterSpec{
				IdentitySecret: infrav1.SecretReference{Name: "none"}, TargetNamespace: "default",
				ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
			},
		}
		Expect(mgmt().Create(ctx, hc, client.DryRunAll)).To(Succeed())
	})
})

// peakRSS is a process's peak resident memory (VmHWM) in KiB.
func peakRSS(pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			Expect(err).NotTo(HaveOccurred())
			return kib
		}
	}
	Fail("no VmHWM in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}
