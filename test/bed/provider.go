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
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/release"
	ociimages "github.com/seed-0a7eb009/cluster-api-provider-harvester/test/images"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// ProviderOptions shape the shipped provider the bed installs.
type ProviderOptions struct {
	// Binary is the manager binary to run (extracted from the built image).
	Binary string
	// Variables are clusterctl variables for the components (defaults apply for the rest).
	Variables map[string]string
	// ExtraArgs are appended to the Deployment's arguments: only what a process outside a pod
	// needs (see ProcessOverrides) or what a test sets on purpose.
	ExtraArgs []string
	// LogFile receives the manager's output; empty for a file in the work directory.
	LogFile string
}

// Provider is the provider's manager running as clusterctl installs it: its components' RBAC,
// webhook configurations and ServiceAccount in the management cluster, and the manager binary as
// a process with the Deployment's command, arguments and environment, authenticated with a token
// of the Deployment's ServiceAccount.
type Provider struct {
	// stopRouting ends keepWebhooksRouted, for a provider an installer applied.
	stopRouting func()
	// Namespace and ServiceAccount are the Deployment's.
	Namespace, ServiceAccount string
	// Container is the manager container as the Deployment declares it.
	Container corev1.Container
	// Args are the arguments the process runs with (the Deployment's plus the overrides).
	Args []string
	// LogFile holds the manager's output.
	LogFile string
	// Objects are the components as rendered (after clusterctl's variable substitution).
	Objects []*unstructured.Unstructured
	// HealthAddr and MetricsAddr are where the manager's health and metrics endpoints listen.
	HealthAddr, MetricsAddr string

	mgmt client.Client
	// toLoopback points a webhook configuration at the manager's loopback port with the bed's CA.
	toLoopback  func(*admissionv1.WebhookClientConfig)
	deployment  *appsv1.Deployment
	certDir     string
	caPEM       []byte
	webhookPort int
	binary      string
	workDir     string
	env         []string
	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan error
	// ending is set while the bed itself stops or kills the manager; restarts counts the times
	// it ended by itself and was started again, as the kubelet does (restartPolicy Always);
	// lastExit is how it ended the last time; restart is the pending restart.
	// backoff is the kubelet's restart back-off; started is when the current run began.
	ending   bool
	restarts int
	lastExit error
	restart  *time.Timer
	backoff  testenv.CrashBackoff
	started  time.Time
}

// newRestartBackoff is the restart back-off of a manager that ends by itself: the kubelet's. A
// variable for the bed's own test.
var newRestartBackoff = testenv.KubeletCrashBackoff

// ProcessOverrides are the only flags the bed adds to the Deployment's: what a process outside a
// pod needs. The kubeconfig (a pod gets its ServiceAccount token mounted), listen addresses (many
// processes share one machine: no fixed ports; only loopback) and the webhook certificate
// directory (a pod mounts the Certificate's Secret there). The leader-election namespace comes
// from POD_NAMESPACE, which the Deployment sets through the Downward API and the bed resolves.
var ProcessOverrides = []string{"--kubeconfig", "--health-addr", "--webhook-port", "--webhook-cert-dir"}

// InstallProvider renders infrastructure-components.yaml as `make release-manifests` does,
// substitutes its variables as clusterctl does, installs its objects into the management cluster
// (cert-manager's are not installed: the bed issues the certificate and injects the CA bundle
// itself), and starts the manager binary.
func (b *Bed) InstallProvider(ctx context.Context, o ProviderOptions) (*Provider, error) {
	p, err := installProvider(ctx, b.Management, o)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.providers = append(b.providers, p)
	b.mu.Unlock()
	return p, nil
}

