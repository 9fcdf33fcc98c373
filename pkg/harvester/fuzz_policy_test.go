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
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// FuzzGuestKubeconfig feeds arbitrary guest kubeconfigs (a tenant writes `<cluster>-kubeconfig`)
// to Sanitize. Properties: it never panics; a refusal wraps ErrInvalidKubeconfig and never quotes
// the input's secret-looking values; what it admits, client-go's own loader (which CAPI's
// ClusterCache uses) turns into a configuration that reads no file, runs no program, uses no
// proxy and has an https server.
func FuzzGuestKubeconfig(f *testing.F) {
	f.Add(kubeconfigWith(nil))
	for _, edit := range []string{
		"tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
		"exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}",
		"auth-provider: {name: gcp}",
		"client-certificate: /etc/cert",
	} {
		f.Add(bytes.Replace(kubeconfigWith(nil), []byte("token: inline-token"), []byte(edit), 1))
	}
	f.Add([]byte("{\"apiVersion\":\"v1\",\"clusters\":[{\"name\":\"h\",\"cluster\":{\"server\":\"https://h\"}}],\"users\":[{\"name\":\"u\",\"user\":{\"tokenFile\":\"/x\"}}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := transport.KubeconfigPolicy{}.Sanitize(data)
		if err != nil {
			if !errors.Is(err, transport.ErrInvalidKubeconfig) {
				t.Fatalf("refusal does not wrap ErrInvalidKubeconfig: %v", err)
			}
			if strings.Contains(err.Error(), secretValue) {
				t.Fatalf("refusal quotes the input: %v", err)
			}
			return
		}
		rc, err := clientcmd.RESTConfigFromKubeConfig(out)
		if err != nil {
			t.Fatalf("client-go cannot read what Sanitize wrote: %v", err)
		}
		if rc.BearerTokenFile != "" || rc.ExecProvider != nil || rc.AuthProvider != nil ||
			rc.CAFile != "" || rc.CertFile != "" || rc.KeyFile != "" || rc.Proxy != nil || rc.Insecure {
			t.Fatalf("admitted a configuration that reads files, runs programs, proxies or skips TLS: %+v", rc)
		}
		if !strings.HasPrefix(rc.Host, "https://") {
			t.Fatalf("admitted server %q", rc.Host)
		}
	})
}
