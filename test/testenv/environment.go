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
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Options describe one test control plane.
type Options struct {
	// Name says which cluster this plays ("management", "harvester", "guest-a"), for errors.
	Name string
	// Scheme knows every kind the cluster's clients and webhooks handle.
	Scheme *runtime.Scheme
	// CRDs and CRDDirectoryPaths are installed before Start returns.
	CRDs              []*apiextensionsv1.CustomResourceDefinition
	CRDDirectoryPaths []string
	// ConversionWebhookCRDs name CRDs whose versions the manager's /convert converts (envtest
	// itself points there only kinds its scheme can convert).
	ConversionWebhookCRDs []string
	// MutatingWebhooks and ValidatingWebhooks are installed pointing at the environment's
	// manager, which serves the handlers SetupWebhooks registers.
	MutatingWebhooks   []*admissionv1.MutatingWebhookConfiguration
	ValidatingWebhooks []*admissionv1.ValidatingWebhookConfiguration
	SetupWebhooks      func(ctrl.Manager) error
	// UncachedObjects are kinds the manager's client reads live, as the real manager's does.
	UncachedObjects []client.Object
	// CacheUnstructured makes the manager's client read unstructured objects from its cache, as
	// Cluster API's managers do (they read infrastructure and bootstrap objects that way).
	CacheUnstructured bool
	// ConfigureAPIServer, when set, shapes the kube-apiserver before it starts (listen address,
	// certificates, authentication, flags).
	ConfigureAPIServer func(*envtest.APIServer) error
}

// Environment is a running kube-apiserver and etcd, a direct client to it and a manager (not
// started) that the caller adds controllers to before StartManager.
type Environment struct {
	Name    string
	Config  *rest.Config
	Scheme  *runtime.Scheme
	Client  client.Client
	Manager ctrl.Manager

	env         *envtest.Environment
	stopManager context.CancelFunc
	managerDone chan error
	stopOnce    sync.Once
}

var setLoggerOnce sync.Once

// setLogger sends controller-runtime's logs to stderr when TEST_LOG is set; else it keeps the
// last errors for InProcessErrors and drops the rest.
func setLogger() {
	setLoggerOnce.Do(func() {
		if os.Getenv("TEST_LOG") == "" {
			ctrl.SetLogger(zap.New(zap.WriteTo(inProcessErrors), zap.Level(zapcore.ErrorLevel), zap.StacktraceLevel(zapcore.DPanicLevel)))
			return
		}
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	})
}

// InstallWait bounds envtest's waits for installed CRDs to be served and for webhook servers to
// answer. envtest's own 10 s holds on an idle machine; a simulated Harvester's many CRDs took
// longer with both e2e shards, the other packages and a benchmark on two cores.
const InstallWait = 2 * time.Minute

