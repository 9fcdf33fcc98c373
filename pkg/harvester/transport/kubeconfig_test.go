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
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const secretValue = "s3cr3t-value-never-shown"

// kubeconfigWith is an otherwise admissible kubeconfig changed by edit.
func kubeconfigWith(edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) []byte {
	cluster := &clientcmdapi.Cluster{Server: "https://harvester.example:6443", CertificateAuthorityData: []byte("ca")}
	user := &clientcmdapi.AuthInfo{Token: "inline-token"}
	if edit != nil {
		edit(cluster, user)
	}
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"h": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": user},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "h", AuthInfo: "u"}},
		CurrentContext: "c",
	})
	if err != nil {
		panic(err)
	}
	return data
}

func TestKubeconfigPolicyRefusesWhatIsNotInline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)
		field string
	}{
		{"token file (the manager's own token, say)", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/" + secretValue
		}, "users[u].user.tokenFile"},
		{"exec plugin", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/" + secretValue, APIVersion: "client.authentication.k8s.io/v1"}
		}, "users[u].user.exec"},
		{"auth provider", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": secretValue}}
		}, "users[u].user.auth-provider"},
		{"client certificate file", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificate = "/etc/" + secretValue
		}, "users[u].user.client-certificate"},
		{"client key file", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientKey = "/etc/" + secretValue
		}, "users[u].user.client-key"},
		{"CA file", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthority = "/etc/" + secretValue
		}, "clusters[h].cluster.certificate-authority"},
		{"proxy", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.ProxyURL = "http://" + secretValue + ":3128"
		}, "clusters[h].cluster.proxy-url"},
		{"no TLS verification", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
		}, "clusters[h].cluster.insecure-skip-tls-verify"},
		{"plain http", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = "http://" + secretValue + ":8080"
		}, "clusters[h].cluster.server"},
		{"no server (client-go would pick localhost)", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = ""
		}, "clusters[h].cluster.server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := KubeconfigPolicy{}.RESTConfig(kubeconfigWith(tc.edit))
			g.Expect(errors.Is(err, ErrInvalidKubeconfig)).To(BeTrue(), "%v", err)
			var kerr *KubeconfigError
			g.Expect(errors.As(err, &kerr)).To(BeTrue())
			g.Expect(kerr.Field).To(Equal(tc.field))
			g.Expect(err.Error()).To(ContainSubstring(tc.field))
			g.Expect(err.Error()).NotTo(ContainSubstring(secretValue), "the value is never quoted")
		})
	}
}

// A refused form anywhere in the kubeconfig is refused, not only in the current context.
func TestKubeconfigPolicyChecksEveryEntry(t *testing.T) {
	g := NewWithT(t)
	cfg, err := clientcmd.Load(kubeconfigWith(nil))
	g.Expect(err).NotTo(HaveOccurred())
	cfg.AuthInfos["other"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh"}}
	data, err := clientcmd.Write(*cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = KubeconfigPolicy{}.RESTConfig(data)
	g.Expect(err).To(MatchError(ContainSubstring("users[other].user.exec")))
}

func TestKubeconfigPolicyAdmitsInlineCredentials(t *testing.T) {
	g := NewWithT(t)
	rc, err := KubeconfigPolicy{}.RESTConfig(kubeconfigWith(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.ClientCertificateData, u.ClientKeyData = []byte("cert"), []byte("key")
	}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Host).To(Equal("https://harvester.example:6443"))
	g.Expect(rc.BearerToken).To(Equal("inline-token"))
	g.Expect(rc.BearerTokenFile).To(BeEmpty())
	g.Expect(rc.ExecProvider).To(BeNil())
	g.Expect(rc.AuthProvider).To(BeNil())
	g.Expect(rc.CAData).To(Equal([]byte("ca")))
	g.Expect(rc.CertData).To(Equal([]byte("cert")))
	g.Expect(rc.Proxy).To(BeNil())

	// The flags a manager may set.
	withProxy := kubeconfigWith(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.ProxyURL = "http://proxy:3128" })
	_, err = KubeconfigPolicy{}.RESTConfig(withProxy)
	g.Expect(err).To(HaveOccurred())
	rc, err = KubeconfigPolicy{AllowProxyURL: true}.RESTConfig(withProxy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Proxy).NotTo(BeNil())
	insecure := kubeconfigWith(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
	})
	rc, err = KubeconfigPolicy{AllowInsecureSkipTLSVerify: true}.RESTConfig(insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Insecure).To(BeTrue())
}

