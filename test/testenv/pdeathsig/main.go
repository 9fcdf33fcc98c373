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

// Command pdeathsig runs a program that the kernel kills (SIGKILL) when the process that
// started it dies, however it dies: the test bed starts its kube-apiservers, etcds and other
// long-running processes through it (testenv.ProtectedCommand), so that a test binary killed
// by a timeout leaves nothing running.
//
// Usage: pdeathsig PARENT-PID PROGRAM [ARG...]
//
// It sets its parent-death signal and then execs PROGRAM in its place: the pid stays the same,
// so whoever started it signals and waits for PROGRAM as if it had started it directly.
// PARENT-PID is the pid of the process that started it; if that process is already gone
// when the signal is set, the kernel will never send it, so pdeathsig exits instead.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

func main() {
	// The parent-death signal is an attribute of the calling thread, and only the thread that
	// execs carries its attributes into the program: both calls must happen on one thread.
	runtime.LockOSThread()

	if len(os.Args) < 3 {
		failf(2, "usage: pdeathsig PARENT-PID PROGRAM [ARG...]")
	}
	parent, err := strconv.Atoi(os.Args[1])
	if err != nil || parent <= 1 {
		failf(2, "pdeathsig: PARENT-PID %q is not the pid of a process that started us", os.Args[1])
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		failf(126, "pdeathsig: setting the parent-death signal: %v", err)
	}
	// The parent may have died between our fork and the prctl above: then we were already
	// handed to another reaper, and the signal would never come.
	if ppid := os.Getppid(); ppid != parent {
		failf(1, "pdeathsig: the process that started %s (pid %d) is gone; not starting it", os.Args[2], parent)
	}
	program := os.Args[2]
	err = unix.Exec(program, os.Args[2:], os.Environ())
	failf(127, "pdeathsig: running %s: %v", program, err)
}

func failf(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(code)
}
