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
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// CAPIProviderSpec names Cluster API managers that the bed runs as they ship (a pair of bootstrap
// and control-plane providers, or CAPI's core): each manager as its own process (built by
// hack/ensure-providers.sh from the module, on its own Cluster API and controller-runtime
// versions), its CRDs and webhook configurations from the module's config/, its webhooks served
// by the process with a certificate the bed issues, with the arguments of its config/manager
// Deployment. Unlike our own manager they authenticate as the management cluster's admin: their
// RBAC is theirs to test.
type CAPIProviderSpec struct {
	// Name names the directory of hack/ensure-providers.sh's build (with the version): rke2, k3s, capi.
	Name, Module, Version string
	// Parts are the managers' directories in the module, each with its config/ (bootstrap and
	// controlplane when empty); "." is the module's root (CAPI's core).
	Parts []string
	// Flags builds the flags a process outside a pod needs: where to find the management cluster,
	// where to listen, where the webhook certificate is.
	Flags func(p *CAPIProviderProcess) []string
	// Env is extra environment for each process.
	Env func(p *CAPIProviderProcess) []string
	// Health says the managers serve /readyz on HealthAddr.
	Health bool
	// Variables are clusterctl variables for the managers' Deployments (their defaults apply for
	// the rest): the experimental features' EXP_* gates, as `clusterctl init` takes them.
	Variables map[string]string
}

func (s CAPIProviderSpec) parts() []string {
	if len(s.Parts) == 0 {
		return []string{"bootstrap", "controlplane"}
	}
	return s.Parts
}

// partName names a part in logs and file names: its directory ('/' as '-'), "core" for the
// module's root.
func partName(part string) string {
	if part == "." {
		return "core"
	}
	return strings.ReplaceAll(part, "/", "-")
}

// syncPeriod shortens the providers' informer resync (default 10 minutes). Their control planes
// fail to reconcile until the guest answers and retry with growing backoff; no watched object
// changes when the guest comes up (the CCM that would set the Nodes' providerIDs arrives only
// once the control plane is initialised), so only the resync brings the next reconcile. A real
// cluster waits for it too, up to the full period; the tests do not.
const syncPeriod = "--sync-period=10s"

// capiFlags are the flags of a manager written as CAPI's own are (util/flags, controller-runtime's
// --kubeconfig).
func capiFlags(p *CAPIProviderProcess) []string {
	return []string{
		"--kubeconfig=" + p.kubeconfig,
		"--health-addr=" + p.HealthAddr,
		"--diagnostics-address=" + p.MetricsAddr, "--insecure-diagnostics",
		"--webhook-port=" + strconv.Itoa(p.WebhookPort),
		"--webhook-cert-dir=" + p.certDir,
		syncPeriod,
	}
}

// RKE2 is rancher/cluster-api-provider-rke2 (bootstrap and control plane).
var RKE2 = CAPIProviderSpec{
	Name: "rke2", Module: "github.com/rancher/cluster-api-provider-rke2", Version: "v0.21.0",
	Health: true, Flags: capiFlags,
}

// PreviousCAPICore is the core manager of the Cluster API minor before the one the provider is
// built with (go.mod), with its own CRDs and webhooks: what a management cluster that has not
// upgraded CAPI yet runs (Rancher Turtles v0.27 installs CAPI v1.13).
var PreviousCAPICore = CAPIProviderSpec{
	Name: "capi", Module: "sigs.k8s.io/cluster-api", Version: "v1.13.6", Parts: []string{"."},
	Health: true, Flags: capiFlags,
}

// CAPIVersion is the Cluster API the provider is built with (go.mod; test/config checks it).
const CAPIVersion = "v1.14.2"

