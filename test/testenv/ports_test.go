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

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func withEphemeralRange(t *testing.T, content string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ip_local_port_range")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	old := ephemerals
	ephemerals = path
	t.Cleanup(func() { ephemerals = old })
}

func TestFreeLoopbackPortsComeFromBelowTheEphemeralRange(t *testing.T) {
	withEphemeralRange(t, "32768\t60999\n")
	seen := map[int]bool{}
	for range 50 {
		ports, err := FreeLoopbackPorts(4)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p < firstPort || p >= 32768 {
				t.Fatalf("port %d is outside %d-32767", p, firstPort)
			}
			if seen[p] {
				t.Fatalf("port %d was handed out twice", p)
			}
			seen[p] = true
			// Nothing listens on it: the process it is meant for can bind it.
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d cannot be bound: %v", p, err)
			}
			_ = l.Close()
		}
	}
}

func TestFreeLoopbackPortsGoAboveAnEphemeralRangeThatStartsLow(t *testing.T) {
	withEphemeralRange(t, "1024 50000\n")
	low, high := portRange()
	if low != 50001 || high != 65536 {
		t.Fatalf("range %d-%d, want 50001-65535", low, high-1)
	}
	withEphemeralRange(t, "not a range")
	if low, high := portRange(); low != firstPort || high != 32768 {
		t.Fatalf("range %d-%d without a readable file, want %d-32767", low, high-1, firstPort)
	}
}

func TestFreeLoopbackPortsSkipAPortSomethingListensOn(t *testing.T) {
	// A range of one port that something holds: no port is handed out, and the error says so.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := l.Addr().(*net.TCPAddr).Port
	oldFirst, oldRoom := firstPort, minRoom
	firstPort, minRoom = held, 1
	t.Cleanup(func() { firstPort, minRoom = oldFirst, oldRoom })
	withEphemeralRange(t, strconv.Itoa(held+1)+" 65000\n")
	if ports, err := FreeLoopbackPorts(1); err == nil {
		t.Fatalf("handed out %v although %d, the only port of the range, is held", ports, held)
	}
}
