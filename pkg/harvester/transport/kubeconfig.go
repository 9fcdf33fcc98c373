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
	"fmt"
	"net/http"
	"net/url"
	"sort"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigPolicy is what the manager accepts in a kubeconfig a user supplies (an identity
// Secret). Such a kubeconfig is untrusted input: client-go would read any file it names (the
// manager's own ServiceAccount token, say, and send it to the kubeconfig's server), run any
// program it names (exec, auth providers) and connect through any proxy. The policy admits
// inline credentials only, and builds the client configuration from the admitted fields alone.
//
// A guest's `<cluster>-kubeconfig` Secret in the management cluster is such input too: it lives
// in the tenant's namespace, and CAPI's ClusterCache, which the manager runs, would hand it to
// client-go as it is. The manager reads it through Sanitize.
//
// The kubeconfig the provider writes for guests (GuestKubeconfig, with a tokenFile) is not a
// user's and is not read through this policy.
type KubeconfigPolicy struct {
	// AllowProxyURL admits clusters[].cluster.proxy-url (a manager flag turns it on).
	AllowProxyURL bool
	// AllowInsecureSkipTLSVerify admits clusters[].cluster.insecure-skip-tls-verify (a manager
	// flag turns it on).
	AllowInsecureSkipTLSVerify bool
}

// KubeconfigError is a kubeconfig refused by the policy or unreadable. Field names the refused
// field (e.g. `users[admin].user.tokenFile`); the value is never quoted: it may be a secret.
type KubeconfigError struct {
	Field  string
	Reason string
}

func (e *KubeconfigError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", ErrInvalidKubeconfig, e.Reason)
	}
	return fmt.Sprintf("%s: %s %s", ErrInvalidKubeconfig, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidKubeconfig) true.
func (e *KubeconfigError) Unwrap() error { return ErrInvalidKubeconfig }

// RESTConfig checks a user's kubeconfig against the policy and returns the client configuration
// of its current context, built from the admitted fields only. Every cluster and user entry is
// checked, used by the current context or not: a refused form anywhere is refused.
func (p KubeconfigPolicy) RESTConfig(data []byte) (*rest.Config, error) {
	kctx, cluster, user, err := p.admit(data)
	if err != nil {
		return nil, err
	}
	rc := &rest.Config{
		Host: cluster.Server,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   cluster.InsecureSkipTLSVerify,
			ServerName: cluster.TLSServerName,
			CAData:     cluster.CertificateAuthorityData,
			CertData:   user.ClientCertificateData,
			KeyData:    user.ClientKeyData,
		},
		BearerToken: user.Token,
		Username:    user.Username,
		Password:    user.Password,
		Impersonate: rest.ImpersonationConfig{
			UserName: user.Impersonate, UID: user.ImpersonateUID, Groups: user.ImpersonateGroups, Extra: user.ImpersonateUserExtra,
		},
		DisableCompression: cluster.DisableCompression,
	}
	if cluster.ProxyURL != "" {
		proxy, err := url.Parse(cluster.ProxyURL)
		if err != nil {
			return nil, &KubeconfigError{Field: fmt.Sprintf("clusters[%s].cluster.proxy-url", kctx.Cluster), Reason: "is not a URL"}
		}
		rc.Proxy = func(*http.Request) (*url.URL, error) { return proxy, nil }
	}
	return rc, nil
}

// Sanitize checks a kubeconfig against the policy and writes it anew with only the current
// context and only the fields the policy admits (server, certificate-authority-data,
// tls-server-name, client-certificate-data, client-key-data, token, basic credentials, and
// proxy-url or insecure-skip-tls-verify where the flags allow them). What it returns is safe to
// give to code that reads kubeconfigs with client-go's loader, such as CAPI's ClusterCache.
func (p KubeconfigPolicy) Sanitize(data []byte) ([]byte, error) {
	kctx, cluster, user, err := p.admit(data)
	if err != nil {
		return nil, err
	}
	out := clientcmdapi.NewConfig()
	c := &clientcmdapi.Cluster{
		Server:                   cluster.Server,
		TLSServerName:            cluster.TLSServerName,
		CertificateAuthorityData: cluster.CertificateAuthorityData,
		InsecureSkipTLSVerify:    cluster.InsecureSkipTLSVerify,
		ProxyURL:                 cluster.ProxyURL,
		DisableCompression:       cluster.DisableCompression,
	}
	if c.ProxyURL != "" {
		if _, err := url.Parse(c.ProxyURL); err != nil {
			return nil, &KubeconfigError{Field: fmt.Sprintf("clusters[%s].cluster.proxy-url", kctx.Cluster), Reason: "is not a URL"}
		}
	}
	out.Clusters["cluster"] = c
	out.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: user.ClientCertificateData,
		ClientKeyData:         user.ClientKeyData,
		Token:                 user.Token,
		Username:              user.Username,
		Password:              user.Password,
	}
	out.Contexts["context"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	out.CurrentContext = "context"
	written, err := clientcmd.Write(*out)
	if err != nil {
		return nil, &KubeconfigError{Reason: "could not be written anew"}
	}
	return written, nil
}

