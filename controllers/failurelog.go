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

package controllers

import (
	"context"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// A failed step on Harvester is reported in the object's condition (and, where it matters, an
// event) at every reconcile; the log gets it once: at Info the first time an object fails with
// a given reason and message, and again at most every failureLogRepeat while it keeps failing
// so; the repeats in between at V(4). An outage of a Harvester with hundreds of machines used to
// log every machine at Info every 5 s; access, reference and invalid-input failures logged
// nothing at all.
const failureLogRepeat = 10 * time.Minute

// kindNames names transport.Kind in logs.
var kindNames = map[transport.Kind]string{
	transport.KindRefused:     "Refused",
	transport.KindUnreachable: "Unreachable",
	transport.KindAccess:      "Access",
	transport.KindReference:   "Reference",
	transport.KindInvalid:     "Invalid",
	transport.KindBusy:        "Busy",
}

type failureKey struct{}

// withFailureKey tells harvesterResult which object a reconcile is about (its kind and
// namespace/name), for the failure log.
func withFailureKey(ctx context.Context, kind, key string) context.Context {
	return context.WithValue(ctx, failureKey{}, kind+" "+key)
}

type failureEntry struct {
	what   string
	logged time.Time
}

// failureLog remembers, per object, the failure it last logged at Info and when.
type failureLog struct {
	mu      sync.Mutex
	entries map[string]failureEntry
	now     func() time.Time
}

var failures = &failureLog{entries: map[string]failureEntry{}, now: time.Now}

// log writes e once per object, reason and message at Info (with the kind of failure and, from
// the context's logger, the object's and its Cluster's keys), and its repeats at V(4).
func (f *failureLog) log(ctx context.Context, e *transport.Error) {
	logger := ctrl.LoggerFrom(ctx).WithValues("kind", kindNames[e.Kind], "reason", e.Reason)
	key, _ := ctx.Value(failureKey{}).(string)
	what := e.Reason + "\x00" + e.Message
	now := f.now()
	f.mu.Lock()
	last, seen := f.entries[key]
	fresh := key == "" || !seen || last.what != what || now.Sub(last.logged) >= failureLogRepeat
	if fresh && key != "" {
		f.entries[key] = failureEntry{what: what, logged: now}
		if len(f.entries) > 4096 {
			for k, v := range f.entries {
				if now.Sub(v.logged) >= failureLogRepeat {
					delete(f.entries, k)
				}
			}
		}
	}
	f.mu.Unlock()
	if fresh {
		logger.Info("a step on Harvester failed; the object's condition says so until it succeeds", "message", e.Message)
		return
	}
	logger.V(4).Info("a step on Harvester still fails", "message", e.Message)
}

// forget drops an object's entry once its reconcile succeeded, so that its next failure is
// logged at once.
func (f *failureLog) forget(ctx context.Context) {
	key, _ := ctx.Value(failureKey{}).(string)
	if key == "" {
		return
	}
	f.mu.Lock()
	delete(f.entries, key)
	f.mu.Unlock()
}