// installProvider is InstallProvider into any management cluster; the caller stops it.
func installProvider(ctx context.Context, mgmt *testenv.Environment, o ProviderOptions) (*Provider, error) {
	work, err := os.MkdirTemp("", "capi-harvester-manager-")
	if err != nil {
		return nil, err
	}
	p := &Provider{mgmt: mgmt.Client, binary: o.Binary, workDir: work, LogFile: o.LogFile}
	if p.LogFile == "" {
		p.LogFile = filepath.Join(work, "manager.log")
	}
	if err := p.install(ctx, mgmt, o); err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	if err := p.Start(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	return p, nil
}

func (p *Provider) install(ctx context.Context, mgmt *testenv.Environment, o ProviderOptions) error {
	ports, err := testenv.FreeLoopbackPorts(1)
	if err != nil {
		return err
	}
	p.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	variables := map[string]string{"CAPHV_DIAGNOSTICS_ADDRESS": p.MetricsAddr}
	maps.Copy(variables, o.Variables)
	objects, err := renderComponents(variables)
	if err != nil {
		return err
	}
	if err := p.prepare(objects); err != nil {
		return err
	}
	for _, obj := range p.Objects {
		switch obj.GetKind() {
		case "Deployment", "Certificate", "Issuer":
			continue // no kubelet and no cert-manager here: the bed plays both
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			if err := p.applyWebhookConfiguration(ctx, obj); err != nil {
				return err
			}
			continue
		}
		if err := apply(ctx, p.mgmt, obj); err != nil {
			return err
		}
	}
	return p.finish(ctx, mgmt, o)
}

// renderComponents renders infrastructure-components.yaml as `make release-manifests` does and
// substitutes its variables as clusterctl does, with clusterctl's labels on every object,
// Namespaces first, as kubectl and clusterctl order them.
func renderComponents(variables map[string]string) ([]*unstructured.Unstructured, error) {
	assets, err := release.Build(release.Options{Root: testenv.RepoRoot()})
	if err != nil {
		return nil, err
	}
	components, err := yamlprocessor.NewSimpleProcessor().Process(assets["infrastructure-components.yaml"], func(name string) (string, error) {
		if v, ok := variables[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s not set", name) // its default applies
	})
	if err != nil {
		return nil, fmt.Errorf("substituting the components' variables: %w", err)
	}
	objects, err := testenv.DecodeObjects(components)
	if err != nil {
		return nil, err
	}
	// clusterctl labels every object it installs as its provider's (clusterctl move discovers
	// the kinds to move by that label on their CRDs).
	for _, obj := range objects {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, ClusterctlLabels(ProviderManifestLabel))
		obj.SetLabels(labels)
	}
	slices.SortStableFunc(objects, func(a, b *unstructured.Unstructured) int {
		return boolRank(b.GetKind() == "Namespace") - boolRank(a.GetKind() == "Namespace")
	})
	return objects, nil
}

// prepare plays the kubelet and cert-manager for the components' objects: it reads the manager
// container from the Deployment, issues the webhook serving certificate the Certificate asks for
// (from the bed's own CA, valid for its DNS names and for the loopback address the bed calls it
// at) and picks the loopback ports of its health and webhook servers (the metrics address is a
// variable of the components).
func (p *Provider) prepare(objects []*unstructured.Unstructured) error {
	p.Objects = objects
	ports, err := testenv.FreeLoopbackPorts(2)
	if err != nil {
		return err
	}
	healthPort, webhookPort := ports[0], ports[1]
	p.HealthAddr = fmt.Sprintf("127.0.0.1:%d", healthPort)
	p.webhookPort = webhookPort

	var deployment *appsv1.Deployment
	var dnsNames []string
	for _, obj := range objects {
		switch obj.GetKind() {
		case "Deployment":
			deployment = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, deployment); err != nil {
				return err
			}
		case "Certificate":
			dnsNames, _, _ = unstructured.NestedStringSlice(obj.Object, "spec", "dnsNames")
		}
	}
	if deployment == nil {
		return errors.New("the components have no Deployment")
	}
	i := slices.IndexFunc(deployment.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "manager" })
	if i < 0 {
		return errors.New("the Deployment has no container named manager")
	}
	p.deployment = deployment
	p.Namespace, p.ServiceAccount = deployment.Namespace, deployment.Spec.Template.Spec.ServiceAccountName
	p.Container = deployment.Spec.Template.Spec.Containers[i]

	p.certDir = filepath.Join(p.workDir, "serving-certs")
	caPEM, err := writeServingCertificate(p.certDir, dnsNames, net.ParseIP("127.0.0.1"))
	if err != nil {
		return err
	}
	p.caPEM, p.webhookPort = caPEM, webhookPort
	// The apiserver calls the webhooks through their Service's ClusterIP, which nothing routes
	// here: the bed points them at the manager's loopback port instead (the Service wiring
	// itself is checked statically in test/config).
	p.toLoopback = func(cc *admissionv1.WebhookClientConfig) { toLoopback(cc, webhookPort, caPEM) }
	return nil
}

