package transport

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// DefaultMaxCachedBytes bounds what one connection's cache holds (its objects as the cache
	// keeps them, measured as JSON): a guest that fills its target namespace with objects the
	// cache selects stops its own connection, not the manager. Each VM, VMI and volume is kept
	// in under 3 KiB of JSON: 1,000 machines with one disk each stay under 9 MiB.
	DefaultMaxCachedBytes = 64 << 20
	// DefaultMaxCachedBytesTotal bounds what all connections' caches hold together, half the
	// manager's default memory limit (512 MiB): the connection whose object passes it stops,
	// as if it had passed its own budget.
	DefaultMaxCachedBytesTotal = 256 << 20
	// DefaultBudgetCooldown is how long a connection that went over its budget stays down
	// before it is built again (each build lists, and so costs, all of it once more).
	DefaultBudgetCooldown = 5 * time.Minute
)

// cacheBudget counts the bytes a connection's cache holds, object by object, from its
// informers' events, and calls exceeded once, when the total first passes limit. The size of
// an object is that of its JSON as the cache keeps it (after slimCached): close to what it
// costs in memory, and cheap for the small objects the cache keeps.
type cacheBudget struct {
	limit    int64
	exceeded func(total int64, objects int)
	// process counts the bytes of every connection's cache, up to processLimit (none when
	// nil or processLimit is not positive).
	process      *atomic.Int64
	processLimit int64

	mu     sync.Mutex
	sizes  map[string]int64
	total  int64
	passed bool
}

func newCacheBudget(limit int64, exceeded func(total int64, objects int)) *cacheBudget {
	return &cacheBudget{limit: limit, exceeded: exceeded, sizes: map[string]int64{}}
}

func budgetKey(obj client.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

func (b *cacheBudget) set(obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	data, err := json.Marshal(o)
	if err != nil {
		return
	}
	b.mu.Lock()
	key := budgetKey(o)
	delta := int64(len(data)) - b.sizes[key]
	b.total += delta
	b.sizes[key] = int64(len(data))
	overProcess := false
	if b.process != nil {
		overProcess = b.process.Add(delta) > b.processLimit && b.processLimit > 0 && delta > 0
	}
	fire := !b.passed && ((b.limit > 0 && b.total > b.limit) || overProcess)
	b.passed = b.passed || fire
	total, objects := b.total, len(b.sizes)
	b.mu.Unlock()
	if fire {
		b.exceeded(total, objects)
	}
}

func (b *cacheBudget) OnAdd(obj any, _ bool) { b.set(obj) }

func (b *cacheBudget) OnUpdate(_, obj any) { b.set(obj) }

func (b *cacheBudget) OnDelete(obj any) {
	if gone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = gone.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	b.mu.Lock()
	key := budgetKey(o)
	b.total -= b.sizes[key]
	if b.process != nil {
		b.process.Add(-b.sizes[key])
	}
	delete(b.sizes, key)
	b.mu.Unlock()
}

// release gives the connection's bytes back to the process's count, once its cache stopped.
func (b *cacheBudget) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.process != nil {
		b.process.Add(-b.total)
	}
	b.total = 0
	clear(b.sizes)
}

// Total returns the bytes and objects counted.
func (b *cacheBudget) Total() (int64, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, len(b.sizes)
}
