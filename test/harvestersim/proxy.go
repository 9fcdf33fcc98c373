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

package harvestersim

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// faultProxy is the front door of the simulated Harvester for clients that hold a token: it
// forwards to the apiserver (which authenticates and authorises the token itself) and injects
// the API faults. Stopping it makes Harvester unreachable; starting it again brings it back on
// the same address, as a restarted apiserver would.
type faultProxy struct {
	faults  *Faults
	target  *url.URL
	backend http.RoundTripper
	tlsCert tls.Certificate
	caPEM   []byte
	addr    string

	hole *blackHole

	mu     sync.Mutex
	server *http.Server
}

func startFaultProxy(cfg *rest.Config, faults *Faults) (*faultProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the apiserver URL: %w", err)
	}
	// Trust the apiserver's CA, but carry no credentials of our own: the client's token goes
	// through untouched.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CAData) {
		return nil, errors.New("the apiserver config has no CA")
	}
	p := &faultProxy{
		faults: faults,
		target: target,
		hole:   newBlackHole(),
		// HTTP/1.1 to the apiserver: a connection per request in flight. Over one multiplexed
		// HTTP/2 connection every client of the proxy shared its fate, and a full e2e run twice
		// saw a request's answer stall there for minutes after other clients' streams.
		backend: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}, MaxIdleConnsPerHost: 64},
	}
	if p.tlsCert, p.caPEM, err = selfSignedCertificate(); err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = listener.Addr().String()
	p.serve(listener)
	return p, nil
}

// URL is the https address clients use.
func (p *faultProxy) URL() string { return "https://" + p.addr }

func (p *faultProxy) serve(listener net.Listener) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(p.target)
			r.Out.Host = p.target.Host
		},
		Transport:      p.backend,
		ModifyResponse: p.shortenTokens,
		FlushInterval:  -1, // stream watches
		// Broken backend connections during an outage or shutdown are expected here.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	server := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.handle(rp, w, r) }),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{p.tlsCert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	p.mu.Lock()
	p.server = server
	p.mu.Unlock()
	go func() { _ = server.ServeTLS(p.hole.listener(listener), "", "") }()
}

func (p *faultProxy) handle(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	resource, verb := requestAttributes(r)
	p.faults.countAgent(r.UserAgent(), resource, verb)
	latency, code := p.faults.decide(resource, verb)
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	if code != 0 {
		writeStatus(w, code, fmt.Sprintf("simulated fault on %s %s", verb, resource))
		return
	}
	rp.ServeHTTP(w, r)
}

// shortenTokens reports the granted lifetime Faults.GrantTokenLifetime asks for on TokenRequest
// answers, in the encoding the client asked for (JSON or protobuf).
func (p *faultProxy) shortenTokens(resp *http.Response) error {
	lifetime := p.faults.grantedTokenLifetime()
	r := resp.Request
	if lifetime == 0 || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/token") ||
		resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Encoding") != "" {
		return nil
	}
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	info, ok := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), strings.TrimSpace(mediaType))
	if !ok {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if tr, ok := obj.(*authenticationv1.TokenRequest); err == nil && ok {
		tr.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(lifetime))
		var buf bytes.Buffer
		if err := clientgoscheme.Codecs.EncoderForVersion(info.Serializer, authenticationv1.SchemeGroupVersion).Encode(tr, &buf); err == nil {
			body = buf.Bytes()
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// writeStatus answers like the apiserver does, with a metav1.Status body.
func writeStatus(w http.ResponseWriter, code int, message string) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     int32(code),
		Reason:   metav1.StatusReasonUnknown,
		Message:  message,
	}
	switch code {
	case http.StatusUnauthorized:
		status.Reason = metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		status.Reason = metav1.StatusReasonForbidden
	case http.StatusTooManyRequests:
		status.Reason = metav1.StatusReasonTooManyRequests
	case http.StatusServiceUnavailable:
		status.Reason = metav1.StatusReasonServiceUnavailable
	case http.StatusInternalServerError:
		status.Reason = metav1.StatusReasonInternalError
	}
	if code == http.StatusTooManyRequests {
		// As the apiserver's max-in-flight filter; client-go retries such answers itself.
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}

// stop closes the listener and every open connection, watches included.
func (p *faultProxy) stop() error {
	p.mu.Lock()
	server := p.server
	p.server = nil
	p.mu.Unlock()
	if server == nil {
		return nil
	}
	return server.Close()
}

// start listens again on the same address.
func (p *faultProxy) start() error {
	p.mu.Lock()
	running := p.server != nil
	p.mu.Unlock()
	if running {
		return nil
	}
	listener, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("listening again on %s: %w", p.addr, err)
	}
	p.serve(listener)
	return nil
}

func (p *faultProxy) close() error {
	err := p.stop()
	if t, ok := p.backend.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	return err
}

// StopAPI makes the simulated Harvester unreachable for token clients: connections are refused
// and open watches break, as when its apiserver goes down.
func (h *Harvester) StopAPI() error { return h.proxy.stop() }

// StartAPI brings the API back on the same address.
func (h *Harvester) StartAPI(context.Context) error { return h.proxy.start() }

func selfSignedCertificate() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "simulated-harvester"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}
