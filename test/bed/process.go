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
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// process is another project's program the bed runs (a provider's manager, the Cluster API
// Operator): started with its output appended to a log file, waited for until it serves, and
// ended as the kubelet ends a pod.
type process struct {
	name    string
	logFile string

	mu   sync.Mutex
	proc *os.Process
	done chan error
}

// startProcess starts cmd with its output appended to logFile and waits up to timeout until every
// ready check passes. If the program exits meanwhile, or the time runs out, it is stopped and the
// error carries the log's tail.
func startProcess(ctx context.Context, name string, cmd *exec.Cmd, logFile string, timeout time.Duration, ready ...func() bool) (*process, error) {
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting the %s: %w", name, err)
	}
	p := &process{name: name, logFile: logFile, proc: cmd.Process, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		_ = out.Close()
	}()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if exited, err := p.exited(); exited {
			log, _ := os.ReadFile(logFile)
			return false, fmt.Errorf("the %s exited: %v\n%s", name, err, tail(log, 4096))
		}
		for _, r := range ready {
			if !r() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("waiting for the %s to serve (log: %s): %w", name, logFile, err)
	}
	return p, nil
}

// exited reports whether the program has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// stop ends the program (SIGTERM, SIGKILL after 10 s); a second call does nothing.
func (p *process) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return
	}
	_ = p.proc.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
		_ = p.proc.Kill()
		err := <-p.done
		p.done <- err
	}
	p.proc = nil
}

// httpReady is a readiness check: a GET of url answers 200 (a health endpoint on loopback).
func httpReady(url string) func() bool {
	return func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// tlsReady is a readiness check: a TLS server answers on addr (a webhook server, which a
// health endpoint does not cover), trusted by config.
func tlsReady(addr string, config *tls.Config) func() bool {
	dialer := &net.Dialer{Timeout: time.Second}
	return func() bool {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, config)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
}
