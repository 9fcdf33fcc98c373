package bed

import (
	"context"
	"errors"
	"slices"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Management is a further management cluster of the bed (for clusterctl move), set up as the
// first one: its own apiserver with Cluster API's controllers and webhooks in-process, the
// kubeadm providers when the bed runs them, and the provider installed as it ships, its manager
// binary as its own process.
type Management struct {
	Env          *testenv.Environment
	ClusterCache clustercache.ClusterCache
	Provider     *Provider
}

// AddManagement starts another management cluster; Stop stops it (its Clusters deleted first).
func (b *Bed) AddManagement(ctx context.Context, o ProviderOptions) (*Management, error) {
	env, err := testenv.StartManagementWithoutProvider()
	if err != nil {
		return nil, err
	}
	m := &Management{Env: env}
	b.mu.Lock()
	b.managements = append(b.managements, m)
	b.mu.Unlock()
	if m.ClusterCache, err = testenv.AddCAPICore(ctx, env); err != nil {
		return nil, err
	}
	if b.options.Kubeadm {
		if err := testenv.AddKubeadmProviders(ctx, env, m.ClusterCache); err != nil {
			return nil, err
		}
	}
	if err := env.StartManager(ctx); err != nil {
		return nil, err
	}
	if m.Provider, err = installProvider(ctx, env, o); err != nil {
		return nil, err
	}
	// The node agent finds the bootstrap data of the machines this cluster manages.
	b.Nodes.AddManagement(env.Client)
	return m, nil
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
	errs = append(errs, m.Env.Stop())
	if s, ok := m.ClusterCache.(interface{ Shutdown() }); ok {
		s.Shutdown()
	}
	return errors.Join(errs...)
}
