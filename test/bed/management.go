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
	"slices"
	"sync"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Management is a further management cluster of the bed (for clusterctl move), set up as the
// first one: its own apiserver with Cluster API's controllers and webhooks in-process, the
// kubeadm providers when the bed runs them, and the provider installed as it ships, its manager
// binary as its own process.
type Management struct {
	Env *testenv.Environment
	// ClusterCache is the in-process CAPI core's; nil when CAPI runs as processes
	// (AddManagementOnCAPI).
	ClusterCache clustercache.ClusterCache
	Provider     *Provider

	capiMu sync.Mutex
	// capi are the Cluster API managers run as processes for this cluster, core first.
	capi []*CAPIProviders
	// operator is the Cluster API Operator when a test runs one (StartCAPIOperator).
	operator *CAPIOperator
}

// AddManagement starts another management cluster; Stop stops it (its Clusters deleted first).
func (b *Bed) AddManagement(ctx context.Context, o ProviderOptions) (*Management, error) {
	return b.addManagement(ctx, managementSpec{start: testenv.StartManagementWithoutProvider, provider: &o})
}

// AddManagementOnCAPI starts another management cluster whose Cluster API core is spec's
// manager as its own process (a CAPI version other than the one the bed runs in-process: its own
// CRDs, webhooks and conversion), with the provider installed as it ships. StopManagement (or the
// bed's Stop) deletes its Clusters, then stops the provider and the CAPI processes.
func (b *Bed) AddManagementOnCAPI(ctx context.Context, spec CAPIProviderSpec, o ProviderOptions) (*Management, error) {
	return b.addManagement(ctx, managementSpec{start: testenv.StartManagementWithoutCAPI, capiProcesses: &spec, provider: &o})
}

// managementSpec says how a management cluster of the bed is made: its apiserver (and the CRDs
// it starts with), how Cluster API runs for it, and what of this provider it gets.
type managementSpec struct {
	start func() (*testenv.Environment, error)
	// capiProcesses runs Cluster API as those processes; nil runs the bed's CAPI in-process
	// (and the kubeadm providers, when the bed runs them).
	capiProcesses *CAPIProviderSpec
	// provider installs the provider as it ships; nil installs none.
	provider *ProviderOptions
	// asBeforeClusterctl adds what `clusterctl init` expects to find: cert-manager's API and
	// Cluster API's providers in clusterctl's inventory.
	asBeforeClusterctl bool
}

// addManagement starts a management cluster as spec says and adds it to the bed.
func (b *Bed) addManagement(ctx context.Context, spec managementSpec) (*Management, error) {
	env, err := spec.start()
	if err != nil {
		return nil, err
	}
	m := &Management{Env: env}
	b.mu.Lock()
	b.managements = append(b.managements, m)
	b.mu.Unlock()
	if spec.capiProcesses == nil {
		if m.ClusterCache, err = testenv.AddCAPICore(ctx, env); err != nil {
			return nil, err
		}
		if b.options.Kubeadm {
			if err := testenv.AddKubeadmProviders(ctx, env, m.ClusterCache); err != nil {
				return nil, err
			}
		}
	}
	if err := env.StartManager(ctx); err != nil {
		return nil, err
	}
	if spec.capiProcesses != nil {
		if _, err := m.StartCAPIProviders(ctx, *spec.capiProcesses); err != nil {
			return nil, err
		}
	}
	if spec.asBeforeClusterctl {
		if err := installCertManagerAPI(ctx, env.Client); err != nil {
			return nil, err
		}
		var others []clusterctlProvider
		for _, p := range bedProviders(b.options.Kubeadm) {
			if p.manifestLabel() != ProviderManifestLabel {
				others = append(others, p)
			}
		}
		if err := recordProviders(ctx, env, others); err != nil {
			return nil, err
		}
	}
	if spec.provider != nil {
		if m.Provider, err = installProvider(ctx, env, *spec.provider); err != nil {
			return nil, err
		}
	}
	// The node agent finds the bootstrap data of the machines this cluster manages.
	b.Nodes.AddManagement(env.Client)
	return m, nil
}

// StartCAPIProviders runs spec's managers as processes against this management cluster, once:
// a second call returns the running ones.
func (m *Management) StartCAPIProviders(ctx context.Context, spec CAPIProviderSpec) (*CAPIProviders, error) {
	m.capiMu.Lock()
	defer m.capiMu.Unlock()
	for _, p := range m.capi {
		if p.Spec.Name == spec.Name {
			return p, nil
		}
	}
	p, err := startCAPIProviders(ctx, m.Env, spec)
	if err != nil {
		return nil, err
	}
	m.capi = append(m.capi, p)
	return p, nil
}

// StopManagement stops a management cluster AddManagement started, before the bed's end: its
// Clusters are deleted first, while its provider still runs.
func (b *Bed) StopManagement(ctx context.Context, m *Management) error {
	b.mu.Lock()
	b.managements = slices.DeleteFunc(b.managements, func(o *Management) bool { return o == m })
	b.mu.Unlock()
	err := m.stop(ctx)
	b.Nodes.RemoveManagement(m.Env.Client)
	return err
}

// stop deletes the management cluster's Clusters (while its provider still runs, so that their
// machines are cleaned up on Harvester), then stops the provider and the cluster.
func (m *Management) stop(ctx context.Context) error {
	errs := []error{deleteClusters(ctx, m.Env.Client)}
	if m.Provider != nil {
		errs = append(errs, m.Provider.cleanup())
	}
	m.capiMu.Lock()
	capi, operator := m.capi, m.operator
	m.capi, m.operator = nil, nil
	m.capiMu.Unlock()
	if operator != nil {
		errs = append(errs, operator.Stop())
	}
	for _, p := range slices.Backward(capi) {
		errs = append(errs, p.stop())
	}
	errs = append(errs, m.Env.Stop())
	if s, ok := m.ClusterCache.(interface{ Shutdown() }); ok {
		s.Shutdown()
	}
	return errors.Join(errs...)
}
