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
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// ClientCA reads a PEM bundle of the CAs whose client certificates the webhook port accepts (the
// CA of the certificate the API server presents to admission webhooks, from its
// --admission-control-config-file) and returns the TLS option that asks a client for its
// certificate and verifies it when given. Whether a path requires one is the guard's
// (Options.RequireClientCert): the Runtime SDK's client presents none, so its hooks cannot.
func ClientCA(file string) (func(*tls.Config), error) {
	data, err := os.ReadFile(file) //nolint:gosec // the CA file the manager's flag names
	if err != nil {
		return nil, fmt.Errorf("reading the webhook client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("the webhook client CA file holds no PEM certificate")
	}
	return func(c *tls.Config) {
		c.ClientCAs = pool
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}, nil
}

// clientVerified tells whether the request came with a client certificate the TLS handshake
// verified against the client CAs.
func clientVerified(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// needsClientCert tells whether path requires a verified client certificate.
func (s *Server) needsClientCert(path string) bool {
	if !s.options.RequireClientCert {
		return false
	}
	for _, prefix := range s.options.WithoutClientCert {
		if strings.HasPrefix(path, prefix) {
			return false
		}
	}
	return true
}
