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
	"fmt"
	"maps"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// ProviderManifestLabel is the `cluster.x-k8s.io/provider` value clusterctl gives this
// provider's components (type infrastructure, name harvester).
const ProviderManifestLabel = "infrastructure-harvester"

// ClusterctlLabels are the labels clusterctl puts on every object of a provider it installs
// (clusterctl's repository.addCommonLabels): `clusterctl move` discovers the kinds it moves by
// them on their CRDs.
func ClusterctlLabels(manifestLabel string) map[string]string {
	return map[string]string{clusterctlv1.ClusterctlLabel: "", clusterv1.ProviderNameLabel: manifestLabel}
}

// inventoryVersion is the version the bed records for every provider: the same in every
// management cluster of the bed, so clusterctl move finds the target's providers recent enough.
const inventoryVersion = "v1.14.2"

// clusterctlProvider is a provider as clusterctl's inventory records it, and the API groups of
// the CRDs it installs (envtest installed them without clusterctl's labels).
type clusterctlProvider struct {
	name, namespace string
	kind            clusterctlv1.ProviderType
	groups          []string
}

func (p clusterctlProvider) manifestLabel() string {
	return clusterctlv1.ManifestLabel(p.name, p.kind)
}

func (p clusterctlProvider) inventory() clusterctlv1.Provider {
	entry := clusterctlv1.Provider{ProviderName: p.name, Type: string(p.kind), Version: inventoryVersion}
	entry.Name, entry.Namespace = entry.ManifestLabel(), p.namespace
	entry.Labels = ClusterctlLabels(entry.ManifestLabel())
	entry.Labels[clusterctlv1.ClusterctlCoreLabel] = clusterctlv1.ClusterctlCoreLabelInventoryValue
	return entry
}

// bedProviders are the providers a management cluster of the bed runs.
func bedProviders(kubeadm bool) []clusterctlProvider {
	providers := []clusterctlProvider{
		{name: "cluster-api", namespace: "capi-system", kind: clusterctlv1.CoreProviderType,
			groups: []string{"cluster.x-k8s.io", "addons.cluster.x-k8s.io", "ipam.cluster.x-k8s.io", "runtime.cluster.x-k8s.io"}},
		// Installed from its components by InstallProvider, labels included.
		{name: "harvester", namespace: "capi-harvester-system", kind: clusterctlv1.InfrastructureProviderType},
	}
	if kubeadm {
		providers = append(providers,
			clusterctlProvider{name: "kubeadm", namespace: "capi-kubeadm-bootstrap-system", kind: clusterctlv1.BootstrapProviderType,
				groups: []string{"bootstrap.cluster.x-k8s.io"}},
			clusterctlProvider{name: "kubeadm", namespace: "capi-kubeadm-control-plane-system", kind: clusterctlv1.ControlPlaneProviderType,
				groups: []string{"controlplane.cluster.x-k8s.io"}},
		)
	}
	return providers
}

// RecordClusterctlInstall makes a management cluster of the bed look as `clusterctl init` leaves
// one: the CRDs envtest installed for Cluster API (and the kubeadm providers) get clusterctl's
// labels, and clusterctl's inventory (its Provider CRD, installed by clusterctl's own code) lists
// each provider. The provider's own components carry the labels since InstallProvider.
func RecordClusterctlInstall(ctx context.Context, env *testenv.Environment, kubeadm bool) error {
	return recordProviders(ctx, env, bedProviders(kubeadm))
}

// recordProviders labels the providers' CRDs and lists them in clusterctl's inventory.
func recordProviders(ctx context.Context, env *testenv.Environment, providers []clusterctlProvider) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := env.Client.List(ctx, crds); err != nil {
		return err
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		for _, p := range providers {
			for _, g := range p.groups {
				if crd.Spec.Group != g {
					continue
				}
				base := crd.DeepCopy()
				if crd.Labels == nil {
					crd.Labels = map[string]string{}
				}
				maps.Copy(crd.Labels, ClusterctlLabels(p.manifestLabel()))
				if err := env.Client.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
					return fmt.Errorf("labelling CRD %s: %w", crd.Name, err)
				}
			}
		}
	}

	c, cleanup, err := clusterctlClusterClient(ctx, env)
	if err != nil {
		return err
	}
	defer cleanup()
	inventory := c.ProviderInventory()
	if err := inventory.EnsureCustomResourceDefinitions(ctx); err != nil {
		return fmt.Errorf("installing clusterctl's inventory CRD in %s: %w", env.Name, err)
	}
	for _, p := range providers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}
		if err := env.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
		if err := inventory.Create(ctx, p.inventory()); err != nil {
			return fmt.Errorf("recording %s in clusterctl's inventory of %s: %w", p.manifestLabel(), env.Name, err)
		}
	}
	return nil
}

// Move runs `clusterctl move --namespace namespace` from one management cluster of the bed to
// another, with clusterctl's own library.
func Move(ctx context.Context, from, to *testenv.Environment, namespace string) error {
	dir, err := os.MkdirTemp("", "clusterctl-move-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fromPath, err := writeKubeconfig(from, filepath.Join(dir, "from.kubeconfig"))
	if err != nil {
		return err
	}
	toPath, err := writeKubeconfig(to, filepath.Join(dir, "to.kubeconfig"))
	if err != nil {
		return err
	}
	configPath, err := emptyClusterctlConfig(dir)
	if err != nil {
		return err
	}
	c, err := clusterctl.New(ctx, configPath)
	if err != nil {
		return err
	}
	return c.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: fromPath},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: toPath},
		Namespace:      namespace,
	})
}

// clusterctlClusterClient is clusterctl's client of one management cluster; cleanup removes its
// kubeconfig and configuration files.
func clusterctlClusterClient(ctx context.Context, env *testenv.Environment) (clusterctlcluster.Client, func(), error) {
	dir, err := os.MkdirTemp("", "clusterctl-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	path, err := writeKubeconfig(env, filepath.Join(dir, "kubeconfig"))
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	configPath, err := emptyClusterctlConfig(dir)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	cfg, err := clusterctlconfig.New(ctx, configPath)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: path}, cfg), cleanup, nil
}

// emptyClusterctlConfig writes a clusterctl configuration without settings, so that clusterctl
// reads nothing from the user's home.
func emptyClusterctlConfig(dir string) (string, error) {
	path := filepath.Join(dir, "clusterctl.yaml")
	return path, os.WriteFile(path, []byte("{}\n"), 0o600)
}

func writeKubeconfig(env *testenv.Environment, path string) (string, error) {
	data, err := env.Kubeconfig()
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, data, 0o600)
}