// InPlaceUpdatesCAPI is go.mod's Cluster API (core, kubeadm bootstrap and control plane) as
// `EXP_IN_PLACE_UPDATES=true EXP_RUNTIME_SDK=true clusterctl init` installs it: its in-place
// updates and Runtime SDK gates on. Gates are process-wide, so the bed's in-process CAPI (gates
// off, as clusterctl's defaults) cannot have them for one scenario: this runs them as processes.
var InPlaceUpdatesCAPI = CAPIProviderSpec{
	Name: "capi", Module: "sigs.k8s.io/cluster-api", Version: CAPIVersion,
	Parts:  []string{"core", "bootstrap/kubeadm", "controlplane/kubeadm"},
	Health: true, Flags: capiFlags,
	Variables: map[string]string{"EXP_IN_PLACE_UPDATES": "true", "EXP_RUNTIME_SDK": "true"},
}

// K3s is k3s-io/cluster-api-k3s (bootstrap and control plane). Its managers have no flags for the
// webhook server: they listen on :9443 (a literal in both main.go files, which
// hack/ensure-providers.sh makes read CAPI_K3S_WEBHOOK_PORT, or the two processes could not share
// a host) with the certificate in controller-runtime's default directory under TMPDIR, and serve
// no health endpoint (the bed waits for the webhook server instead).
var K3s = CAPIProviderSpec{
	Name: "k3s", Module: "github.com/k3s-io/cluster-api-k3s", Version: "v0.4.0",
	Flags: func(p *CAPIProviderProcess) []string {
		return []string{"--kubeconfig=" + p.kubeconfig, "--metrics-addr=" + p.MetricsAddr, syncPeriod}
	},
	Env: func(p *CAPIProviderProcess) []string {
		return []string{"TMPDIR=" + p.tmpDir, "CAPI_K3S_WEBHOOK_PORT=" + strconv.Itoa(p.WebhookPort)}
	},
}

// CAPIProviderProcess is one manager (bootstrap, control plane or core) of a CAPIProviderSpec.
type CAPIProviderProcess struct {
	// Part is the manager's directory in the module: "bootstrap", "controlplane", "." (core).
	Part string
	// HealthAddr and MetricsAddr are loopback addresses; WebhookPort the webhook server's port.
	HealthAddr, MetricsAddr string
	WebhookPort             int
	// LogFile holds the process's output.
	LogFile string

	binary, kubeconfig, certDir, tmpDir string
	caPEM                               []byte
	process                             *process
}

// CAPIProviders are the running managers of one CAPIProviderSpec.
type CAPIProviders struct {
	Spec      CAPIProviderSpec
	Processes []*CAPIProviderProcess
	// ModuleDir is the provider's module in the module cache.
	ModuleDir string

	workDir string
	mu      sync.Mutex
}

// StartCAPIProviders installs a provider pair's CRDs and webhooks into the management cluster
// and runs its managers, once per bed: a second call returns the running ones. The bed stops
// them after deleting every Cluster.
func (b *Bed) StartCAPIProviders(ctx context.Context, spec CAPIProviderSpec) (*CAPIProviders, error) {
	b.capiMu.Lock()
	defer b.capiMu.Unlock()
	b.mu.Lock()
	for _, p := range b.capiProviders {
		if p.Spec.Name == spec.Name {
			b.mu.Unlock()
			return p, nil
		}
	}
	b.mu.Unlock()
	p, err := startCAPIProviders(ctx, b.Management, spec)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.capiProviders = append(b.capiProviders, p)
	b.mu.Unlock()
	return p, nil
}

// startCAPIProviders runs spec's managers against any management cluster; the caller stops them.
func startCAPIProviders(ctx context.Context, mgmt *testenv.Environment, spec CAPIProviderSpec) (*CAPIProviders, error) {
	binDir, err := providerBinaries(spec)
	if err != nil {
		return nil, err
	}
	moduleDir, err := os.ReadFile(filepath.Join(binDir, "module-dir"))
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "capi-"+spec.Name+"-")
	if err != nil {
		return nil, err
	}
	p := &CAPIProviders{Spec: spec, ModuleDir: strings.TrimSpace(string(moduleDir)), workDir: work}
	if err := p.start(ctx, mgmt, binDir); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// providerBinaries returns <name>-<version> in hack/ensure-providers.sh's directory