// toLoopback points a webhook's client configuration at the manager's loopback port, with the
// path of its Service, or of its URL when an earlier manager's routing pointed it at its own port.
func toLoopback(cc *admissionv1.WebhookClientConfig, port int, caPEM []byte) {
	path := "/"
	switch {
	case cc.Service != nil:
		path = ptr.Deref(cc.Service.Path, "/")
	case cc.URL != nil:
		if u, err := url.Parse(*cc.URL); err == nil && u.Path != "" {
			path = u.Path
		}
	}
	cc.URL = ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, path))
	cc.Service, cc.CABundle = nil, caPEM
}

// applyWebhookConfiguration applies a webhook configuration of the components pointed at the
// manager's loopback port.
func (p *Provider) applyWebhookConfiguration(ctx context.Context, obj *unstructured.Unstructured) error {
	switch obj.GetKind() {
	case "MutatingWebhookConfiguration":
		cfg := &admissionv1.MutatingWebhookConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cfg); err != nil {
			return err
		}
		for j := range cfg.Webhooks {
			p.toLoopback(&cfg.Webhooks[j].ClientConfig)
		}
		return apply(ctx, p.mgmt, cfg)
	case "ValidatingWebhookConfiguration":
		cfg := &admissionv1.ValidatingWebhookConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cfg); err != nil {
			return err
		}
		for j := range cfg.Webhooks {
			p.toLoopback(&cfg.Webhooks[j].ClientConfig)
		}
		return apply(ctx, p.mgmt, cfg)
	}
	return fmt.Errorf("%s is no webhook configuration", obj.GetKind())
}

// finish gives the process its ServiceAccount's kubeconfig, the Deployment's arguments with the
// bed's overrides, and the container's environment.
func (p *Provider) finish(ctx context.Context, mgmt *testenv.Environment, o ProviderOptions) error {
	kubeconfig, err := p.serviceAccountKubeconfig(ctx, mgmt)
	if err != nil {
		return err
	}
	// The container's command replaces the image's entrypoint; the binary is that entrypoint.
	args := slices.Clone(p.Container.Args)
	if len(p.Container.Command) > 1 {
		args = append(slices.Clone(p.Container.Command[1:]), args...)
	}
	p.Args = append(args,
		"--kubeconfig="+kubeconfig,
		"--health-addr="+p.HealthAddr,
		fmt.Sprintf("--webhook-port=%d", p.webhookPort),
		"--webhook-cert-dir="+p.certDir,
	)
	p.Args = append(p.Args, o.ExtraArgs...)
	p.env, err = ContainerEnv(p.Container, p.deployment)
	return err
}

