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

package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// ServingCertificate is a CA of the bed's own and a serving certificate it signed, all PEM.
type ServingCertificate struct {
	CA, CAKey, Cert, Key []byte
}

// NewServingCertificate plays cert-manager (or a webhook's own certificate generator) for a
// webhook server the bed calls at a loopback address: a fresh CA, and a certificate for dnsNames
// and ips signed by it, valid from an hour ago for a week. Keys are ECDSA P-256 in PKCS #8, which
// Go, client-go and Rancher's dynamiclistener all read.
func NewServingCertificate(commonName string, dnsNames []string, ips ...net.IP) (*ServingCertificate, error) {
	return newCertificate(commonName, x509.ExtKeyUsageServerAuth, dnsNames, ips)
}

// NewClientCertificate is a fresh CA and a client certificate of commonName it signed (the one
// an API server presents to webhooks, say), as NewServingCertificate's.
func NewClientCertificate(commonName string) (*ServingCertificate, error) {
	return newCertificate(commonName, x509.ExtKeyUsageClientAuth, nil, nil)
}

func newCertificate(commonName string, usage x509.ExtKeyUsage, dnsNames []string, ips []net.IP) (*ServingCertificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: commonName + "-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		DNSNames: dnsNames, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caKeyPEM, err := pkcs8PEM(caKey)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pkcs8PEM(key)
	if err != nil {
		return nil, err
	}
	return &ServingCertificate{
		CA:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CAKey: caKeyPEM,
		Cert:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:   keyPEM,
	}, nil
}

func pkcs8PEM(k *ecdsa.PrivateKey) ([]byte, error) {
	b, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: b}), nil
}