// Start starts a control plane with the options' CRDs and webhooks. Callers must Stop it.
func Start(o Options) (*Environment, error) {
	setLogger()
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	build := func() (*envtest.Environment, error) {
		env := &envtest.Environment{
			BinaryAssetsDirectory: assets,
			Scheme:                o.Scheme,
			CRDs:                  o.CRDs,
			CRDDirectoryPaths:     o.CRDDirectoryPaths,
			ErrorIfCRDPathMissing: true,
			CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: InstallWait},
			WebhookInstallOptions: envtest.WebhookInstallOptions{
				MutatingWebhooks:   o.MutatingWebhooks,
				ValidatingWebhooks: o.ValidatingWebhooks,
				MaxTime:            InstallWait,
			},
		}
		if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
			// envtest's 20 s for kube-apiserver to answer holds on an idle machine; with both e2e
			// shards and the unit tests on two cores an apiserver took longer, five times in a row.
			env.ControlPlaneStartTimeout = 2 * time.Minute
		}
		if err := protectControlPlane(env, assets); err != nil {
			return nil, fmt.Errorf("preparing the %s control plane: %w", o.Name, err)
		}
		// envtest would take the ports from the ephemeral range, where any connection's source
		// port can take them before the processes (and a test's webhook server) bind them
		// (FreeLoopbackPorts).
		ports, err := FreeLoopbackPorts(3)
		if err != nil {
			return nil, err
		}
		env.WebhookInstallOptions.LocalServingHost = "127.0.0.1"
		env.WebhookInstallOptions.LocalServingPort = ports[2]
		env.ControlPlane.GetAPIServer().SecureServing.ListenAddr = envtest.ListenAddr{Address: "127.0.0.1", Port: strconv.Itoa(ports[0])}
		env.ControlPlane.Etcd.URL = &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
		if name := os.Getenv("TEST_APISERVER_LOG"); name != "" && strings.Contains(o.Name, name) {
			env.ControlPlane.GetAPIServer().Out = os.Stderr
			env.ControlPlane.GetAPIServer().Err = os.Stderr
		}
		if dir := os.Getenv("TEST_APISERVER_AUDIT_DIR"); dir != "" {
			if err := auditTo(env.ControlPlane.GetAPIServer(), dir, o.Name); err != nil {
				return nil, err
			}
		}
		if o.ConfigureAPIServer != nil {
			if err := o.ConfigureAPIServer(env.ControlPlane.GetAPIServer()); err != nil {
				return nil, fmt.Errorf("configuring the %s apiserver: %w", o.Name, err)
			}
		}
		return env, nil
	}
	// envtest gives the apiserver 5 s, not configurable, to show the default namespace once it
	// answers; on a loaded machine it sometimes takes longer, and an etcd starved of CPU can
	// time out a request while envtest installs the CRDs (seen with make test, make bench and
	// a focused e2e run at once: load average 47). A new control plane then gets another chance
	// (the failed one is stopped).
	var env *envtest.Environment
	var cfg *rest.Config
	for attempt := 1; ; attempt++ {
		env, err = build()
		if err != nil {
			return nil, err
		}
		cfg, err = env.Start()
		if err == nil {
			break
		}
		stopErr := env.Stop()
		transient := strings.Contains(err.Error(), "default namespace didn't register") ||
			strings.Contains(err.Error(), "etcdserver: request timed out")
		if attempt == 3 || !transient {
			return nil, fmt.Errorf("starting the %s control plane: %w", o.Name, errors.Join(err, stopErr))
		}
	}
	// The test bed runs many controllers on one config: client-side throttling would only
	// blur what the tests and benchmarks measure.
	cfg.QPS, cfg.Burst = 1000, 2000
	e := &Environment{Name: o.Name, Config: cfg, Scheme: o.Scheme, env: env}
	if err := e.init(o); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if err := e.convertThroughWebhook(o.ConversionWebhookCRDs); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return e, nil
}

// convertThroughWebhook points the named CRDs' conversion at the manager's webhook server, as
// envtest does for kinds its scheme can convert.
func (e *Environment) convertThroughWebhook(names []string) error {
	if len(names) == 0 {
		return nil
	}
	wio := &e.env.WebhookInstallOptions
	url := "https://" + net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)) + "/convert"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ConversionReviewVersions: []string{"v1", "v1beta1"},
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: wio.LocalServingCAData},
				},
			}
			return e.Client.Update(ctx, crd)
		})
		if err != nil {
			return fmt.Errorf("pointing the %s CRD %s at the conversion webhook: %w", e.Name, name, err)
		}
	}
	return nil
}

