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

package webhookguard

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA is a CA that signs certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate the CA signed, for a client or (with ips) a server.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage, ips ...net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// With a client CA, the admission paths serve only a client whose certificate that CA signed (the
// API server, as its admission configuration presents it), and refuse anyone else before the
// body is read or a place taken; the Runtime SDK's hooks, whose client has no certificate, are
// still served; a certificate of another CA fails the handshake.
func TestAdmissionPathsServeOnlyTheClientCAsCertificates(t *testing.T) {
	apiserverCA, otherCA := newTestCA(t, "apiserver-webhook-clients"), newTestCA(t, "someone-else")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, apiserverCA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	clientCA, err := ClientCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	options := DefaultOptions("/hooks/")
	options.MaxInFlight = 1
	options.RequireClientCert, options.WithoutClientCert = true, []string{"/hooks/"}
	rec := &recorder{handlers: map[string]http.Handler{}}
	guard := Wrap(rec, options)
	served := make(chan string, 10)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served <- r.URL.Path })
	guard.Register(defaultPath, ok)
	guard.Register("/hooks/can-update-machine", ok)
	mux := http.NewServeMux()
	for path, h := range rec.handlers {
		mux.Handle(path, h)
	}

	server := httptest.NewUnstartedServer(mux)
	serverCA := newTestCA(t, "serving")
	server.TLS = &tls.Config{MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{serverCA.issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))}}
	clientCA(server.TLS)
	server.StartTLS()
	defer server.Close()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(serverCA.pem)
	post := func(path string, cert *tls.Certificate) (int, error) {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			// Sent whatever CAs the server names (Go's client would otherwise send none that
			// another CA signed).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Post(server.URL+path, "application/json", bytes.NewReader(review(t, 0)))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}

	if code, err := post(defaultPath, nil); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("an admission path without a client certificate: status %d, %v; want 401", code, err)
	}
	// A body that would be refused for its shape is refused for its peer first.
	if code, err := post(defaultPath+"?x", nil); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("status %d, %v; want 401", code, err)
	}
	apiserver := apiserverCA.issue(t, "kube-apiserver", x509.ExtKeyUsageClientAuth)
	if code, err := post(defaultPath, &apiserver); err != nil || code != http.StatusOK {
		t.Fatalf("an admission path with the API server's certificate: status %d, %v; want 200", code, err)
	}
	if got := <-served; got != defaultPath {
		t.Fatalf("served %s", got)
	}
	if code, err := post("/hooks/can-update-machine", nil); err != nil || code != http.StatusOK {
		t.Fatalf("a hook path without a client certificate: status %d, %v; want 200", code, err)
	}
	<-served
	other := otherCA.issue(t, "kube-apiserver", x509.ExtKeyUsageClientAuth)
	if code, err := post(defaultPath, &other); err == nil {
		t.Fatalf("a certificate of another CA passed the handshake (status %d)", code)
	}
	if len(served) != 0 {
		t.Fatalf("%d more requests reached a handler", len(served))
	}

	if _, err := ClientCA(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
	empty := filepath.Join(t.TempDir(), "empty.crt")
	if err := os.WriteFile(empty, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ClientCA(empty); err == nil {
		t.Fatal("a CA file without a certificate was accepted")
	}
}