func TestKubeconfigPolicyNamesMissingParts(t *testing.T) {
	g := NewWithT(t)
	_, err := KubeconfigPolicy{}.RESTConfig([]byte("apiVersion: v1\nkind: Config\n"))
	g.Expect(err).To(MatchError(ContainSubstring("clusters")))
	cfg, _ := clientcmd.Load(kubeconfigWith(nil))
	cfg.CurrentContext = "elsewhere"
	data, _ := clientcmd.Write(*cfg)
	_, err = KubeconfigPolicy{}.RESTConfig(data)
	g.Expect(err).To(MatchError(ContainSubstring("current-context")))
	_, err = KubeconfigPolicy{}.RESTConfig([]byte("users: " + secretValue))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring(secretValue))
}

// A guest's kubeconfig Secret is read through Sanitize: the same refusals as RESTConfig, and what
// it admits comes back holding the current context's admitted fields only.
func TestSanitizeRefusesWhatRESTConfigRefuses(t *testing.T) {
	for _, edit := range []func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo){
		func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		},
		func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1"}
		},
		func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		},
		func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientKey = "/etc/key" },
		func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthority = "/etc/ca" },
		func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.ProxyURL = "http://proxy:3128" },
		func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.InsecureSkipTLSVerify = true },
		func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "http://guest:6443" },
	} {
		data := kubeconfigWith(edit)
		_, want := KubeconfigPolicy{}.RESTConfig(data)
		_, got := KubeconfigPolicy{}.Sanitize(data)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("Sanitize: %v; RESTConfig: %v; want the same refusal", got, want)
		}
	}
}

func TestSanitizeKeepsOnlyTheAdmittedFieldsOfTheCurrentContext(t *testing.T) {
	g := NewWithT(t)
	in, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"guest": {Server: "https://guest:6443", CertificateAuthorityData: []byte("ca"), TLSServerName: "guest.internal"},
			"other": {Server: "https://other:6443"},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			"admin": {ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key"), Impersonate: "system:admin"},
			"other": {Token: "other-token"},
		},
		Contexts: map[string]*clientcmdapi.Context{
			"guest": {Cluster: "guest", AuthInfo: "admin", Namespace: "kube-system"},
			"other": {Cluster: "other", AuthInfo: "other"},
		},
		CurrentContext: "guest",
	})
	g.Expect(err).NotTo(HaveOccurred())
	out, err := KubeconfigPolicy{}.Sanitize(in)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.Load(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Clusters).To(HaveLen(1))
	g.Expect(cfg.AuthInfos).To(HaveLen(1))
	g.Expect(cfg.Contexts).To(HaveLen(1))
	g.Expect(string(out)).NotTo(ContainSubstring("other"))
	g.Expect(string(out)).NotTo(ContainSubstring("system:admin"), "impersonation is not carried over")
	rc, err := clientcmd.RESTConfigFromKubeConfig(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Host).To(Equal("https://guest:6443"))
	g.Expect(rc.ServerName).To(Equal("guest.internal"))
	g.Expect(string(rc.CAData)).To(Equal("ca"))
	g.Expect(string(rc.CertData)).To(Equal("cert"))
	g.Expect(string(rc.KeyData)).To(Equal("key"))

	// The flags admit a proxy and skipping TLS checks, and those are carried over.
	out, err = KubeconfigPolicy{AllowProxyURL: true, AllowInsecureSkipTLSVerify: true}.Sanitize(kubeconfigWith(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.ProxyURL, c.InsecureSkipTLSVerify, c.CertificateAuthorityData = "http://proxy:3128", true, nil
	}))
	g.Expect(err).NotTo(HaveOccurred())
	rc, err = clientcmd.RESTConfigFromKubeConfig(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Insecure).To(BeTrue())
	g.Expect(rc.Proxy).NotTo(BeNil())
}
