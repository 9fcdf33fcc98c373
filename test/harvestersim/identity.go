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

package harvestersim

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// ProviderKubeconfig returns a kubeconfig for the restricted identity the provider documents
// (config/harvester/provider-identity.yaml), through the fault proxy: what a user stores in the
// identity Secret. Its token lasts a day, or until the ServiceAccount is deleted.
func (h *Harvester) ProviderKubeconfig(ctx context.Context) ([]byte, error) {
	return h.Kubeconfig(ctx, ProviderIdentityNamespace, ProviderIdentityName, "", providerTokenLifetime)
}

const providerTokenLifetime = 24 * time.Hour

// Kubeconfig returns a kubeconfig for a ServiceAccount of the simulated Harvester, through the
// fault proxy, with a token from the TokenRequest API. contextNamespace is the namespace of the
// kubeconfig's context (empty for none).
func (h *Harvester) Kubeconfig(ctx context.Context, namespace, serviceAccount, contextNamespace string, lifetime time.Duration) ([]byte, error) {
	return h.kubeconfigVia(ctx, h.proxy, namespace, serviceAccount, contextNamespace, lifetime)
}

func (h *Harvester) kubeconfigVia(ctx context.Context, proxy *faultProxy, namespace, serviceAccount, contextNamespace string, lifetime time.Duration) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(h.Env.Config)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for %s/%s: %w", namespace, serviceAccount, err)
	}
	return clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"harvester": {Server: proxy.URL(), CertificateAuthorityData: proxy.caPEM},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			serviceAccount: {Token: tr.Status.Token},
		},
		Contexts: map[string]*clientcmdapi.Context{
			"harvester": {Cluster: "harvester", AuthInfo: serviceAccount, Namespace: contextNamespace},
		},
		CurrentContext: "harvester",
	})
}

// APIServerURL is the https address token clients reach the simulated Harvester at (the fault
// proxy), and APIServerCA the PEM CA that signs it.
func (h *Harvester) APIServerURL() string { return h.proxy.URL() }

// APIServerCA returns the PEM CA of APIServerURL.
func (h *Harvester) APIServerCA() []byte { return h.proxy.caPEM }

// RevokeProviderIdentity deletes the provider's ServiceAccount: its tokens are refused with 401
// from then on (envtest's certificate users cannot be revoked; tokens can).
func (h *Harvester) RevokeProviderIdentity(ctx context.Context) error {
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = ProviderIdentityNamespace, ProviderIdentityName
	if err := h.Env.Client.Delete(ctx, sa); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// RestoreProviderIdentity creates the provider's ServiceAccount again and returns a kubeconfig
// with a fresh token (tokens of the old ServiceAccount stay invalid).
func (h *Harvester) RestoreProviderIdentity(ctx context.Context) ([]byte, error) {
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = ProviderIdentityNamespace, ProviderIdentityName
	if err := createIfMissing(ctx, h.Env.Client, sa); err != nil {
		return nil, err
	}
	return h.ProviderKubeconfig(ctx)
}
