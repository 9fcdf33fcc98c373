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
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// SharedNamespace is where the simulated Harvester keeps its images, key pairs and VM networks
// (as many real ones keep them in `default`).
const SharedNamespace = "default"

// LendIdentity does what the platform admin does once per tenant before the cluster templates
// can be used (docs/harvester-identity.md): the provider's Harvester kubeconfig in a Secret of the
// provider's namespace, and a HarvesterClusterIdentity of that name allowing management
// namespace namespace, Harvester namespace target and the shared namespace. It is idempotent.
func (b *Bed) LendIdentity(ctx context.Context, name, namespace, target string) error {
	return b.lendIdentity(ctx, b.Management.Client, b.Provider, name, namespace, target)
}

// LendIdentityIn is LendIdentity in a further management cluster.
func (b *Bed) LendIdentityIn(ctx context.Context, m *Management, name, namespace, target string) error {
	return b.lendIdentity(ctx, m.Env.Client, m.Provider, name, namespace, target)
}

func (b *Bed) lendIdentity(ctx context.Context, c client.Client, provider *Provider, name, namespace, target string) error {
	if provider == nil {
		return errors.New("lending an identity needs the provider installed")
	}
	kubeconfig, err := b.Harvester.ProviderKubeconfig(ctx)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: provider.Namespace, Name: "identity-" + name},
		Data:       map[string][]byte{infrav1.IdentitySecretKey: kubeconfig},
	}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	identity := &infrav1.HarvesterClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: infrav1.HarvesterClusterIdentitySpec{
			SecretName:        secret.Name,
			AllowedNamespaces: &infrav1.AllowedNamespaces{NamespaceList: []string{namespace}},
			TargetNamespaces:  []string{target},
			SharedNamespaces:  []string{SharedNamespace},
		},
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, identity))
}
