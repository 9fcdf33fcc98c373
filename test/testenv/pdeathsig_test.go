//go:build linux

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

package testenv_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// controlPlaneChildEnv makes TestControlPlaneChild run: only as the child of
// TestControlPlaneDiesWithItsStarter.
const controlPlaneChildEnv = "CAPHV_TEST_CONTROL_PLANE_CHILD"

// TestControlPlaneDiesWithItsStarter kills a process that started a control plane through
// testenv.Start, and a program through testenv.ProtectedCommand, the way a test timeout does
// (SIGKILL, no cleanup) and expects its kube-apiserver, etcd and program to die with it.
func TestControlPlaneDiesWithItsStarter(t *testing.T) {
	g := NewWithT(t)
	child := exec.Command(os.Args[0], "-test.run=^TestControlPlaneChild$", "-test.timeout=5m")
	// The killed child cannot remove the control plane's directories: they go where we can.
	child.Env = append(os.Environ(), controlPlaneChildEnv+"=1", "TMPDIR="+t.TempDir())
	// The child waits on its stdin: should this test die first, the child ends too.
	stdin, err := child.StdinPipe()
	g.Expect(err).NotTo(HaveOccurred())
	stdout, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	var stderr bytes.Buffer
	child.Stderr = &stderr
	g.Expect(child.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
		_ = stdin.Close()
	})

	started := make(chan map[string]int, 1)
	go func() { started <- readStarted(stdout) }()
	var pids map[string]int
	select {
	case pids = <-started:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the child did not start its control plane; its stderr:\n%s", stderr.String())
	}
	g.Expect(pids).To(And(HaveKey("kube-apiserver"), HaveKey("etcd"), HaveKey("sleep")), "the child's stderr:\n%s", stderr.String())
	for name, pid := range pids {
		g.Expect(alive(pid)).To(BeTrue(), "%s (pid %d) before the kill", name, pid)
	}

	g.Expect(child.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = child.Wait()

	for name, pid := range pids {
		g.Eventually(func() bool { return alive(pid) }).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).
			Should(BeFalse(), "%s (pid %d) after its starter was killed", name, pid)
	}
}

// TestControlPlaneChild starts a control plane and a program of its own, reports the pids of
// its children (kube-apiserver, etcd and sleep) on stdout, and waits until its stdin closes or it is killed.
func TestControlPlaneChild(t *testing.T) {
	if os.Getenv(controlPlaneChildEnv) == "" {
		t.Skip("runs only as the child of TestControlPlaneDiesWithItsStarter")
	}
	env, err := testenv.Start(testenv.Options{Name: "pdeathsig-child", Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	// And a program of our own, the way the bed starts binaries that are not control planes.
	sleep := testenv.ProtectedCommand(t.Context(), "sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	// The shim execs the program after it starts: until then its child is named pdeathsig.
	var children map[string]int
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		if children, err = childrenOf(os.Getpid()); err != nil {
			return false, err
		}
		_, shimmed := children["pdeathsig"]
		return !shimmed, nil
	}); err != nil {
		t.Fatalf("waiting for the shim to exec its program (children %v): %v", children, err)
	}
	for name, pid := range children {
		fmt.Printf("started %s %d\n", name, pid)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// readStarted reads the child's "started NAME PID" lines up to "ready".
func readStarted(r io.Reader) map[string]int {
	pids := map[string]int{}
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		var name string
		var pid int
		if _, err := fmt.Sscanf(lines.Text(), "started %s %d", &name, &pid); err == nil {
			pids[name] = pid
		}
		if lines.Text() == "ready" {
			break
		}
	}
	return pids
}

// childrenOf returns the processes whose parent is pid, by command name (after exec: the
// real binaries', not the shim's).
func childrenOf(parent int) (map[string]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	children := map[string]int{}
	for _, stat := range stats {
		pid, name, state, ppid, err := readStat(stat)
		if err == nil && ppid == parent && state != "Z" {
			children[name] = pid
		}
	}
	return children, nil
}

// alive says whether pid runs. A zombie is dead: whoever inherited it reaps it when it will.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	_, _, state, _, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && state != "Z" && state != "X"
}

// readStat reads pid, command name, state and parent pid from /proc/PID/stat, whose command
// name is in parentheses and may itself contain spaces and parentheses.
func readStat(path string) (pid int, name, state string, ppid int, err error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return 0, "", "", 0, err
	}
	s := string(content)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return 0, "", "", 0, fmt.Errorf("unexpected %s: %q", path, s)
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 2 {
		return 0, "", "", 0, fmt.Errorf("unexpected %s: %q", path, s)
	}
	if pid, err = strconv.Atoi(strings.TrimSpace(s[:open])); err != nil {
		return 0, "", "", 0, err
	}
	if ppid, err = strconv.Atoi(fields[1]); err != nil {
		return 0, "", "", 0, err
	}
	return pid, s[open+1 : closing], fields[0], ppid, nil
}
