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
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// IPAMProvider is Cluster API's in-cluster IPAM provider
// (sigs.k8s.io/cluster-api-ipam-provider-in-cluster) running as its own process against the
// management apiserver: the real allocator of InClusterIPPool and GlobalInClusterIPPool
// addresses. It is built on an older Cluster API than the provider, so it is its own binary,
// built by hack/ensure-ipam-provider.sh.
//
// Its pool webhooks (defaulting and validation) serve on a loopback port with a certificate of
// the bed's own CA, and its webhook configurations (named `ipam-in-cluster-...`) point there, as
// the bed does for the provider's own. Its pool CRDs are installed from their bases, without the
// conversion webhook its kustomization adds: pools are used at their storage version, v1alpha2.
// It authenticates as the management cluster's admin (its own RBAC is not under test).
type IPAMProvider struct {
	LogFile string

	mgmt     client.Client
	webhooks []client.Object
	mu       sync.Mutex
	process  *process
	workDir  string
}

// IPAMProviderDir is where hack/ensure-ipam-provider.sh put the provider's binary (`manager`)
// and CRDs (`crd/`): $IPAM_PROVIDER_DIR when set (make test sets it), else the script is run,
// which builds them once into bin/.
func IPAMProviderDir() (string, error) {
	return testenv.BuiltDir("IPAM_PROVIDER_DIR", "ensure-ipam-provider.sh")
}

// StartIPAMProvider installs the in-cluster IPAM provider's CRDs into the management cluster and
// runs the provider until its Stop (or the bed's) ends it. Cluster API's own IPAddressClaim and
// IPAddress CRDs are the management cluster's already.
func (b *Bed) StartIPAMProvider(ctx context.Context) (*IPAMProvider, error) {
	dir, err := IPAMProviderDir()
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(b.Management.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "crd")}, ErrorIfPathMissing: true, MaxTime: testenv.InstallWait,
	}); err != nil {
		return nil, fmt.Errorf("installing the IPAM provider's CRDs: %w", err)
	}
	work, err := os.MkdirTemp("", "ipam-provider-")
	if err != nil {
		return nil, err
	}
	p := &IPAMProvider{workDir: work, LogFile: filepath.Join(work, "ipam-provider.log")}
	kubeconfig, err := b.Management.Kubeconfig()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	kubeconfigPath := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	ports, err := testenv.FreeLoopbackPorts(2)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[0])
	certDir := filepath.Join(work, "serving-certs")
	caPEM, err := writeServingCertificate(certDir, []string{"localhost"}, net.ParseIP("127.0.0.1"))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	p.mgmt = b.Management.Client
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), filepath.Join(dir, "manager"),
		"--kubeconfig="+kubeconfigPath,
		fmt.Sprintf("--webhook-port=%d", ports[1]),
		"--webhook-cert-dir="+certDir,
		"--health-probe-bind-address="+health,
		"--diagnostics-address=0", // no metrics server (controller-runtime reads "0" as off)
		"--leader-elect=false",
	)
	cmd.Dir = work
	// Its readiness check does not cover the webhook server: it must answer TLS with the
	// certificate the configurations will trust as well.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	webhookAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	p.process, err = startProcess(ctx, "IPAM provider", cmd, p.LogFile, time.Minute, httpReady("http://"+health+"/readyz"),
		tlsReady(webhookAddr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	b.mu.Lock()
	b.ipam = append(b.ipam, p)
	b.mu.Unlock()
	if err := p.installWebhooks(ctx, filepath.Join(dir, "webhook", "manifests.yaml"), webhookAddr, caPEM); err != nil {
		return nil, err
	}
	return p, nil
}

// installWebhooks applies the provider's webhook configurations, named as its kustomization
// would prefix them, pointed at its loopback port.
func (p *IPAMProvider) installWebhooks(ctx context.Context, manifests, addr string, caPEM []byte) error {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	objs, err := testenv.DecodeObjects(data)
	if err != nil {
		return err
	}
	toLoopback := func(cc *admissionv1.WebhookClientConfig) {
		cc.URL = ptr.To("https://" + addr + ptr.Deref(cc.Service.Path, "/"))
		cc.Service, cc.CABundle = nil, caPEM
	}
	for _, obj := range objs {
		var cfg client.Object
		switch obj.GetKind() {
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, m); err != nil {
				return err
			}
			for i := range m.Webhooks {
				toLoopback(&m.Webhooks[i].ClientConfig)
			}
			cfg = m
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, v); err != nil {
				return err
			}
			for i := range v.Webhooks {
				toLoopback(&v.Webhooks[i].ClientConfig)
			}
			cfg = v
		default:
			continue
		}
		cfg.SetName("ipam-in-cluster-" + cfg.GetName())
		if err := apply(ctx, p.mgmt, cfg); err != nil {
			return fmt.Errorf("applying the IPAM provider's %s: %w", obj.GetKind(), err)
		}
		p.webhooks = append(p.webhooks, cfg)
	}
	if len(p.webhooks) == 0 {
		return fmt.Errorf("%s holds no webhook configuration", manifests)
	}
	return nil
}

// Stop ends the IPAM provider (SIGTERM, SIGKILL after 10 s) and removes its files.
func (p *IPAMProvider) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Its webhooks go first: with failurePolicy Fail they would refuse every pool write once
	// nothing serves them.
	var errs []error
	for _, cfg := range p.webhooks {
		errs = append(errs, client.IgnoreNotFound(p.mgmt.Delete(context.Background(), cfg)))
	}
	p.webhooks = nil
	p.process.stop()
	return errors.Join(append(errs, os.RemoveAll(p.workDir))...)
}

// Log returns the IPAM provider's output so far.
func (p *IPAMProvider) Log() ([]byte, error) { return os.ReadFile(p.LogFile) }
