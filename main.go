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

// Command manager runs the Cluster API infrastructure provider for Harvester HCI: the
// HarvesterCluster and HarvesterMachine reconcilers and the webhooks of their API.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	"sigs.k8s.io/cluster-api/util/flags"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/webhookguard"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// options are the manager's command-line settings.
type options struct {
	healthAddr         string
	leaderElect        bool
	leaderElectionID   string
	leaseDuration      time.Duration
	renewDeadline      time.Duration
	retryPeriod        time.Duration
	watchNamespace     string
	watchFilterValue   string
	webhookPort        int
	webhookCertDir     string
	webhookClientCA    string
	clusterConcurrency int
	machineConcurrency int
	syncPeriod         time.Duration
	restConfigQPS      float32
	restConfigBurst    int
	harvesterQPS       float32
	harvesterBurst     int
	harvesterCacheMiB  int64
	harvesterCachesMiB int64
	ccmImage           string
	identityExpiry     time.Duration
	referenceRecheck   time.Duration
	hostDrainTimeout   time.Duration
	kubeconfigPolicy   transport.KubeconfigPolicy
	managerOptions     flags.ManagerOptions
	logOptions         *logsv1.LoggingConfiguration
	enableWebhooks     bool
	inPlaceUpdates     bool
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "The address the health endpoints (/healthz, /readyz) bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "controller-leader-election-capi-harvester", "Name of the Lease used for leader election.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a leader keeps the lease without renewing it.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader retries renewing before it gives up.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How long candidates wait between attempts.")
	fs.StringVar(&o.watchNamespace, "namespace", "", "Reconcile only objects in this namespace (default: all namespaces).")
	fs.StringVar(&o.watchFilterValue, "watch-filter", "", "Reconcile only objects labelled cluster.x-k8s.io/watch-filter=<value>.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/", "Directory with the webhook server's tls.crt and tls.key.")
	fs.StringVar(&o.webhookClientCA, "webhook-client-ca-file", "",
		"PEM file of the CA whose client certificates the webhook port accepts: with it, the admission webhooks serve only a client presenting a certificate that CA signed (the API server, configured to present one through its --admission-control-config-file; docs/security.md); the in-place update hooks stay open, since Cluster API's Runtime SDK client presents none. Read at start.")
	fs.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "Serve the API's defaulting and validating webhooks.")
	fs.BoolVar(&o.inPlaceUpdates, "in-place-updates", false,
		"Serve Cluster API's in-place update hooks (CanUpdateMachine, CanUpdateMachineSet, UpdateMachine) on the webhook server, for an ExtensionConfig to register (config/inplace); CAPI needs its InPlaceUpdates and RuntimeSDK feature gates. Off: every template change rolls out new machines.")
	fs.IntVar(&o.clusterConcurrency, "harvestercluster-concurrency", controllers.DefaultClusterConcurrency, "HarvesterClusters reconciled in parallel.")
	fs.IntVar(&o.machineConcurrency, "harvestermachine-concurrency", controllers.DefaultMachineConcurrency, "HarvesterMachines reconciled in parallel.")
	fs.DurationVar(&o.syncPeriod, "sync-period", controllers.DefaultSyncPeriod, "How often every watched object is reconciled again, as a safety net; changes are handled as they happen.")
	fs.Float32Var(&o.restConfigQPS, "kube-api-qps", controllers.DefaultKubeAPIQPS, "Queries per second to the management cluster's API server.")
	fs.IntVar(&o.restConfigBurst, "kube-api-burst", controllers.DefaultKubeAPIBurst, "Burst of queries to the management cluster's API server.")
	fs.Float32Var(&o.harvesterQPS, "harvester-api-qps", controllers.DefaultHarvesterQPS, "Queries per second to each Harvester cluster's API server.")
	fs.IntVar(&o.harvesterBurst, "harvester-api-burst", controllers.DefaultHarvesterBurst, "Burst of queries to each Harvester cluster's API server.")
	fs.Int64Var(&o.harvesterCacheMiB, "harvester-cache-budget-mib", transport.DefaultMaxCachedBytes>>20,
		"What each connection to a Harvester cluster may cache, in MiB: a connection that passes it is stopped for a while and its clusters report CacheBudgetExceeded (0: no bound).")
	fs.Int64Var(&o.harvesterCachesMiB, "harvester-cache-budget-total-mib", transport.DefaultMaxCachedBytesTotal>>20,
		"What all connections to Harvester clusters may cache together, in MiB: past it, the connection that holds the most is stopped as above (0: no bound).")
	fs.StringVar(&o.ccmImage, "ccm-image", controllers.DefaultCCMImage, "Image of the cloud controller manager installed into guest clusters.")
	fs.DurationVar(&o.identityExpiry, "identity-expiry-warning", controllers.DefaultIdentityExpiryWarning,
		"How long before an identity's token or client certificate expires (when it says so) the HarvesterCluster warns: condition IdentityExpiringSoon and a warning event.")
	fs.DurationVar(&o.referenceRecheck, "reference-recheck-interval", controllers.DefaultReferenceRecheck,
		"How often a machine whose image, key pair or network on Harvester is missing or not ready (or whose VM name another's VM holds) looks again; those are not watched.")
	fs.DurationVar(&o.hostDrainTimeout, "host-maintenance-drain-timeout", controllers.DefaultHostDrainTimeout,
		"Longest a guest node's drain may hold its VM on a host Harvester empties (hostMaintenance.policy DrainAndRestart), whatever the Machine's nodeDrainTimeoutSeconds: a guest's PodDisruptionBudgets must not keep a Harvester host from its maintenance. 0: no limit but the Machine's.")
	fs.BoolVar(&o.kubeconfigPolicy.AllowProxyURL, "allow-kubeconfig-proxy-url", false,
		"Accept identity kubeconfigs that reach Harvester through a proxy (proxy-url). Off: a tenant's kubeconfig must not choose where the manager's connections go.")
	fs.BoolVar(&o.kubeconfigPolicy.AllowInsecureSkipTLSVerify, "allow-insecure-kubeconfig", false,
		"Accept identity kubeconfigs with insecure-skip-tls-verify. Off: Harvester's certificate is verified against the kubeconfig's certificate-authority-data.")
	flags.AddManagerOptions(fs, &o.managerOptions)
	o.logOptions = logs.NewOptions()
	logsv1.AddFlags(o.logOptions, fs)
}

