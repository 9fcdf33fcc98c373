package bed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// IPAMProvider is Cluster API's in-cluster IPAM provider
// (sigs.k8s.io/cluster-api-ipam-provider-in-cluster) running as its own process against the
// management apiserver: the real allocator of InClusterIPPool and GlobalInClusterIPPool
// addresses. It is built on an older Cluster API than the provider, so it is its own binary,
// built by hack/ensure-ipam-provider.sh.
//
// It runs with its webhooks off (--webhook-port=0, which its main supports): its pool CRDs are
// installed from their bases, without the conversion webhook its kustomization adds, and the
// tests create pools at the storage version (v1alpha2) with every field set, so its defaulting
// and validation of pools are not exercised here. It authenticates as the management cluster's
// admin (its own RBAC is not under test).
type IPAMProvider struct {
	LogFile string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan error
	workDir string
}

// IPAMProviderDir is where hack/ensure-ipam-provider.sh put the provider's binary (`manager`)
// and CRDs (`crd/`): $IPAM_PROVIDER_DIR when set (make test sets it), else the script is run,
// which builds them once into bin/.
func IPAMProviderDir() (string, error) {
	if dir := os.Getenv("IPAM_PROVIDER_DIR"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "ensure-ipam-provider.sh")).Output() //nolint:gosec // our own script
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("hack/ensure-ipam-provider.sh: %w: %s", err, exit.Stderr)
		}
		return "", fmt.Errorf("hack/ensure-ipam-provider.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// StartIPAMProvider installs the in-cluster IPAM provider's CRDs into the management cluster and
// runs the provider until StopIPAM (or Stop) ends it. Cluster API's own IPAddressClaim and
// IPAddress CRDs are the management cluster's already.
func (b *Bed) StartIPAMProvider(ctx context.Context) (*IPAMProvider, error) {
	dir, err := IPAMProviderDir()
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(b.Management.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "crd")}, ErrorIfPathMissing: true,
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
	ports, err := freeLoopbackPorts(1)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[0])
	logFile, err := os.Create(p.LogFile)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(work))
	}
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), filepath.Join(dir, "manager"),
		"--kubeconfig="+kubeconfigPath,
		"--webhook-port=0",
		"--health-probe-bind-address="+health,
		"--diagnostics-address=0", // no metrics server (controller-runtime reads "0" as off)
		"--leader-elect=false",
	)
	cmd.Dir = work
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, errors.Join(fmt.Errorf("starting the IPAM provider: %w", err), os.RemoveAll(work))
	}
	p.cmd, p.done = cmd, make(chan error, 1)
	go func() {
		p.done <- cmd.Wait()
		_ = logFile.Close()
	}()
	b.mu.Lock()
	b.ipam = append(b.ipam, p)
	b.mu.Unlock()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-p.done:
			p.done <- err
			return false, fmt.Errorf("the IPAM provider exited: %v (log: %s)", err, p.LogFile)
		default:
		}
		resp, err := http.Get("http://" + health + "/readyz") //nolint:gosec,noctx // a loopback health check
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the IPAM provider to be ready: %w", err)
	}
	return p, nil
}

// Stop ends the IPAM provider (SIGTERM, SIGKILL after 10 s) and removes its files.
func (p *IPAMProvider) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.cmd = nil
	}
	return os.RemoveAll(p.workDir)
}

// Log returns the IPAM provider's output so far.
func (p *IPAMProvider) Log() ([]byte, error) { return os.ReadFile(p.LogFile) }