// ContainerEnv resolves the container's environment as the kubelet would: values, and the
// Downward API fields a Deployment can name here (the namespace, and the container's own
// resource limits).
func ContainerEnv(c corev1.Container, d *appsv1.Deployment) ([]string, error) {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+d.Namespace)
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.ContainerName == c.Name:
			ref := e.ValueFrom.ResourceFieldRef
			limit, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(ref.Resource, "limits."))]
			if !strings.HasPrefix(ref.Resource, "limits.") || !ok {
				return nil, fmt.Errorf("environment variable %s: the container has no %s", e.Name, ref.Resource)
			}
			divisor := ref.Divisor
			if divisor.IsZero() {
				divisor = resource.MustParse("1")
			}
			// As the kubelet: the limit divided by the divisor, rounded up.
			env = append(env, fmt.Sprintf("%s=%d", e.Name, (limit.Value()+divisor.Value()-1)/divisor.Value()))
		default:
			return nil, fmt.Errorf("environment variable %s: the bed resolves only values, metadata.namespace and the container's limits", e.Name)
		}
	}
	return env, nil
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the Deployment's
// ServiceAccount, with a token from the TokenRequest API, as a pod's projected token would.
func (p *Provider) serviceAccountKubeconfig(ctx context.Context, mgmt *testenv.Environment) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.ServiceAccount}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := p.mgmt.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", p.Namespace, p.ServiceAccount, err)
	}
	tokenFile := filepath.Join(p.workDir, "token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"management": {Server: mgmt.Config.Host, CertificateAuthorityData: mgmt.Config.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"manager": {TokenFile: tokenFile}},
		Contexts:       map[string]*clientcmdapi.Context{"management": {Cluster: "management", AuthInfo: "manager"}},
		CurrentContext: "management",
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.workDir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// Start runs the manager process and waits until it is ready (its webhooks serve).
func (p *Provider) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start(ctx)
}

// start is Start with p.mu held.
func (p *Provider) start(ctx context.Context) error {
	if p.cmd != nil {
		return errors.New("the manager is running")
	}
	if p.restart != nil {
		p.restart.Stop()
		p.restart = nil
	}
	p.ending = false
	logFile, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintln(logFile, startMarker)
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), p.binary, p.Args...)
	cmd.Env = p.env
	cmd.Dir = p.workDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting the manager: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		done <- err
		p.exited(cmd, err)
	}()
	p.cmd, p.done, p.started = cmd, done, time.Now()
	readyURL := "http://" + p.HealthAddr + "/readyz"
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			done <- err
			return false, fmt.Errorf("the manager exited: %v (log: %s); its last lines:\n%s", err, p.LogFile, logTail(p.LogFile, 20))
		default:
		}
		resp, err := http.Get(readyURL)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the manager to be ready: %w", err)
	}
	return nil
}

// exited is told when a manager process ends. One the bed did not end (a crash, or leadership
// lost while the management apiserver was too slow to renew its lease) is started again after
// the kubelet's back-off, as its Deployment's pod would be.
func (p *Provider) exited(cmd *exec.Cmd, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ending || p.cmd != cmd {
		return
	}
	p.restarts++
	p.lastExit = err
	if p.backoff.Initial == 0 {
		p.backoff = newRestartBackoff()
	}
	backoff := p.backoff.Next(time.Since(p.started))
	_, _ = fmt.Fprintf(logWriter(p.LogFile), "--- bed: the manager ended by itself (%v); starting it again in %s, as the kubelet would (restart %d) ---\n", err, backoff, p.restarts)
	p.restart = time.AfterFunc(backoff, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cmd != cmd || p.ending {
			return
		}
		p.cmd, p.restart = nil, nil
		// A start that fails ends its process, which comes back here.
		_ = p.start(context.Background())
	})
}

// logWriter appends to a log file (a line of the bed's own among the manager's).
func logWriter(path string) io.Writer {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return io.Discard
	}
	return &closingWriter{f}
}

type closingWriter struct{ f *os.File }

func (w *closingWriter) Write(b []byte) (int, error) {
	defer w.f.Close()
	return w.f.Write(b)
}

// Restarts says how many times the manager ended by itself and was started again, and how it
// ended the last time.
func (p *Provider) Restarts() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts, p.lastExit
}

// stopRestart cancels a pending restart and marks what follows as the bed's own doing. The
// caller holds p.mu.
func (p *Provider) stopRestart() {
	p.ending = true
	if p.restart != nil {
		p.restart.Stop()
		p.restart = nil
	}
}

