package harvestersim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Harvester's own programs (its load balancer's controller and webhook, its admission webhook
// server) run as processes against the simulated Harvester's apiserver, built from the Go module
// proxy by scripts under hack/. HARVESTER_KEEP_LOGS=1 keeps their logs (and their temporary
// directory) after the simulated Harvester stops, for reading what Harvester's code did.

// processes are one program's running processes and their working directory.
type processes struct {
	what string // "Harvester's load balancer", for errors
	work string
	mu   sync.Mutex
	cmds []*process
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  string
}

func newProcesses(what, prefix string) (*processes, error) {
	work, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	return &processes{what: what, work: work}, nil
}

// writeFile writes a file (a kubeconfig, a token) into the working directory, readable by us only.
func (p *processes) writeFile(name string, data []byte) (string, error) {
	path := filepath.Join(p.work, name)
	return path, os.WriteFile(path, data, 0o600)
}

func (p *processes) start(ctx context.Context, name, path string, args, env []string) error {
	logPath := filepath.Join(p.work, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), path, args...)
	cmd.Dir = p.work
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s %s: %w", p.what, name, err)
	}
	proc := &process{name: name, cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() {
		proc.done <- cmd.Wait()
		_ = logFile.Close()
	}()
	p.mu.Lock()
	p.cmds = append(p.cmds, proc)
	p.mu.Unlock()
	return nil
}

// waitForWebhook waits for a webhook process to serve TLS at its loopback port with the
// certificate caPEM signed and to register its configurations (each of configs, by name).
func (p *processes) waitForWebhook(ctx context.Context, c client.Client, name string, port int, caPEM []byte, timeout time.Duration, configs ...client.Object) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		for _, cfg := range configs {
			if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s %s (log: %s): %w", p.what, name, filepath.Join(p.work, name+".log"), err)
	}
	return nil
}

// exited reports a process that ended before it was stopped.
func (p *processes) exited() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, proc := range p.cmds {
		select {
		case err := <-proc.done:
			proc.done <- err
			return fmt.Errorf("%s %s exited: %v (log: %s)", p.what, proc.name, err, proc.log)
		default:
		}
	}
	return nil
}

// ended describes each process that ended before it was stopped, with the end of its log.
func (p *processes) ended(lines int) []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, proc := range p.cmds {
		select {
		case err := <-proc.done:
			proc.done <- err
			tail := ""
			if data, readErr := os.ReadFile(proc.log); readErr == nil {
				all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
				tail = strings.Join(all[max(0, len(all)-lines):], "\n")
			}
			out = append(out, fmt.Sprintf("%s %s exited: %v; the end of its log (%s):\n%s", p.what, proc.name, err, proc.log, tail))
		default:
		}
	}
	return out
}

func (p *processes) stop() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	cmds := p.cmds
	p.mu.Unlock()
	for _, proc := range cmds {
		_ = proc.cmd.Process.Kill()
		<-proc.done
	}
	if os.Getenv("HARVESTER_KEEP_LOGS") != "" {
		return nil
	}
	return os.RemoveAll(p.work)
}

// seedWebhookCertificates plays what a webhook's dynamiclistener would generate: its CA Secret
// (which it injects into its configurations) and a serving certificate marked static (used as
// is), for 127.0.0.1 as well as its Service's name, since the bed calls it by address. It
// returns the CA's PEM.
func (h *Harvester) seedWebhookCertificates(ctx context.Context, namespace, service, caSecret, tlsSecret string) ([]byte, error) {
	cert, err := testenv.NewServingCertificate(service, []string{service + "." + namespace + ".svc"}, net.ParseIP("127.0.0.1"))
	if err != nil {
		return nil, err
	}
	for _, s := range []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: caSecret},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: cert.CA, corev1.TLSPrivateKeyKey: cert.CAKey},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: tlsSecret,
				Annotations: map[string]string{"listener.cattle.io/static": "true"}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: cert.Cert, corev1.TLSPrivateKeyKey: cert.Key},
		},
	} {
		if err := h.Env.Client.Create(ctx, s); err != nil {
			return nil, err
		}
	}
	return cert.CA, nil
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close() //nolint:errcheck // a probe
	return l.Addr().(*net.TCPAddr).Port, nil
}
