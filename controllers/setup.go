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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers/internal/readyourwrites"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// The manager's defaults (main.go's flags). The bench runs the provider with them unless told
// otherwise, so that its figures are those of the shipped manager.
const (
	DefaultClusterConcurrency = 10
	DefaultMachineConcurrency = 10
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst limit the requests to the management cluster
	// (--kube-api-qps, --kube-api-burst): CAPI's core manager's defaults (v1.14). Each kind has
	// its own limiter in controller-runtime's client; at 20 the HarvesterMachines' patches alone
	// held a 50-machine MachineDeployment back by seconds (docs/performance.md).
	DefaultKubeAPIQPS   = 100
	DefaultKubeAPIBurst = 200
	// DefaultHarvesterQPS and DefaultHarvesterBurst limit the requests to each Harvester
	// cluster (--harvester-api-qps, --harvester-api-burst).
	DefaultHarvesterQPS   = 20
	DefaultHarvesterBurst = 30
	DefaultSyncPeriod     = 10 * time.Minute
)

// Options configure the provider's controllers.
type Options struct {
	// WatchFilterValue is CAPI's --watch-filter.
	WatchFilterValue string
	// ClusterConcurrency and MachineConcurrency are the reconciles run in parallel.
	ClusterConcurrency int
	MachineConcurrency int
	// HarvesterQPS and HarvesterBurst limit the requests to each Harvester cluster.
	HarvesterQPS   float32
	HarvesterBurst int
	// HarvesterCacheBudget bounds, in bytes, what each connection to Harvester caches
	// (transport.ClientFactory.MaxCachedBytes: 0 for its default, negative for none).
	HarvesterCacheBudget int64
	// HarvesterCacheBudgetTotal bounds what all connections cache together
	// (transport.ClientFactory.MaxCachedBytesTotal).
	HarvesterCacheBudgetTotal int64
	// TokenLifetime of the guests' Harvester tokens; Clock decides their renewal (tests inject
	// a fake one).
	TokenLifetime time.Duration
	Clock         clock.PassiveClock
	// CCMImage is the image of the guests' cloud controller manager.
	CCMImage string
	// IdentityExpiryWarning is how long before an identity's credential expires the
	// HarvesterCluster warns (--identity-expiry-warning).
	IdentityExpiryWarning time.Duration
	// ReferenceRecheck is how soon a machine whose image, key pair or network is missing looks
	// again (--reference-recheck-interval; 0: DefaultReferenceRecheck).
	ReferenceRecheck time.Duration
	// HostDrainTimeout bounds a guest node's drain for host maintenance whatever the Machine
	// says (--host-maintenance-drain-timeout; 0: only the Machine's nodeDrainTimeoutSeconds).
	HostDrainTimeout time.Duration
	// ProviderNamespace is the manager's own namespace (POD_NAMESPACE), where the Secrets of
	// HarvesterClusterIdentities live.
	ProviderNamespace string
	// KubeconfigPolicy decides which identity kubeconfigs the manager accepts.
	KubeconfigPolicy transport.KubeconfigPolicy
	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool
}

// NewScheme is the management cluster's scheme as the provider's manager needs it: Kubernetes'
// kinds, Cluster API's core, addons (the guests' ClusterResourceSets) and IPAM (static
// addresses), and this provider's.
// main.go and the test bed both use it, so a kind missing here fails a test.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		clusterv1.AddToScheme,
		addonsv1.AddToScheme,
		ipamv1.AddToScheme,
		infrav1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return scheme, nil
}

// UncachedObjects are the kinds the manager's client reads live: the provider reads few Secrets
// and ConfigMaps and must neither cache every one of the management cluster nor act on a stale
// identity Secret. main.go and the test bed's management manager both use it (as CAPI's own
// managers do for the same kinds).
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}
}