// Stop ends the manager as the kubelet does: SIGTERM, then SIGKILL after the grace period.
func (p *Provider) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopRestart()
	if p.cmd == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		err = <-p.done
	}
	p.cmd = nil
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = nil // a signal's end is the expected one
	}
	return err
}

// Kill ends the manager at once (SIGKILL), as a crash or an evicted pod would.
func (p *Provider) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopRestart()
	if p.cmd == nil {
		return nil
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
	return nil
}

// WebhookEndpoint is the manager's webhook port as any peer on the network reaches it: its base
// URL and the CA that signed its serving certificate.
func (p *Provider) WebhookEndpoint() (baseURL string, caPEM []byte) {
	return fmt.Sprintf("https://127.0.0.1:%d", p.webhookPort), p.caPEM
}

// Pid is the running manager's process ID, 0 when it is not running (the bench measures its CPU
// time and memory from /proc).
func (p *Provider) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Log returns the manager's output so far.
func (p *Provider) Log() ([]byte, error) { return os.ReadFile(p.LogFile) }

// Exited says whether the manager the bed started has ended without being stopped or killed
// by the bed (a crash, or leadership lost), and how, and has not been started again yet (the
// bed restarts it after the kubelet's back-off; Restarts counts those).
func (p *Provider) Exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false, nil
	}
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// startMarker is the line the bed writes into the log before each start of the manager.
const startMarker = "--- bed: the manager starts ---"

// WorkersStarted says whether the manager, as it runs now, has started the workers of the named
// controller: it holds the leadership and the controller's watches have synced. (Ready, in the
// sense of /readyz, comes before both.)
func (p *Provider) WorkersStarted(controller string) (bool, error) {
	log, err := p.Log()
	if err != nil {
		return false, err
	}
	if i := bytes.LastIndex(log, []byte(startMarker)); i >= 0 {
		log = log[i:]
	}
	return bytes.Contains(log, []byte(`"Starting workers" controller="`+controller+`"`)), nil
}

// LogTail is the last n lines of the manager's output.
func (p *Provider) LogTail(n int) string { return logTail(p.LogFile, n) }

func (p *Provider) cleanup() error {
	if p.stopRouting != nil {
		p.stopRouting()
	}
	return errors.Join(p.Stop(), os.RemoveAll(p.workDir))
}

// apply creates or updates obj in the management cluster, as `kubectl apply` would for these
// fresh objects; an object read from the cluster (it has a resource version) is updated.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	var err error
	if obj.GetResourceVersion() != "" {
		err = c.Update(ctx, obj)
	} else {
		err = c.Create(ctx, obj)
	}
	if apierrors.IsAlreadyExists(err) {
		existing := obj.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
			return err
		}
		obj.SetResourceVersion(existing.GetResourceVersion())
		err = c.Update(ctx, obj)
	}
	if err != nil {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		return fmt.Errorf("applying %s %s: %w", kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// MetricsClient is an HTTPS client for the manager's metrics endpoint (its certificate is
// self-signed, as controller-runtime makes it when none is given).
func MetricsClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
}

// ManagerBinary extracts the manager binary from the manager image `make images` built, into
// dir (see ImageBinaries).
func ManagerBinary(dir string) (string, error) {
	manager, _, err := ImageBinaries(dir)
	return manager, err
}

// ImageBinaries extracts the entrypoints of the manager and CCM images `make images` built into
// dir, so that what the tests run is what ships: IMAGES_DIR's archives when `make test` built the
// images first, else images built now with `make images` into dir.
func ImageBinaries(dir string) (manager, ccm string, err error) {
	images := os.Getenv("IMAGES_DIR")
	if images == "" {
		images = filepath.Join(dir, "images")
		cmd := exec.Command("make", "--no-print-directory", "images", "IMAGES_DIR="+images)
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("make images: %w\n%s", err, out)
		}
	}
	if manager, err = imageEntrypoint(filepath.Join(images, "manager.oci.tar"), dir); err != nil {
		return "", "", err
	}
	ccm, err = imageEntrypoint(filepath.Join(images, "ccm.oci.tar"), dir)
	return manager, ccm, err
}

