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
	// cache selects stops the connections that cache that namespace, not the manager. Each VM,
	// VMI and volume is kept in under 3 KiB of JSON: 1,000 machines with one disk each stay
	// under 9 MiB.
	DefaultMaxCachedBytes = 32 << 20
	// DefaultMaxCachedBytesTotal bounds what all connections' caches hold together, a quarter
	// of the manager's default memory limit (512 MiB; decoded objects take more than their
	// JSON): past it, the connection that holds the most stops.
	DefaultMaxCachedBytesTotal = 128 << 20
	// DefaultBudgetCooldown is how long a connection that went over its budget stays down
	// before it is built again (each build lists, and so costs, all of it once more).
	DefaultBudgetCooldown = 5 * time.Minute
)

// budgetCause says which budget a connection passed.
type budgetCause int

const (
	// ownBudget: the connection's own (ClientFactory.MaxCachedBytes).
	ownBudget budgetCause = iota
	// managerBudget: all connections' together (ClientFactory.MaxCachedBytesTotal); the
	// connection stopped is the one that held the most.
	managerBudget
)

// cacheBudget counts the bytes a connection's cache holds, object by object, from its
// informers' events. The size of an object is that of its JSON as the cache keeps it (after
// slimCached): cheap for the small objects the cache keeps, and growing as their memory does.
// It calls exceeded once, when the connection passes its own limit or the factory stops it for
// the manager's.
type cacheBudget struct {
	limit    int64
	exceeded func(total int64, objects int, cause budgetCause)
	// process counts the bytes of every connection's cache; overProcess, when set, is called
	// when a growth takes it past the manager's limit.
	process      *atomic.Int64
	processLimit int64
	overProcess  func()

	mu     sync.Mutex
	sizes  map[string]int64
	total  int64
	passed bool
}

func newCacheBudget(limit int64, exceeded func(total int64, objects int, cause budgetCause)) *cacheBudget {
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
	own := b.limit > 0 && b.total > b.limit
	b.mu.Unlock()
	if own {
		b.fire(ownBudget)
	}
	if b.process != nil {
		if sum := b.process.Add(delta); delta > 0 && b.processLimit > 0 && sum > b.processLimit && b.overProcess != nil {
			b.overProcess()
		}
	}
}

// fire stops the connection for cause, once.
func (b *cacheBudget) fire(cause budgetCause) {
	b.mu.Lock()
	if b.passed {
		b.mu.Unlock()
		return
	}
	b.passed = true
	total, objects := b.total, len(b.sizes)
	b.mu.Unlock()
	b.exceeded(total, objects, cause)
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
	size := b.sizes[key]
	b.total -= size
	delete(b.sizes, key)
	b.mu.Unlock()
	if b.process != nil {
		b.process.Add(-size)
	}
}

// release gives the connection's bytes back to the manager's count, once its cache stopped.
func (b *cacheBudget) release() {
	b.mu.Lock()
	total := b.total
	b.total = 0
	clear(b.sizes)
	b.passed = true // a stopped cache is not stopped again
	b.mu.Unlock()
	if b.process != nil {
		b.process.Add(-total)
	}
}

// Total returns the bytes and objects counted.
func (b *cacheBudget) Total() (int64, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, len(b.sizes)
}

// stopped tells whether the budget fired or was released.
func (b *cacheBudget) stopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.passed
}

// budgets are the caches' budgets of a ClientFactory, and their sum, so that passing the
// manager's limit stops the connection that holds the most, not the one whose object came last.
type budgets struct {
	limit int64
	total atomic.Int64

	mu  sync.Mutex
	all map[*cacheBudget]struct{}
}

func (s *budgets) add(b *cacheBudget) {
	b.process, b.processLimit = &s.total, s.limit
	if s.limit > 0 {
		b.overProcess = s.overLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all == nil {
		s.all = map[*cacheBudget]struct{}{}
	}
	s.all[b] = struct{}{}
}

func (s *budgets) remove(b *cacheBudget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.all, b)
}

// overLimit stops the connection that holds the most while the running connections together
// hold more than the limit. A stopped connection's bytes leave the sum only once its cache has
// stopped (release), so they are left out here already.
func (s *budgets) overLimit() {
	s.mu.Lock()
	var largest *cacheBudget
	var most, running int64
	for b := range s.all {
		if b.stopped() {
			continue
		}
		total, _ := b.Total()
		running += total
		if total > most {
			largest, most = b, total
		}
	}
	s.mu.Unlock()
	if largest != nil && running > s.limit {
		largest.fire(managerBudget)
	}
}
