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
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// keyPair is the certificate and key of c as a TLS client or server presents them.
func keyPair(t *testing.T, c *testenv.ServingCertificate) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// With a client CA, the admission paths serve only a client whose certificate that CA signed (the
// API server, as its admission configuration presents it), and refuse anyone else before the
// body is read or a place taken; the Runtime SDK's hooks, whose client has no certificate, are
// still served; a certificate of another CA fails the handshake.
func TestAdmissionPathsServeOnlyTheClientCAsCertificates(t *testing.T) {
	apiserver, err := testenv.NewClientCertificate("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testenv.NewClientCertificate("kube-apiserver") // another CA's
	if err != nil {
		t.Fatal(err)
	}
	serving, err := testenv.NewServingCertificate("127.0.0.1", nil, net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, apiserver.CA, 0o600); err != nil {
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
	server.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{keyPair(t, serving)}}
	clientCA(server.TLS)
	server.StartTLS()
	defer server.Close()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(serving.CA)
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
	apiserverPair := keyPair(t, apiserver)
	if code, err := post(defaultPath, &apiserverPair); err != nil || code != http.StatusOK {
		t.Fatalf("an admission path with the API server's certificate: status %d, %v; want 200", code, err)
	}
	if got := <-served; got != defaultPath {
		t.Fatalf("served %s", got)
	}
	if code, err := post("/hooks/can-update-machine", nil); err != nil || code != http.StatusOK {
		t.Fatalf("a hook path without a client certificate: status %d, %v; want 200", code, err)
	}
	<-served
	otherPair := keyPair(t, other)
	if code, err := post(defaultPath, &otherPair); err == nil {
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
