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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// FreeLoopbackPorts returns n loopback ports nothing listens on (for a process the bed starts
// that takes its ports as flags).
func FreeLoopbackPorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
