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

package testenv

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourceset"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourcesetbinding"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// AddCAPICore adds Cluster API's own core reconcilers to the management environment's manager,
// as CAPI's manager runs them: Cluster, Machine, MachineSet, MachineDeployment,
// MachineHealthCheck, ClusterResourceSet(+Binding), with a ClusterCache that connects to each
// workload cluster through its `<cluster>-kubeconfig` Secret. Call before StartManager.
func AddCAPICore(ctx context.Context, e *Environment) (clustercache.ClusterCache, error) {
	mgr := e.Manager
	opts := controller.Options{MaxConcurrentReconciles: 5, SkipNameValidation: ptr.To(true)}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("adding Cluster API's indexes: %w", err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetAPIReader(),
		// Nodes are found by providerID, as CAPI's manager sets it up.
		Cache: clustercache.CacheOptions{Indexes: []clustercache.CacheOptionsIndex{clustercache.NodeProviderIDIndex}},
		// As CAPI's manager: what drain and volume detachment list is read live, not cached.
		Client: clustercache.ClientOptions{UserAgent: "capi-in-process", QPS: 100, Burst: 200,
			Cache: clustercache.ClientCacheOptions{DisableFor: []client.Object{
				&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Pod{}, &appsv1.DaemonSet{},
				&storagev1.VolumeAttachment{}, &corev1.PersistentVolume{},
			}}},
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the ClusterCache: %w", err)
	}
	// A workload cluster whose kubeconfig is not there yet is retried after 30 s by default;
	// tests bring guests up in seconds.
	if s, ok := clusterCache.(interface{ SetConnectionCreationRetryInterval(time.Duration) }); ok {
		s.SetConnectionCreationRetryInterval(2 * time.Second)
	}

	// The ClusterResourceSet controller watches Secrets by metadata only, from a cache of its own.
	partialSecretCache, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}}: {},
		},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(partialSecretCache); err != nil {
		return nil, err
	}

	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	steps := []func() error{
		func() error {
			return (&cluster.Reconciler{Client: c, APIReader: reader, ClusterCache: clusterCache,
				RemoteConnectionGracePeriod: 2 * time.Minute}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&machine.Reconciler{Client: c, APIReader: reader, ClusterCache: clusterCache,
				RemoteConditionsGracePeriod: 2 * time.Minute}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&machineset.Reconciler{Client: c, APIReader: reader, ClusterCache: clusterCache}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&machinedeployment.Reconciler{Client: c, APIReader: reader}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&machinehealthcheck.Reconciler{Client: c, ClusterCache: clusterCache}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&clusterresourceset.Reconciler{Client: c, ClusterCache: clusterCache}).SetupWithManager(ctx, mgr, opts, partialSecretCache)
		},
		func() error {
			return (&clusterresourcesetbinding.Reconciler{Client: c}).SetupWithManager(ctx, mgr, opts)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("setting up Cluster API's controllers: %w", err)
		}
	}
	return clusterCache, nil
}

// KubeconfigSecret is the `<cluster>-kubeconfig` Secret CAPI reads to reach a workload cluster.
func KubeconfigSecret(namespace, cluster string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      cluster + "-kubeconfig",
			Labels:    map[string]string{"cluster.x-k8s.io/cluster-name": cluster},
		},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kubeconfig},
	}
}

// AddKubeadmProviders adds CAPI's kubeadm bootstrap and control-plane reconcilers to the
// management environment's manager, as their own managers run them, on the ClusterCache of
// AddCAPICore. Call before StartManager.
func AddKubeadmProviders(ctx context.Context, e *Environment, clusterCache clustercache.ClusterCache) error {
	mgr := e.Manager
	opts := controller.Options{MaxConcurrentReconciles: 5, SkipNameValidation: ptr.To(true)}
	if err := (&kubeadmconfig.Reconciler{
		Client: mgr.GetClient(), SecretCachingClient: mgr.GetClient(), ClusterCache: clusterCache,
		// Since CAPI v1.14 it reads the control plane's version live; nil panics.
		APIReader: mgr.GetAPIReader(),
		TokenTTL:  kubeadmconfig.DefaultTokenTTL,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("setting up the kubeadm bootstrap controller: %w", err)
	}
	if err := (&kubeadmcontrolplane.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SecretCachingClient: mgr.GetClient(),
		ClusterCache: clusterCache,
		// etcd is reached through the apiserver's port-forward to a kubelet, which the bed does
		// not run (docs/decisions/0002-test-bed.md): fail fast rather than wait.
		EtcdDialTimeout: time.Second, EtcdCallTimeout: time.Second, EtcdLogger: etcdLogger(),
		RemoteConditionsGracePeriod: 2 * time.Minute,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("setting up the kubeadm control-plane controller: %w", err)
	}
	return nil
}

// etcdLogger keeps the etcd client's failed dials out of the test output unless TEST_LOG is set.
func etcdLogger() *zap.Logger {
	if os.Getenv("TEST_LOG") != "" {
		return nil
	}
	return zap.NewNop()
}

// AddCAPITopology turns on CAPI's ClusterTopology feature gate (its webhooks run in this
// process) and adds the ClusterClass and topology reconcilers, as CAPI's manager runs them with
// that gate on. Call before StartManager.
func AddCAPITopology(ctx context.Context, e *Environment, clusterCache clustercache.ClusterCache) error {
	if err := feature.MutableGates.Set(string(feature.ClusterTopology) + "=true"); err != nil {
		return err
	}
	mgr := e.Manager
	opts := controller.Options{MaxConcurrentReconciles: 5, SkipNameValidation: ptr.To(true)}
	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	for _, setup := range []func() error{
		func() error {
			return (&clusterclass.Reconciler{Client: c}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&topologycluster.Reconciler{Client: c, APIReader: reader, ClusterCache: clusterCache}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&topologymachinedeployment.Reconciler{Client: c, APIReader: reader}).SetupWithManager(ctx, mgr, opts)
		},
		func() error {
			return (&topologymachineset.Reconciler{Client: c, APIReader: reader}).SetupWithManager(ctx, mgr, opts)
		},
	} {
		if err := setup(); err != nil {
			return fmt.Errorf("setting up Cluster API's topology controllers: %w", err)
		}
	}
	return nil
}