// The metrics endpoint authenticates and authorises its callers through the management
// cluster (TokenReview, SubjectAccessReview); config/rbac/metrics_reader_role.yaml is the role a
// scraper needs.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Setup adds the provider's controllers and their shared Harvester client factory to a manager.
// The manager binary (main.go) and the test bed both call it, so tests run the real wiring.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	scheme, err := guestcloud.NewScheme()
	if err != nil {
		return err
	}
	requests, err := transport.NewRequestMetrics(ctrlmetrics.Registry)
	if err != nil {
		return fmt.Errorf("registering the Harvester request metrics: %w", err)
	}
	if err := registerMetrics(mgr.GetClient()); err != nil {
		return fmt.Errorf("registering the provider's metrics: %w", err)
	}
	factory := &transport.ClientFactory{
		Metrics:   requests,
		Scheme:    scheme,
		QPS:       o.HarvesterQPS,
		Burst:     o.HarvesterBurst,
		UserAgent: "cluster-api-provider-harvester",
		Policy:    o.KubeconfigPolicy,

		MaxCachedBytes:      o.HarvesterCacheBudget,
		MaxCachedBytesTotal: o.HarvesterCacheBudgetTotal,
	}
	if err := mgr.Add(factory); err != nil {
		return err
	}
	skip := &o.SkipNameValidation
	// The HarvesterCluster's Secrets (identity, cloud-config, addons) and the guests' kubeconfig
	// Secrets are read again only when they changed.
	secrets := newSecretClient(mgr.GetClient(), mgr.GetCache())
	secretMetadata := &metav1.PartialObjectMetadata{}
	secretMetadata.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	secretInformer, err := mgr.GetCache().GetInformer(ctx, secretMetadata)
	if err != nil {
		return fmt.Errorf("getting the Secrets' metadata informer: %w", err)
	}
	if _, err := secretInformer.AddEventHandler(secrets.forgetDeleted()); err != nil {
		return fmt.Errorf("watching Secrets' deletion: %w", err)
	}
	// The guests, through CAPI's ClusterCache (their <cluster>-kubeconfig Secrets), for what the
	// provider records of them while they live: the volumes their CSI driver made on Harvester.
	// Those Secrets are the tenants' to write: the ClusterCache reads them through the identity
	// kubeconfigs' policy (guestKubeconfigReader).
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: &guestKubeconfigReader{
			Reader:   secrets,
			Policy:   o.KubeconfigPolicy,
			Recorder: mgr.GetEventRecorder("guest-kubeconfig"),
		},
		WatchFilterValue: o.WatchFilterValue,
		Client:           clustercache.ClientOptions{UserAgent: "cluster-api-provider-harvester"},
	}, controller.Options{MaxConcurrentReconciles: o.ClusterConcurrency, SkipNameValidation: skip})
	if err != nil {
		return fmt.Errorf("setting up the ClusterCache: %w", err)
	}
	// The ClusterCache runs its caches outside the manager's context: stop them with the manager,
	// or a manager stopped in-process (tests, the bench) leaves watches open on the guests, which
	// then keep the guests' apiservers from stopping.
	if s, ok := clusterCache.(interface{ Shutdown() }); ok {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			s.Shutdown()
			return nil
		})); err != nil {
			return err
		}
	}
	if err := (&GuestVolumeReconciler{
		Client:           mgr.GetClient(),
		ClusterCache:     clusterCache,
		WatchFilterValue: o.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.ClusterConcurrency, SkipNameValidation: skip}); err != nil {
		return fmt.Errorf("setting up the guest volume controller: %w", err)
	}
	if err := (&HarvesterClusterReconciler{
		ProviderNamespace: o.ProviderNamespace,
		Client:            secrets,
		Recorder:          mgr.GetEventRecorder("harvestercluster-controller"),
		Factory:           factory,
		WatchFilterValue:  o.WatchFilterValue,
		TokenLifetime:     o.TokenLifetime,
		Clock:             o.Clock,
		CCMImage:          o.CCMImage,

		IdentityExpiryWarning: o.IdentityExpiryWarning,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.ClusterConcurrency, SkipNameValidation: skip}); err != nil {
		return fmt.Errorf("setting up the HarvesterCluster controller: %w", err)
	}
	if err := (&HarvesterMachineReconciler{
		ProviderNamespace: o.ProviderNamespace,
		// Its reads of a HarvesterMachine are never older than its own last write of it
		// (package readyourwrites says why).
		Client:           readyourwrites.New(mgr.GetClient(), &infrav1.HarvesterMachine{}),
		SecretMetadata:   mgr.GetCache(),
		Recorder:         mgr.GetEventRecorder("harvestermachine-controller"),
		Factory:          factory,
		ClusterCache:     clusterCache,
		WatchFilterValue: o.WatchFilterValue,
		ReferenceRecheck: o.ReferenceRecheck,
		HostDrainTimeout: o.HostDrainTimeout,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.MachineConcurrency, SkipNameValidation: skip}); err != nil {
		return fmt.Errorf("setting up the HarvesterMachine controller: %w", err)
	}
	if err := (&HarvesterMachineTemplateReconciler{
		Client:           mgr.GetClient(),
		WatchFilterValue: o.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: skip}); err != nil {
		return fmt.Errorf("setting up the HarvesterMachineTemplate controller: %w", err)
	}
	return nil
}
