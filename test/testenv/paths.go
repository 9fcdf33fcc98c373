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

// Package testenv starts real kube-apiservers (envtest) for the management, Harvester and guest
// clusters of the tests, the demo and the benchmark, with the CRDs and webhooks each one needs.
package testenv

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// RepoRoot is the directory of the project's checkout.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	moduleDirsMu sync.Mutex
	moduleDirs   = map[string]string{}
)

// ModuleDir returns the directory of a dependency in the module cache, e.g. to read the CRDs
// that sigs.k8s.io/cluster-api ships.
func ModuleDir(module string) (string, error) {
	moduleDirsMu.Lock()
	defer moduleDirsMu.Unlock()
	if dir, ok := moduleDirs[module]; ok {
		return dir, nil
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if exitErr, ok := err.(*exec.ExitError); ok {
			stderr = string(exitErr.Stderr)
		}
		return "", fmt.Errorf("finding module %s: %w %s", module, err, stderr)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded; run `go mod download`", module)
	}
	moduleDirs[module] = dir
	return dir, nil
}

// AssetsDir returns the directory with the kube-apiserver and etcd binaries: KUBEBUILDER_ASSETS
// when set (the Makefile sets it), else hack/ensure-control-plane.sh's, built when missing.
func AssetsDir() (string, error) {
	return BuiltDir("KUBEBUILDER_ASSETS", "ensure-control-plane.sh")
}

// DownloadModule fetches a module that is not in go.mod (a provider whose CRDs a test needs,
// not its code) from the module proxy into the module cache, and returns its directory.
func DownloadModule(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir() // outside this module: go.mod stays as it is
	out, err := cmd.Output()
	var result struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &result); jsonErr != nil || result.Dir == "" {
		return "", fmt.Errorf("downloading %s@%s: %v %s", module, version, err, result.Error)
	}
	return result.Dir, nil
}

// FreeLoopbackPorts returns n loopback ports nothing listens on, for a process the bed starts
// that takes its ports as flags. They come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), never from it: the kernel gives ports of that range to every
// listener on port 0 and as the source port of every outgoing connection, so a port of it that
// was free when chosen can be taken by any client's connection before the process binds it, or
// while a process the bed restarts on the same flags is down (a restarted manager found its
// webhook port held that way, and every later spec failed). This process never hands out the
// same port twice.
func FreeLoopbackPorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	low, high := portRange()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 10*(high-low) {
			return nil, fmt.Errorf("no free loopback port in %d-%d", low, high-1)
		}
		port := low + rand.IntN(high-low)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken by something else on this machine
		}
		_ = l.Close()
		handedOut[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// FreeLoopbackPort is FreeLoopbackPorts(1).
func FreeLoopbackPort() (int, error) {
	ports, err := FreeLoopbackPorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

var (
	portsMu    sync.Mutex
	handedOut  = map[int]bool{}
	firstPort  = 20000 // above the ports Kubernetes components (10250-10259) and services on a developer's machine listen on by default
	minRoom    = 1000  // the fewest ports a range outside the ephemeral one must have
	ephemerals = "/proc/sys/net/ipv4/ip_local_port_range"
)

// portRange is the range [low, high) FreeLoopbackPorts chooses from: from firstPort to the
// start of the ephemeral range, or above its end where it starts too low to leave room below
// (Linux's default range, 32768-60999, where the file cannot be read).
func portRange() (low, high int) {
	start, end := 32768, 60999
	if b, err := os.ReadFile(ephemerals); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			s, errS := strconv.Atoi(f[0])
			e, errE := strconv.Atoi(f[1])
			if errS == nil && errE == nil {
				start, end = s, e
			}
		}
	}
	switch {
	case start-firstPort >= minRoom:
		return firstPort, start
	case 65535-end >= minRoom:
		return end + 1, 65536
	default:
		return firstPort, 65536 // no room outside the ephemeral range: the old race remains
	}
}
