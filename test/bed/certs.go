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

package bed

import (
	"net"
	"os"
	"path/filepath"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// writeServingCertificate plays cert-manager for a webhook server: a CA of the bed's own and a
// serving certificate for dnsNames and ip, written as tls.crt and tls.key into dir. It returns
// the CA's PEM, which the bed injects into the webhook configurations as cainjector would.
func writeServingCertificate(dir string, dnsNames []string, ip net.IP) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cert, err := testenv.NewServingCertificate("webhook", dnsNames, ip)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert.Cert, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), cert.Key, 0o600); err != nil {
		return nil, err
	}
	return cert.CA, nil
}
