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

package guest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clusterCA is a guest cluster's CA, as kubeadm finds it in /etc/kubernetes/pki: it signs the
// apiserver's serving certificate and every client certificate the apiserver accepts,
// including the admin kubeconfig KCP writes into the management cluster.
type clusterCA struct {
	certPEM []byte
	cert    *x509.Certificate
	key     crypto.Signer
}

func parseClusterCA(certPEM, keyPEM []byte) (*clusterCA, error) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("parsing the cluster CA certificate: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing the cluster CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the cluster CA key cannot sign")
	}
	return &clusterCA{certPEM: certPEM, cert: certs[0], key: signer}, nil
}

// issue signs a new certificate; it returns the certificate and its key in PEM.
func (ca *clusterCA) issue(template *x509.Certificate) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Minute)
	if template.NotAfter.IsZero() {
		template.NotAfter = time.Now().Add(24 * time.Hour)
	}
	template.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeServingFiles writes what envtest's apiserver reads from its certificate directory
// instead of making its own: a serving certificate for host signed by the cluster CA, and the
// service-account key pair kubeadm's bootstrap data carries.
func (ca *clusterCA) writeServingFiles(dir, host string, saKey, saPub []byte) error {
	cert, key, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP(host), net.ParseIP("127.0.0.1")},
		// kubeadm's and RKE2's serving certificates last a year; KCP reads the expiry.
		NotAfter: time.Now().Add(365 * 24 * time.Hour),
	})
	if err != nil {
		return fmt.Errorf("issuing the serving certificate: %w", err)
	}
	for name, data := range map[string][]byte{
		"apiserver.crt": cert, "apiserver.key": key,
		// envtest's names for the service-account signing key pair.
		"sa-signer.crt": saPub, "sa-signer.key": saKey,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// clusterCAAuthn is an envtest authenticator that trusts client certificates of the cluster CA,
// as a kubeadm control plane does, and gives envtest's own admin user one of those.
type clusterCAAuthn struct {
	ca     *clusterCA
	caFile string
}

var _ envtest.Authn = &clusterCAAuthn{}

func (a *clusterCAAuthn) Configure(workDir string, args *envtest.Arguments) error {
	a.caFile = filepath.Join(workDir, "client-ca.crt")
	args.Set("client-ca-file", a.caFile)
	return nil
}

func (a *clusterCAAuthn) Start() error { return os.WriteFile(a.caFile, a.ca.certPEM, 0o600) }

func (a *clusterCAAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	cert, key, err := a.ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user.Name, Organization: user.Groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("issuing a client certificate for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = cert, key
	return cfg, nil
}

func (a *clusterCAAuthn) Stop() error { return nil }
