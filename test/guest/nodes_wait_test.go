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