func (e *Environment) init(o Options) error {
	var err error
	if e.Client, err = client.New(e.Config, client.Options{Scheme: o.Scheme}); err != nil {
		return fmt.Errorf("creating a client for the %s control plane: %w", o.Name, err)
	}
	wio := &e.env.WebhookInstallOptions
	e.Manager, err = ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:  o.Scheme,
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: o.UncachedObjects, Unstructured: o.CacheUnstructured}},
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    wio.LocalServingHost,
			Port:    wio.LocalServingPort,
			CertDir: wio.LocalServingCertDir,
			// HTTP/1.1 only, as the shipped manager serves (CAPI's --enable-http2 is off by
			// default). With HTTP/2 the apiserver keeps its connection open and the server's
			// shutdown waited the manager's whole 30 s grace period for it.
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		}),
	})
	if err != nil {
		return fmt.Errorf("creating the %s manager: %w", o.Name, err)
	}
	if o.SetupWebhooks != nil {
		if err := o.SetupWebhooks(e.Manager); err != nil {
			return fmt.Errorf("registering the %s webhooks: %w", o.Name, err)
		}
	}
	return nil
}

// StartManager runs the manager in the background until Stop, and returns once its caches
// are synced and, when it serves webhooks, its webhook server answers.
func (e *Environment) StartManager(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	e.stopManager = cancel
	e.managerDone = make(chan error, 1)
	go func() { e.managerDone <- e.Manager.Start(ctx) }()
	runningConverters.started(e)

	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !e.Manager.GetCache().WaitForCacheSync(syncCtx) {
		return fmt.Errorf("the %s manager's cache did not sync", e.Name)
	}
	if len(e.env.WebhookInstallOptions.MutatingWebhooks)+len(e.env.WebhookInstallOptions.ValidatingWebhooks) == 0 {
		return nil
	}
	return e.waitForWebhookServer(syncCtx)
}

// waitForWebhookServer waits until the webhook server accepts TLS connections.
func (e *Environment) waitForWebhookServer(ctx context.Context) error {
	wio := &e.env.WebhookInstallOptions
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	dialer := &net.Dialer{Timeout: time.Second}
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, nil
		}
		return true, conn.Close()
	})
}

// Stop stops the manager (if started) and the control plane.
func (e *Environment) Stop() error {
	var err error
	e.stopOnce.Do(func() {
		if e.stopManager != nil {
			runningConverters.remove(e)
			e.stopManager()
			if mgrErr := <-e.managerDone; mgrErr != nil {
				// What still ran, so that a runnable that does not stop can be named.
				stacks := make([]byte, 1<<20)
				stacks = stacks[:goruntime.Stack(stacks, true)]
				err = fmt.Errorf("the %s manager stopped with: %w\n%s", e.Name, mgrErr, stacks)
			}
		}
		if stopErr := e.env.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the %s control plane: %w", e.Name, stopErr))
		}
	})
	return err
}

// ServiceAccountSigningKeyFile is the private key the apiserver signs service-account tokens
// with (envtest's), for a token controller that mints tokens it accepts.
func (e *Environment) ServiceAccountSigningKeyFile() string {
	return filepath.Join(e.env.ControlPlane.GetAPIServer().CertDir, "sa-signer.key")
}

// Kubeconfig returns an admin kubeconfig of the control plane.
func (e *Environment) Kubeconfig() ([]byte, error) {
	return clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			e.Name: {Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			"admin": {ClientCertificateData: e.Config.CertData, ClientKeyData: e.Config.KeyData, Token: e.Config.BearerToken},
		},
		Contexts:       map[string]*clientcmdapi.Context{e.Name: {Cluster: e.Name, AuthInfo: "admin"}},
		CurrentContext: e.Name,
	})
}

// auditPolicy logs every request at the metadata level (no bodies, so no Secret's data): enough
// to count requests by user agent, verb, resource, version and outcome.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// auditTo makes an apiserver write its audit log to dir/<name>-audit.log (TEST_APISERVER_AUDIT_DIR,
// for finding which client makes which requests in a bench or a failing test).
func auditTo(s *envtest.APIServer, dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	args := s.Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", filepath.Join(dir, name+"-audit.log"))
	args.Set("audit-log-format", "json")
	args.Set("audit-log-mode", "batch")
	return nil
}
