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

package harvester

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

const secretValue = "s3cr3t-value-never-shown"

// kubeconfigWith is an otherwise admissible kubeconfig changed by edit.

// What a failed connection says: the category, never what the other end sent.
func TestConnectionErrorsSayWhatFailedWithoutEchoingTheServer(t *testing.T) {
	body := "internal-service-" + secretValue
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, body)
	}))
	defer plain.Close()
	html := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprint(w, "<html>"+body+"</html>")
	}))
	defer html.Close()
	otherCA := httptest.NewTLSServer(http.NotFoundHandler())
	defer otherCA.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()
	caOf := func(s *httptest.Server) []byte {
		return pemCert(s.Certificate().Raw)
	}

	for _, tc := range []struct {
		name, server string
		ca           []byte
		want         string
	}{
		{"refused", "https://" + closedAddr, nil, "refused the connection"},
		{"no such name", "https://harvester.invalid:6443", nil, "does not resolve"},
		{"plain HTTP behind https", strings.Replace(plain.URL, "http://", "https://", 1), nil, "does not speak TLS"},
		{"another CA", otherCA.URL, nil, "not signed by the kubeconfig's certificate-authority-data"},
		{"not a Kubernetes API", html.URL, caOf(html), "answered HTTP 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ca := tc.ca
			if ca == nil {
				ca = unrelatedCA(t)
			}
			rc, err := transport.KubeconfigPolicy{}.RESTConfig(kubeconfigWith(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
				c.Server, c.CertificateAuthorityData = tc.server, ca
			}))
			g.Expect(err).NotTo(HaveOccurred())
			rc.Timeout = 10 * time.Second
			scheme, err := guestcloud.NewScheme()
			g.Expect(err).NotTo(HaveOccurred())
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(harvesterv1.SchemeGroupVersion.WithKind("Setting"), meta.RESTScopeRoot)
			c, err := client.New(rc, client.Options{Scheme: scheme, Mapper: mapper})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = CheckConnection(context.Background(), c, "guests")
			ce, ok := transport.AsError(err)
			g.Expect(ok).To(BeTrue(), "%v", err)
			g.Expect(ce.Kind).To(Equal(transport.KindUnreachable))
			g.Expect(ce.Reason).To(Equal(infrav1.HarvesterUnreachableReason))
			g.Expect(ce.Message).To(ContainSubstring(tc.want))
			g.Expect(ce.Message).NotTo(ContainSubstring(secretValue))
		})
	}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// unrelatedCA is a CA that signed none of the test servers' certificates.
func unrelatedCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "unrelated"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pemCert(der)
}

// kubeconfigWith is an otherwise admissible kubeconfig changed by edit.
func kubeconfigWith(edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) []byte {
	cluster := &clientcmdapi.Cluster{Server: "https://harvester.example:6443", CertificateAuthorityData: []byte("ca")}
	user := &clientcmdapi.AuthInfo{Token: "inline-token"}
	if edit != nil {
		edit(cluster, user)
	}
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"h": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": user},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "h", AuthInfo: "u"}},
		CurrentContext: "c",
	})
	if err != nil {
		panic(err)
	}
	return data
}