// (PROVIDERS_DIR, which `make test` sets, else the script's, built when missing).
func providerBinaries(spec CAPIProviderSpec) (string, error) {
	root, err := testenv.BuiltDir("PROVIDERS_DIR", "ensure-providers.sh")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, spec.Name+"-"+spec.Version)
	for _, part := range spec.parts() {
		if _, err := os.Stat(filepath.Join(dir, partName(part)+"-manager")); err != nil {
			return "", fmt.Errorf("%s has no %s manager (hack/ensure-providers.sh builds it): %w", dir, part, err)
		}
	}
	return dir, nil
}

func (p *CAPIProviders) start(ctx context.Context, mgmt *testenv.Environment, binDir string) error {
	kubeconfig, err := mgmt.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(p.workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	for _, part := range p.Spec.parts() {
		name := partName(part)
		ports, err := testenv.FreeLoopbackPorts(3)
		if err != nil {
			return err
		}
		proc := &CAPIProviderProcess{
			Part:        part,
			HealthAddr:  fmt.Sprintf("127.0.0.1:%d", ports[0]),
			MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
			WebhookPort: ports[2],
			LogFile:     filepath.Join(p.workDir, name+".log"),
			binary:      filepath.Join(binDir, name+"-manager"),
			kubeconfig:  kubeconfigPath,
			tmpDir:      filepath.Join(p.workDir, name+"-tmp"),
		}
		// controller-runtime's default certificate directory, under the process's TMPDIR, so
		// that a provider without a --webhook-cert-dir flag finds it too.
		proc.certDir = filepath.Join(proc.tmpDir, "k8s-webhook-server", "serving-certs")
		if proc.caPEM, err = writeServingCertificate(proc.certDir, []string{"webhook-service.system.svc"}, net.ParseIP("127.0.0.1")); err != nil {
			return err
		}
		p.Processes = append(p.Processes, proc)
		// The CRDs first: the manager's caches need them; their conversion goes to the manager.
		if err := p.installCRDs(ctx, mgmt.Client, proc); err != nil {
			return err
		}
		if err := p.run(ctx, proc); err != nil {
			return err
		}
		if err := p.installWebhooks(ctx, mgmt.Client, proc); err != nil {
			return err
		}
	}
	return nil
}

// installCRDs renders the part's config/crd as its kustomization does (contract labels,
// conversion webhook) and points the conversion webhook at the process.
func (p *CAPIProviders) installCRDs(ctx context.Context, c client.Client, proc *CAPIProviderProcess) error {
	rendered, err := testenv.Kustomize(filepath.Join(p.ModuleDir, proc.Part, "config", "crd"))
	if err != nil {
		return err
	}
	objs, err := testenv.DecodeObjects(rendered)
	if err != nil {
		return err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, crd); err != nil {
			return err
		}
		// cainjector's annotation: the bed injects the CA itself.
		delete(crd.Annotations, "cert-manager.io/inject-ca-from")
		if c := crd.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter && c.Webhook != nil && c.Webhook.ClientConfig != nil {
			c.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
				URL:      ptr.To(proc.url(ptr.Deref(ptr.Deref(c.Webhook.ClientConfig.Service, apiextensionsv1.ServiceReference{}).Path, ""))),
				CABundle: proc.caPEM,
			}
		}
		if err := apply(ctx, c, crd); err != nil {
			return err
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return fmt.Errorf("%s %s: no CRDs in %s/config/crd", p.Spec.Module, partName(proc.Part), proc.Part)
	}
	// Established, and known to the management clients' discovery.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, err
			}
			established := false
			for _, c := range got.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// installWebhooks installs the part's webhook configurations (config/webhook/manifests.yaml),
