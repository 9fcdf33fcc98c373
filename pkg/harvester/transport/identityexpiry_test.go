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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func expiryKubeconfig(user string) []byte {
	return []byte(`apiVersion: v1
kind: Config
clusters:
- name: h
  cluster: {server: "https://harvester.example:6443"}
contexts:
- name: c
  context: {cluster: h, user: u}
current-context: c
users:
- name: u
  user: ` + user + "\n")
}

func jwt(payload string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString([]byte(payload)) + ".c2lnbmF0dXJl"
}

func TestCredentialExpiry(t *testing.T) {
	g := NewWithT(t)
	exp := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	got, ok := CredentialExpiry(expiryKubeconfig(fmt.Sprintf(`{token: %q}`, jwt(fmt.Sprintf(`{"sub":"system:serviceaccount:a:b","exp":%d}`, exp.Unix())))))
	g.Expect(ok).To(BeTrue())
	g.Expect(got.Equal(exp)).To(BeTrue(), "%s", got)

	for name, user := range map[string]string{
		"legacy ServiceAccount token, no exp": fmt.Sprintf(`{token: %q}`, jwt(`{"sub":"system:serviceaccount:a:b"}`)),
		"Rancher token, no JWT":               `{token: "kubeconfig-u-abc:0123456789abcdef"}`,
		"not base64":                          `{token: "a.!!!.c"}`,
		"no credential":                       `{}`,
	} {
		_, ok := CredentialExpiry(expiryKubeconfig(user))
		g.Expect(ok).To(BeFalse(), name)
	}
	_, ok = CredentialExpiry([]byte("not: [a kubeconfig"))
	g.Expect(ok).To(BeFalse())

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	notAfter := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capi"}, NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter,
	}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capi"}}, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	got, ok = CredentialExpiry(expiryKubeconfig(fmt.Sprintf(`{client-certificate-data: %s, client-key-data: a2V5}`, base64.StdEncoding.EncodeToString(certPEM))))
	g.Expect(ok).To(BeTrue())
	g.Expect(got.Equal(notAfter)).To(BeTrue(), "%s", got)
}