func main() {
	o := &options{}
	fs := pflag.CommandLine
	o.addFlags(fs)
	fs.AddGoFlagSet(flag.CommandLine)
	// verflag registers --version on pflag.CommandLine: the same flag, version variables
	// (k8s.io/component-base/version, stamped by `make images`) and output as the CCM's.
	pflag.Parse()
	verflag.PrintAndExitIfRequested()
	if err := run(o); err != nil {
		klog.ErrorS(err, "manager stopped")
		os.Exit(1)
	}
}

func run(o *options) error {
	if err := logsv1.ValidateAndApply(o.logOptions, nil); err != nil {
		return fmt.Errorf("applying logging options: %w", err)
	}
	ctrl.SetLogger(klog.Background())
	setupLog := ctrl.Log.WithName("setup")

	tlsOptions, metricsOptions, err := flags.GetManagerOptions(o.managerOptions)
	if err != nil {
		return fmt.Errorf("reading TLS and diagnostics options: %w", err)
	}

	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS = o.restConfigQPS
	restConfig.Burst = o.restConfigBurst
	restConfig.UserAgent = "cluster-api-provider-harvester-controller"
	managementRequests, err := transport.NewManagementRequestMetrics(ctrlmetrics.Registry)
	if err != nil {
		return fmt.Errorf("registering the management request metrics: %w", err)
	}
	restConfig.Wrap(managementRequests.WrapTransport("management"))

	var defaultNamespaces map[string]cache.Config
	if o.watchNamespace != "" {
		setupLog.Info("reconciling objects in one namespace only", "namespace", o.watchNamespace)
		defaultNamespaces = map[string]cache.Config{o.watchNamespace: {}}
	}

	scheme, err := controllers.NewScheme()
	if err != nil {
		return err
	}
	// Every handler on the webhook port is behind the guard: anything that reaches the port can
	// post to it (internal/webhookguard says what it bounds).
	guard := webhookguard.DefaultOptions("/" + runtimehooksv1.GroupVersion.Group + "/")
	if o.webhookClientCA != "" {
		clientCA, err := webhookguard.ClientCA(o.webhookClientCA)
		if err != nil {
			return err
		}
		tlsOptions = append(tlsOptions, clientCA)
		guard.RequireClientCert = true
		guard.WithoutClientCert = []string{"/" + runtimehooksv1.GroupVersion.Group + "/"}
	}
	var webhookServer webhook.Server
	var apiReader inPlaceReader
	if o.inPlaceUpdates {
		// The hooks read HarvesterMachines from the API server; the manager's own reader exists
		// only once the manager does, so the server gets one that waits for it.
		srv, err := controllers.NewInPlaceUpdateServer(server.Options{Port: o.webhookPort, CertDir: o.webhookCertDir, TLSOpts: tlsOptions}, &apiReader)
		if err != nil {
			return fmt.Errorf("setting up the in-place update extension: %w", err)
		}
		// The runtime server registers its hooks, and the manager its webhooks, through this.
		srv.Server = webhookguard.Wrap(srv.Server, guard)
		webhookServer = srv
	} else {
		webhookServer = webhookguard.Wrap(webhook.NewServer(webhook.Options{Port: o.webhookPort, CertDir: o.webhookCertDir, TLSOpts: tlsOptions}), guard)
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:           scheme,
		Metrics:          *metricsOptions,
		LeaderElection:   o.leaderElect,
		LeaderElectionID: o.leaderElectionID,
		// Set by the Deployment through the Downward API; in a pod controller-runtime would also
		// find it in the ServiceAccount's mount, outside one (the test bed) only here.
		LeaderElectionNamespace:    os.Getenv("POD_NAMESPACE"),
		LeaderElectionResourceLock: "leases",
		// A manager told to stop (a rolling update, a drained node) gives the lease up, so that
		// the next one leads at once rather than a lease duration later; the process ends as soon
		// as Start returns, which is what releasing requires.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		HealthProbeBindAddress:        o.healthAddr,
		Cache: cache.Options{
			DefaultNamespaces: defaultNamespaces,
			SyncPeriod:        &o.syncPeriod,
			// Nothing reads managed fields, and an update without them keeps the server's (as
			// CAPI core's manager does).
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Client: client.Options{
			Cache: &client.CacheOptions{DisableFor: controllers.UncachedObjects()},
		},
		WebhookServer: webhookServer,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	apiReader.Reader = mgr.GetAPIReader()

	ctx := ctrl.SetupSignalHandler()
	if err := controllers.Setup(ctx, mgr, controllers.Options{
		WatchFilterValue:          o.watchFilterValue,
		ClusterConcurrency:        o.clusterConcurrency,
		MachineConcurrency:        o.machineConcurrency,
		HarvesterQPS:              o.harvesterQPS,
		HarvesterBurst:            o.harvesterBurst,
		HarvesterCacheBudget:      cacheBudgetBytes(o.harvesterCacheMiB),
		HarvesterCacheBudgetTotal: cacheBudgetBytes(o.harvesterCachesMiB),
		CCMImage:                  o.ccmImage,
		IdentityExpiryWarning:     o.identityExpiry,
		ReferenceRecheck:          o.referenceRecheck,
		HostDrainTimeout:          o.hostDrainTimeout,
		KubeconfigPolicy:          o.kubeconfigPolicy,
		ProviderNamespace:         os.Getenv("POD_NAMESPACE"),
	}); err != nil {
		return err
	}

	if o.enableWebhooks {
		if err := infrav1.SetupWebhooksWithManager(mgr); err != nil {
			return fmt.Errorf("setting up webhooks: %w", err)
		}
		// Served always, called only where the admin applied config/management's webhook.
		controllers.SetupKubeconfigWebhook(mgr, o.kubeconfigPolicy)
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return fmt.Errorf("adding the webhook readiness check: %w", err)
		}
	} else if o.inPlaceUpdates {
		// The hooks alone: the manager starts its webhook server only once something asks for it.
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return fmt.Errorf("adding the webhook readiness check: %w", err)
		}
	} else if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}

	setupLog.Info("starting manager")
	return mgr.Start(ctx)
}

// inPlaceReader is the manager's API reader, set once the manager is made (before anything is
// served).
type inPlaceReader struct{ client.Reader }

// cacheBudgetBytes turns --harvester-cache-budget-mib into the client factory's bound: 0 (no
// bound) becomes negative, as the factory reads 0 as its default.
func cacheBudgetBytes(mib int64) int64 {
	if mib <= 0 {
		return -1
	}
	return mib << 20
}
