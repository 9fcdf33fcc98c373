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

package testenv

// Nothing the test bed starts may outlive the process that started it: a `go test` timeout
// kills the test binary without running its cleanups, and its kube-apiservers and etcds used
// to keep running for good. Every such process goes through the pdeathsig shim
// (test/testenv/pdeathsig), which asks the kernel for a SIGKILL when its parent dies
// (prctl PR_SET_PDEATHSIG) and then execs the real program in its place.
//
// Why this is safe enough:
//   - The process's death, however it comes (SIGKILL, a timeout's panic, os.Exit), ends all its
//     threads, and the kernel then signals every child whose parent thread ended.
//   - exec keeps the pid and the parent-death signal (only set-user-ID binaries and binaries
//     with file capabilities lose it: ours are neither), so exec.Cmd and envtest signal and
//     wait for the real program as if they had started it directly.
//   - If the parent dies before the shim's prctl, the signal would never come; the shim compares
//     its parent with the pid we pass it and exits if they differ.
//
// The remaining caveat: the signal follows the thread that forked the child, not the process.
// Go ends a thread only when a goroutine locked with runtime.LockOSThread returns without
// unlocking; a process started from such a goroutine is killed when that goroutine returns. Do
// not start bed processes from locked goroutines. The protection covers the program itself,
// not children it starts of its own (kube-apiserver and etcd start none), and it is Linux only:
// elsewhere the commands run unprotected.
//
// We build the shim as its own tiny program (once, cached by the hash of its source) rather
// than re-executing the test binary as the shim: between fork and prctl the child then runs a
// few milliseconds of a 2 MB program instead of every package initializer of a test binary
// (Kubernetes schemes and all), which keeps the unprotected window and the cost of each of
// the bed's many starts small, and the same shim serves any program, whatever started it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// parentPIDEnv carries our pid to the shim where we cannot pass arguments: envtest starts its
// binaries with our environment and its own arguments.
const parentPIDEnv = "CAPHV_PDEATHSIG_PARENT"

// ProtectedCommand is exec.CommandContext for a program that must die with this process: the
// kernel kills it (SIGKILL) when this process dies, even when it is killed with no chance to
// clean up. The command's pid is the program's; Args[0] is the shim, not path.
func ProtectedCommand(ctx context.Context, path string, args ...string) *exec.Cmd {
	shim, err := pdeathsigShim()
	if err == nil && shim == "" {
		return exec.CommandContext(ctx, path, args...)
	}
	if err == nil && !strings.Contains(path, "/") {
		path, err = exec.LookPath(path) // the shim execs without searching PATH
	}
	if err != nil {
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Err = err // Start returns it
		return cmd
	}
	return exec.CommandContext(ctx, shim, append([]string{strconv.Itoa(os.Getpid()), path}, args...)...)
}

// protectControlPlane points envtest at kube-apiserver and etcd through the shim. envtest takes
// only a path per binary, so each is a small script that execs the shim with the real binary.
func protectControlPlane(env *envtest.Environment, assets string) error {
	apiserver, err := protectedBinary(filepath.Join(assets, "kube-apiserver"))
	if err != nil {
		return err
	}
	etcd, err := protectedBinary(filepath.Join(assets, "etcd"))
	if err != nil {
		return err
	}
	env.ControlPlane.GetAPIServer().Path = apiserver
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	env.ControlPlane.Etcd.Path = etcd
	return nil
}

// protectedBinary returns the path of a script that runs binary through the shim, with this
// process (named in parentPIDEnv) as the parent it must die with.
func protectedBinary(binary string) (string, error) {
	shim, err := pdeathsigShim()
	if err != nil || shim == "" {
		return binary, err
	}
	sum := sha256.Sum256([]byte(binary))
	path := filepath.Join(filepath.Dir(shim), "wrap-"+hex.EncodeToString(sum[:8]), filepath.Base(binary))
	script := fmt.Sprintf("#!/bin/sh\n# Runs %s so that it dies with the process that starts it (test/testenv/pdeathsig.go).\nexec %s \"${%s:?unset: start this through testenv}\" %s \"$@\"\n",
		binary, shellQuote(shim), parentPIDEnv, shellQuote(binary))
	if have, err := os.ReadFile(path); err == nil && string(have) == script {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("creating the wrapper of %s: %w", binary, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".script-*")
	if err != nil {
		return "", fmt.Errorf("creating the wrapper of %s: %w", binary, err)
	}
	_, err = tmp.WriteString(script)
	err = errors.Join(err, tmp.Chmod(0o755), tmp.Close())
	if err == nil {
		// Atomic: test binaries of other packages may be writing the same script right now.
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("writing the wrapper of %s: %w", binary, err)
	}
	return path, nil
}

// pdeathsigShim returns the path of the built shim ("" where there is none: not Linux), and
// names this process as the parent in its environment.
var pdeathsigShim = sync.OnceValues(func() (string, error) {
	if runtime.GOOS != "linux" {
		return "", nil
	}
	if err := os.Setenv(parentPIDEnv, strconv.Itoa(os.Getpid())); err != nil {
		return "", err
	}
	return buildShim()
})

// buildShim builds test/testenv/pdeathsig into the user's cache, under a directory named by
// the hash of what it is built from, unless a build is there already.
func buildShim() (string, error) {
	root := RepoRoot()
	h := sha256.New()
	for _, f := range []string{filepath.Join(root, "test", "testenv", "pdeathsig", "main.go"), filepath.Join(root, "go.mod")} {
		content, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("reading the pdeathsig shim's source: %w", err)
		}
		h.Write(content)
	}
	h.Write([]byte(runtime.Version()))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "cluster-api-provider-harvester", "pdeathsig-"+hex.EncodeToString(h.Sum(nil)[:8]))
	shim := filepath.Join(dir, "pdeathsig")
	if _, err := os.Stat(shim); err == nil {
		return shim, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the pdeathsig shim's cache: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("creating the pdeathsig shim's cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(tmp, "pdeathsig"), "./test/testenv/pdeathsig")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the pdeathsig shim: %w: %s", err, out)
	}
	// Atomic: test binaries of other packages may be building the same shim right now.
	if err := os.Rename(filepath.Join(tmp, "pdeathsig"), shim); err != nil {
		return "", fmt.Errorf("installing the pdeathsig shim: %w", err)
	}
	return shim, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