// pointed at the process's loopback port with the bed's CA, as cainjector would inject it.
func (p *CAPIProviders) installWebhooks(ctx context.Context, c client.Client, proc *CAPIProviderProcess) error {
	data, err := os.ReadFile(filepath.Join(p.ModuleDir, proc.Part, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	objs, err := testenv.DecodeObjects(data)
	if err != nil {
		return err
	}
	prefix := p.Spec.Name + "-" + partName(proc.Part) + "-"
	toLoopback := func(cc *admissionv1.WebhookClientConfig) {
		path := ""
		if cc.Service != nil {
			path = ptr.Deref(cc.Service.Path, "")
		}
		cc.URL, cc.Service, cc.CABundle = ptr.To(proc.url(path)), nil, proc.caPEM
	}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "MutatingWebhookConfiguration":
			cfg := &admissionv1.MutatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cfg); err != nil {
				return err
			}
			cfg.Name = prefix + cfg.Name
			for i := range cfg.Webhooks {
				toLoopback(&cfg.Webhooks[i].ClientConfig)
			}
			if err := apply(ctx, c, cfg); err != nil {
				return err
			}
		case "ValidatingWebhookConfiguration":
			cfg := &admissionv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cfg); err != nil {
				return err
			}
			cfg.Name = prefix + cfg.Name
			for i := range cfg.Webhooks {
				toLoopback(&cfg.Webhooks[i].ClientConfig)
			}
			if err := apply(ctx, c, cfg); err != nil {
				return err
			}
		}
	}
	return nil
}

func (proc *CAPIProviderProcess) url(path string) string {
	if path == "" {
		path = "/"
	}
	return fmt.Sprintf("https://127.0.0.1:%d%s", proc.WebhookPort, path)
}

// run starts the process and waits until its webhook server answers (and its health endpoint,
// where it has one).
func (p *CAPIProviders) run(ctx context.Context, proc *CAPIProviderProcess) error {
	args, err := p.deploymentArgs(proc.Part)
	if err != nil {
		return err
	}
	// The bed's flags come last: where one repeats a Deployment's flag, it wins.
	args = append(args, p.Spec.Flags(proc)...)
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), proc.binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + proc.tmpDir, "TMPDIR=" + proc.tmpDir}
	if p.Spec.Env != nil {
		cmd.Env = append(cmd.Env, p.Spec.Env(proc)...)
	}
	cmd.Dir = p.workDir
	ready := []func() bool{tlsReady(net.JoinHostPort("127.0.0.1", strconv.Itoa(proc.WebhookPort)), &tls.Config{InsecureSkipVerify: true})}
	if p.Spec.Health {
		ready = append(ready, httpReady("http://"+proc.HealthAddr+"/readyz"))
	}
	proc.process, err = startProcess(ctx, fmt.Sprintf("%s %s manager", p.Spec.Name, partName(proc.Part)), cmd, proc.LogFile, 2*time.Minute, ready...)
	return err
}

// deploymentArgs are the arguments of the manager container in the part's config/manager (the
// Deployment clusterctl installs), with the spec's variables and every other at its default,
// less leader election: one process each here.
func (p *CAPIProviders) deploymentArgs(part string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(p.ModuleDir, part, "config", "manager", "manager.yaml"))
	if err != nil {
		return nil, err
	}
	data, err = yamlprocessor.NewSimpleProcessor().Process(data, func(name string) (string, error) {
		if v, ok := p.Spec.Variables[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s not set", name) // its default applies
	})
	if err != nil {
		return nil, err
	}
	objs, err := testenv.DecodeObjects(data)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
			return nil, err
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				return slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool {
					return strings.HasPrefix(a, "--leader-elect") || strings.HasPrefix(a, "--enable-leader-election")
				}), nil
			}
		}
	}
	return nil, fmt.Errorf("%s/config/manager/manager.yaml has no Deployment with a manager container", part)
}

// Logs returns each process's output so far, by part.
func (p *CAPIProviders) Logs() map[string]string {
	logs := map[string]string{}
	for _, proc := range p.Processes {
		data, _ := os.ReadFile(proc.LogFile)
		logs[partName(proc.Part)] = string(data)
	}
	return logs
}

// stop ends the processes as the kubelet would (SIGTERM, then SIGKILL) and removes their files.
func (p *CAPIProviders) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, proc := range p.Processes {
		proc.process.stop()
	}
	return os.RemoveAll(p.workDir)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
