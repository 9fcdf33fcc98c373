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

package guest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// controllersOfKCM are the kube-controller-manager controllers a guest runs: those that turn the
// addons' Deployments and DaemonSets into pods and clean up after them, and the disruption
// controller, whose PodDisruptionBudget status the Eviction API reads (a drain honours it). The
// rest (node lifecycle, volumes, tokens, ...) need kubelets, clouds or keys the bed does not have.
var controllersOfKCM = []string{
	"deployment-controller", "replicaset-controller", "daemonset-controller",
	"garbage-collector-controller", "pod-garbage-collector-controller", "serviceaccount-controller",
	"disruption-controller",
}

// process is a program the bed runs for a guest: a control-plane component or a container.
type process struct {
	name string
	cmd  *exec.Cmd
	// done is closed when the process has ended, with err.
	done chan struct{}
	err  error
	log  *logBuffer
}

// startProcess starts binary with args (and env, when not nil); its output goes to log.
func startProcess(ctx context.Context, name, binary string, log *logBuffer, env []string, args ...string) (*process, error) {
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited returns the process's end, or nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		err := p.err
		if err == nil {
			err = errors.New("exited")
		}
		return fmt.Errorf("%s: %w", p.name, err)
	default:
		return nil
	}
}

// stop ends the process as the kubelet ends a container: SIGTERM, SIGKILL after a grace period.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logBuffer collects a process's output, and copies it to stderr when TEST_LOG is set.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if os.Getenv("TEST_LOG") != "" {
		_, _ = os.Stderr.Write(p)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// tail returns the last n bytes of the log.
func (l *logBuffer) tail(n int) string {
	s := l.String()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// startSchedulingControlPlane runs kube-scheduler and kube-controller-manager against the guest,
// from KUBEBUILDER_ASSETS (`make envtest` builds them with kube-apiserver), with the guest's
// admin credentials. Leader election is off (one of each) and neither serves its port: several
// guests share the host's loopback.
func (c *Cluster) startSchedulingControlPlane(ctx context.Context) error {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return err
	}
	kubeconfig, err := c.Env.Kubeconfig()
	if err != nil {
		return err
	}
	path := filepath.Join(c.workDir, "admin.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return err
	}
	common := []string{"--kubeconfig=" + path, "--leader-elect=false", "--secure-port=0"}
	scheduler, err := startProcess(ctx, "kube-scheduler", filepath.Join(assets, "kube-scheduler"), &logBuffer{}, nil, common...)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, scheduler)
	kcmArgs := append(append([]string{}, common...), "--controllers="+strings.Join(controllersOfKCM, ","),
		// Pods of deleted nodes go at once, as they do once the node lifecycle controller has
		// evicted them.
		"--terminated-pod-gc-threshold=100")
	kcm, err := startProcess(ctx, "kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), &logBuffer{}, nil, kcmArgs...)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, kcm)
	return nil
}

// ControlPlaneErr tells whether the guest's scheduler or controller manager stopped on its own,
// with the end of its log.
func (c *Cluster) ControlPlaneErr() error {
	for _, p := range c.processes {
		if err := p.exited(); err != nil {
			return fmt.Errorf("%w\n%s", err, p.log.tail(2000))
		}
	}
	return nil
}
