package e2e

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
