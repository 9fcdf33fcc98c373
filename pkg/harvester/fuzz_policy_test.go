package harvester

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
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

// FuzzBuildUserData merges arbitrary bootstrap data. Properties: it never panics; merged
// cloud-config keeps the bootstrap data's own commands and the provider's guest agent, and
// stays cloud-config; a shell script is carried whole; Ignition is refused.
func FuzzBuildUserData(f *testing.F) {
	f.Add([]byte("#cloud-config\nruncmd:\n- echo hi\n"), "cloud-config", "ssh-ed25519 AAAA ops")
	f.Add([]byte("## template: jinja\n#cloud-config\nwrite_files:\n- path: /x\n  content: '{{ ds.meta_data.local_hostname }}'\n"), "", "")
	f.Add([]byte("#!/bin/sh\necho join\n"), "", "ssh-rsa AAAA")
	f.Add([]byte(`{"ignition": {"version": "3.4.0"}}`), "ignition", "")
	f.Add([]byte("#cloud-config\nruncmd: not-a-list\npackages: {a: b}\n"), "", "")
	f.Fuzz(func(t *testing.T, data []byte, format, key string) {
		keys := []string{}
		if key != "" {
			keys = append(keys, key)
		}
		out, got, err := BuildUserData(UserDataInput{Bootstrap: data, BootstrapFormat: format, SSHPublicKeys: keys})
		switch got {
		case FormatIgnition:
			if !errors.Is(err, ErrUnsupportedBootstrapFormat) {
				t.Fatalf("Ignition not refused: %v", err)
			}
		case FormatCloudConfig:
			if err != nil {
				return // bootstrap data that is not YAML is refused, not mangled
			}
			_, body := splitTemplateHeader(out)
			if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("#cloud-config")) {
				t.Fatalf("merged data is no longer cloud-config:\n%s", out)
			}
			var merged map[string]any
			if err := yaml.Unmarshal(body, &merged); err != nil {
				t.Fatalf("merged data does not parse: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), guestAgentCommand) {
				t.Fatalf("guest agent missing:\n%s", out)
			}
		case FormatShellScript:
			if err == nil && !bytes.Contains(out, bytes.TrimSpace(data)) {
				t.Fatalf("the script is not carried whole")
			}
		default:
			if err != nil || !bytes.Equal(out, data) {
				t.Fatalf("unknown format not passed through: %v", err)
			}
		}
	})
}

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
		out, err := KubeconfigPolicy{}.Sanitize(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidKubeconfig) {
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
