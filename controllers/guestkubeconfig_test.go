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

package controllers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	kcfg "sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

func guestKubeconfigSecret(t *testing.T, user *clientcmdapi.AuthInfo) *corev1.Secret {
	t.Helper()
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"guest": {Server: "https://guest.example:6443", CertificateAuthorityData: []byte("ca")}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"tenant": user},
		Contexts:       map[string]*clientcmdapi.Context{"guest": {Cluster: "guest", AuthInfo: "tenant"}},
		CurrentContext: "guest",
	})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "prod-kubeconfig"},
		Data:       map[string][]byte{"value": data},
	}
}

// CAPI's ClusterCache reads a guest's kubeconfig with kcfg.FromSecret through the reader the
// manager gives it: a hostile kubeconfig never reaches it, an inline one reaches it written anew.
func TestGuestKubeconfigReaderRefusesWhatTheIdentityPolicyRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		user  *clientcmdapi.AuthInfo
		field string
	}{
		{"the manager's own token by file", &clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "users[tenant].user.tokenFile"},
		{"a program", &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1"}}, "users[tenant].user.exec"},
		{"an auth provider", &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc"}}, "users[tenant].user.auth-provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			r := &guestKubeconfigReader{
				Reader:   fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(guestKubeconfigSecret(t, tc.user)).Build(),
				Recorder: recorder,
			}
			_, err := kcfg.FromSecret(ctx, r, client.ObjectKey{Namespace: "tenant", Name: "prod"})
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("FromSecret: %v; want a refusal naming %s", err, tc.field)
			}
			select {
			case e := <-recorder.Events:
				if !strings.Contains(e, GuestKubeconfigRefusedReason) || !strings.Contains(e, tc.field) || strings.Contains(e, "/var/run") {
					t.Errorf("event %q: want the reason and the field, never the value", e)
				}
			default:
				t.Error("no event for the refused kubeconfig")
			}
		})
	}

	t.Run("inline credentials", func(t *testing.T) {
		r := &guestKubeconfigReader{Reader: fake.NewClientBuilder().WithScheme(scheme.Scheme).
			WithObjects(guestKubeconfigSecret(t, &clientcmdapi.AuthInfo{Token: "guest-token", Impersonate: "someone"})).Build()}
		data, err := kcfg.FromSecret(ctx, r, client.ObjectKey{Namespace: "tenant", Name: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Host != "https://guest.example:6443" || rc.BearerToken != "guest-token" || rc.Impersonate.UserName != "" {
			t.Errorf("rest config %+v: want the guest's server and token, nothing else", rc)
		}
	})

	t.Run("the admin's flags", func(t *testing.T) {
		s := guestKubeconfigSecret(t, &clientcmdapi.AuthInfo{Token: "guest-token"})
		cfg, _ := clientcmd.Load(s.Data["value"])
		cfg.Clusters["guest"].ProxyURL = "http://proxy.internal:3128"
		s.Data["value"], _ = clientcmd.Write(*cfg)
		reader := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(s).Build()
		if _, err := kcfg.FromSecret(ctx, &guestKubeconfigReader{Reader: reader}, client.ObjectKey{Namespace: "tenant", Name: "prod"}); err == nil {
			t.Error("a proxy is admitted without --allow-kubeconfig-proxy-url")
		}
		allowed := &guestKubeconfigReader{Reader: reader, Policy: transport.KubeconfigPolicy{AllowProxyURL: true}}
		if _, err := kcfg.FromSecret(ctx, allowed, client.ObjectKey{Namespace: "tenant", Name: "prod"}); err != nil {
			t.Errorf("a proxy is refused with --allow-kubeconfig-proxy-url: %v", err)
		}
	})
}

func TestGuestKubeconfigReaderListsNothing(t *testing.T) {
	r := &guestKubeconfigReader{Reader: fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()}
	if err := r.List(context.Background(), &corev1.SecretList{}); err == nil {
		t.Error("List handed kubeconfig Secrets on unchecked")
	}
}
