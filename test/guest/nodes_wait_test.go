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
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestWaitingVMIsBackOffAndWakeWhenAGuestComes(t *testing.T) {
	a := NewNodeAgent(nil, nil)
	vmi := types.NamespacedName{Namespace: "guests", Name: "vm-a"}
	other := types.NamespacedName{Namespace: "guests", Name: "vm-b"}

	var waits []time.Duration
	for range 7 {
		waits = append(waits, a.backoff(vmi))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second, 16 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", waits, want)
		}
	}
	a.backoff(other)
	if len(a.kick) != 0 {
		t.Fatalf("%d wake-ups before any guest came", len(a.kick))
	}

	a.AddGuest(&Cluster{Namespace: "ns", Name: "c"})
	woken := map[types.NamespacedName]bool{}
	for len(a.kick) > 0 {
		ev := <-a.kick
		woken[types.NamespacedName{Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}] = true
	}
	if len(woken) != 2 || !woken[vmi] || !woken[other] {
		t.Fatalf("woken by AddGuest: %v, want both waiting VMIs", woken)
	}
	// Woken, a VMI starts its back-off again.
	if d := a.backoff(vmi); d != time.Second {
		t.Errorf("first wait after a wake-up = %v, want 1s", d)
	}

	// One that joined (or went) is not woken again.
	a.done(vmi)
	a.backoff(other)
	a.AddManagement(nil)
	if len(a.kick) != 1 {
		t.Fatalf("%d wake-ups after AddManagement, want 1 (vm-b only)", len(a.kick))
	}
	if ev := <-a.kick; ev.Object.GetName() != other.Name {
		t.Errorf("woke %s, want %s", ev.Object.GetName(), other.Name)
	}
}

func TestWakeUpsBeyondTheBufferAreLeftToTheBackOff(t *testing.T) {
	a := NewNodeAgent(nil, nil)
	for i := range kickBuffer + 10 {
		a.backoff(types.NamespacedName{Namespace: "guests", Name: fmt.Sprintf("vm-%d", i)})
	}
	a.AddGuest(&Cluster{})
	if len(a.kick) != kickBuffer {
		t.Fatalf("%d wake-ups queued, want the buffer's %d", len(a.kick), kickBuffer)
	}
	a.mu.Lock()
	left := len(a.waiting)
	a.mu.Unlock()
	if left != 10 {
		t.Errorf("%d VMIs still waiting, want the 10 that did not fit", left)
	}
}