// admit parses a kubeconfig, checks every entry against the policy and returns the current
// context with its cluster and user.
func (p KubeconfigPolicy) admit(data []byte) (*clientcmdapi.Context, *clientcmdapi.Cluster, *clientcmdapi.AuthInfo, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, nil, nil, &KubeconfigError{Reason: kubeconfigError(err)}
	}
	if err := p.check(cfg); err != nil {
		return nil, nil, nil, err
	}
	return current(cfg)
}

// current returns the current context with its cluster and user.
func current(cfg *clientcmdapi.Config) (*clientcmdapi.Context, *clientcmdapi.Cluster, *clientcmdapi.AuthInfo, error) {
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if ctxName == "" || !ok || kctx == nil {
		return nil, nil, nil, &KubeconfigError{Field: "current-context", Reason: "must name one of the kubeconfig's contexts"}
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return nil, nil, nil, &KubeconfigError{Field: fmt.Sprintf("contexts[%s].context.cluster", ctxName), Reason: "names no cluster of the kubeconfig"}
	}
	user, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok || user == nil {
		return nil, nil, nil, &KubeconfigError{Field: fmt.Sprintf("contexts[%s].context.user", ctxName), Reason: "names no user of the kubeconfig"}
	}
	return kctx, cluster, user, nil
}

// check refuses every form the policy does not admit, naming the first refused field (in a
// stable order, so a condition does not flap).
func (p KubeconfigPolicy) check(cfg *clientcmdapi.Config) error {
	for _, name := range sortedKeys(cfg.AuthInfos) {
		u := cfg.AuthInfos[name]
		if u == nil {
			continue
		}
		field := func(f string) string { return fmt.Sprintf("users[%s].user.%s", name, f) }
		switch {
		case u.Exec != nil:
			return &KubeconfigError{Field: field("exec"), Reason: "is refused: the manager runs no program a kubeconfig names; use an inline token or client certificate"}
		case u.AuthProvider != nil:
			return &KubeconfigError{Field: field("auth-provider"), Reason: "is refused: use an inline token or client certificate"}
		case u.TokenFile != "":
			return &KubeconfigError{Field: field("tokenFile"), Reason: "is refused: the manager reads no file a kubeconfig names; put the token inline (token)"}
		case u.ClientCertificate != "":
			return &KubeconfigError{Field: field("client-certificate"), Reason: "is refused: the manager reads no file a kubeconfig names; use client-certificate-data"}
		case u.ClientKey != "":
			return &KubeconfigError{Field: field("client-key"), Reason: "is refused: the manager reads no file a kubeconfig names; use client-key-data"}
		}
	}
	if len(cfg.Clusters) == 0 {
		return &KubeconfigError{Field: "clusters", Reason: "is empty: name Harvester's API server"}
	}
	for _, name := range sortedKeys(cfg.Clusters) {
		c := cfg.Clusters[name]
		if c == nil {
			continue
		}
		field := func(f string) string { return fmt.Sprintf("clusters[%s].cluster.%s", name, f) }
		switch {
		case c.CertificateAuthority != "":
			return &KubeconfigError{Field: field("certificate-authority"), Reason: "is refused: the manager reads no file a kubeconfig names; use certificate-authority-data"}
		case c.ProxyURL != "" && !p.AllowProxyURL:
			return &KubeconfigError{Field: field("proxy-url"), Reason: "is refused: this manager does not allow proxies in identity kubeconfigs (its --allow-kubeconfig-proxy-url flag)"}
		case c.InsecureSkipTLSVerify && !p.AllowInsecureSkipTLSVerify:
			return &KubeconfigError{Field: field("insecure-skip-tls-verify"), Reason: "is refused: this manager verifies Harvester's certificate (its --allow-insecure-kubeconfig flag); use certificate-authority-data"}
		}
		u, err := url.Parse(c.Server)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return &KubeconfigError{Field: field("server"), Reason: "must be an https URL with a host (e.g. https://192.168.0.10:6443)"}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
