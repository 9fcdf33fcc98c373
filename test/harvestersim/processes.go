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

package harvestersim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
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

// processes are one program's running processes and their working directory. A process that
// ends by itself (KubeVirt's virt-controller and Harvester's controllers end when they lose their
// leader lease, which a loaded apiserver makes happen) is started again after the kubelet's
// back-off, as its pod's container would be on a real Harvester (restartPolicy Always).
type processes struct {
	what     string // "Harvester's load balancer", for errors
	work     string
	mu       sync.Mutex
	cmds     []*process
	stopping bool
}

type process struct {
	name    string
	path    string
	args    []string
	env     []string
	log     string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run ends
	restart *time.Timer   // the pending restart, if any

	// Guarded by processes.mu: how many times it ended by itself, and how the last time; the
	// kubelet's restart back-off, and when the current run began.
	restarts int
	lastExit error
	backoff  testenv.CrashBackoff
	started  time.Time
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
	proc := &process{name: name, path: path, args: args, env: env, log: filepath.Join(p.work, name+".log"),
		backoff: testenv.KubeletCrashBackoff()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.run(context.WithoutCancel(ctx), proc); err != nil {
		return err
	}
	p.cmds = append(p.cmds, proc)
	return nil
}

// run starts proc once more, appending to its log, and restarts it when it ends by itself.
// p.mu is held.
func (p *processes) run(ctx context.Context, proc *process) error {
	logFile, err := os.OpenFile(proc.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := testenv.ProtectedCommand(ctx, proc.path, proc.args...)
	cmd.Dir = p.work
	cmd.Env = append(os.Environ(), proc.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s %s: %w", p.what, proc.name, err)
	}
	done := make(chan struct{})
	proc.cmd, proc.done, proc.started = cmd, done, time.Now()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		defer close(done)
		if p.stopping {
			_ = logFile.Close()
			return
		}
		proc.restarts++
		proc.lastExit = err
		if err == nil {
			proc.lastExit = errors.New("exit status 0")
		}
		backoff := proc.backoff.Next(time.Since(proc.started))
		_, _ = fmt.Fprintf(logFile, "--- simulated Harvester: %s ended by itself (%v); starting it again in %s, as the kubelet would (restart %d) ---\n", proc.name, proc.lastExit, backoff, proc.restarts)
		_ = logFile.Close()
		proc.restart = time.AfterFunc(backoff, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.stopping {
				return
			}
			proc.restart = nil
			if err := p.run(ctx, proc); err != nil {
				proc.lastExit = fmt.Errorf("%v; then starting it again failed: %w", proc.lastExit, err)
			}
		})
	}()
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

// exited reports a process that has ended by itself at least once: while the simulated Harvester
// starts, a program that ends is broken, and waiting out its back-off would only hide why.
func (p *processes) exited() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, proc := range p.cmds {
		if proc.restarts > 0 {
			return fmt.Errorf("%s %s exited: %v (log: %s)", p.what, proc.name, proc.lastExit, proc.log)
		}
	}
	return nil
}

// ended describes each process that ended by itself (and was started again), with the end of its
// log.
func (p *processes) ended(lines int) []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, proc := range p.cmds {
		if proc.restarts == 0 {
			continue
		}
		tail := ""
		if data, readErr := os.ReadFile(proc.log); readErr == nil {
			all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			tail = strings.Join(all[max(0, len(all)-lines):], "\n")
		}
		out = append(out, fmt.Sprintf("%s %s ended by itself %d time(s), the last with %v; the end of its log (%s):\n%s", p.what, proc.name, proc.restarts, proc.lastExit, proc.log, tail))
	}
	return out
}

// kill ends the named process with SIGKILL (it is started again as any that ends by itself).
func (p *processes) kill(name string) (int, bool) {
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, proc := range p.cmds {
		if proc.name == name {
			_ = proc.cmd.Process.Kill()
			return proc.restarts, true
		}
	}
	return 0, false
}

// restartCounts counts the times each process ended by itself, by name.
func (p *processes) restartCounts() map[string]int {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, proc := range p.cmds {
		out[proc.name] = proc.restarts
	}
	return out
}

func (p *processes) stop() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.stopping = true
	cmds := p.cmds
	var running []chan struct{}
	for _, proc := range cmds {
		if proc.restart != nil {
			proc.restart.Stop()
			proc.restart = nil
		}
		_ = proc.cmd.Process.Kill()
		running = append(running, proc.done)
	}
	p.mu.Unlock()
	for _, done := range running {
		<-done
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
