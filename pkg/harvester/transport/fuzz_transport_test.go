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
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// FuzzKubeconfigPolicy feeds arbitrary kubeconfigs to the policy. Properties: it never panics;
// what it refuses wraps ErrInvalidKubeconfig and never quotes the input's secret-looking values;
// what it admits yields a client configuration that reads no file, runs no program and has an
// https server, whatever client-go itself would have made of the same bytes.
func FuzzKubeconfigPolicy(f *testing.F) {
	f.Add(kubeconfigWith(nil))
	for _, edit := range []string{
		"tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
		"exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}",
		"auth-provider: {name: oidc}",
		"client-key: /etc/key",
	} {
		f.Add(bytes.Replace(kubeconfigWith(nil), []byte("token: inline-token"), []byte(edit), 1))
	}
	f.Add([]byte("apiVersion: v1\nclusters:\n- cluster: {server: 'https://h:6443', proxy-url: 'socks5://x'}\n  name: h\n"))
	f.Add([]byte("{\"users\": \"" + secretValue + "\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := KubeconfigPolicy{}.RESTConfig(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidKubeconfig) {
				t.Fatalf("refusal does not wrap ErrInvalidKubeconfig: %v", err)
			}
			if strings.Contains(err.Error(), secretValue) {
				t.Fatalf("refusal quotes the input: %v", err)
			}
			return
		}
		if rc.BearerTokenFile != "" || rc.ExecProvider != nil || rc.AuthProvider != nil ||
			rc.CAFile != "" || rc.CertFile != "" || rc.KeyFile != "" || rc.Proxy != nil || rc.Insecure {
			t.Fatalf("admitted a configuration that reads files, runs programs, proxies or skips TLS: %+v", rc)
		}
		if !strings.HasPrefix(rc.Host, "https://") {
			t.Fatalf("admitted server %q", rc.Host)
		}
		// Whatever the policy admits, client-go itself reads as a kubeconfig too.
		if _, err := clientcmd.Load(data); err != nil {
			t.Fatalf("admitted bytes client-go cannot load: %v", err)
		}
	})
}