// imageEntrypoint extracts an image's entrypoint binary into dir, under its own name.
func imageEntrypoint(archive, dir string) (string, error) {
	img, err := ociimages.Open(archive)
	if err != nil {
		return "", err
	}
	cfg, err := img.Config()
	if err != nil {
		return "", err
	}
	if len(cfg.Entrypoint) == 0 {
		return "", fmt.Errorf("the image %s has no entrypoint", filepath.Base(archive))
	}
	binary := filepath.Join(dir, filepath.Base(cfg.Entrypoint[0]))
	if err := img.Extract(cfg.Entrypoint[0], binary); err != nil {
		return "", fmt.Errorf("extracting %s from %s: %w", cfg.Entrypoint[0], filepath.Base(archive), err)
	}
	return binary, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// logTail returns the last n lines of a log file, for an error that would otherwise point at a
// temporary file gone by the time anyone reads it.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ApplyValidatingWebhookFile applies a ValidatingWebhookConfiguration the repository ships for
// admins to apply (config/management/...), with its Service reference pointed at the manager's
// loopback port as the components' webhooks are; it returns a function that deletes it.
func (p *Provider) ApplyValidatingWebhookFile(ctx context.Context, path string) (func() error, error) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path))
	if err != nil {
		return nil, err
	}
	cfg := &admissionv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for j := range cfg.Webhooks {
		p.toLoopback(&cfg.Webhooks[j].ClientConfig)
	}
	if err := apply(ctx, p.mgmt, cfg); err != nil {
		return nil, err
	}
	return func() error { return client.IgnoreNotFound(p.mgmt.Delete(context.Background(), cfg)) }, nil
}

// ApplyExtensionConfigFile registers a Runtime SDK extension the repository ships for admins to
// apply (config/inplace/...): its Service reference pointed at the manager's loopback port, and
// the Secret its CA-injection annotation names made as cert-manager would (ca.crt: the bed's CA),
// for CAPI's ExtensionConfig controller to inject. It returns a function that deletes both.
func (p *Provider) ApplyExtensionConfigFile(ctx context.Context, path string) (func() error, error) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path))
	if err != nil {
		return nil, err
	}
	objs, err := testenv.DecodeObjects(data)
	if err != nil || len(objs) != 1 || objs[0].GetKind() != "ExtensionConfig" {
		return nil, fmt.Errorf("%s: want one ExtensionConfig (%v)", path, err)
	}
	ext := objs[0]
	service, _, _ := unstructured.NestedMap(ext.Object, "spec", "clientConfig", "service")
	servicePath, _ := service["path"].(string)
	if err := unstructured.SetNestedMap(ext.Object, map[string]any{
		"url": fmt.Sprintf("https://127.0.0.1:%d/%s", p.webhookPort, strings.TrimPrefix(servicePath, "/")),
	}, "spec", "clientConfig"); err != nil {
		return nil, err
	}
	namespace, name, ok := strings.Cut(ext.GetAnnotations()["runtime.cluster.x-k8s.io/inject-ca-from-secret"], "/")
	if !ok {
		return nil, fmt.Errorf("%s: no runtime.cluster.x-k8s.io/inject-ca-from-secret annotation", path)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{"ca.crt": p.caPEM}}
	if err := apply(ctx, p.mgmt, secret); err != nil {
		return nil, err
	}
	if err := p.mgmt.Create(ctx, ext); err != nil {
		return nil, err
	}
	return func() error {
		return errors.Join(client.IgnoreNotFound(p.mgmt.Delete(context.Background(), ext)), client.IgnoreNotFound(p.mgmt.Delete(context.Background(), secret)))
	}, nil
}
