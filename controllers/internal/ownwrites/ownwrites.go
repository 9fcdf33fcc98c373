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

// Package ownwrites remembers a controller's own last write of each object until its cache has
// caught up with it.
//
// Why it exists: a reconcile that writes an object (a finalizer, then the status) makes the next
// event of that object come before the informer has delivered the write. Reconciling from the
// cache's copy then patches a status locked to a version the server has already replaced: the
// patch conflicts, the reconcile is retried, and the object waits a live read and a second round
// trip on a busy management cluster (measured by make bench as most of a machine's time to
// provisioned at 1,000 machines). Instead, the record keeps, per object, the resource versions the
// controller's own writes replaced and the object as its last write left it; a reconcile that
// reads one of those replaced versions works from the recorded write. The record forgets an
// object once the cache holds a version that is not one it replaced (the cache has caught up, or
// someone else wrote), or when the object is deleted.
package ownwrites

import (
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Record holds the own last writes of the objects of one kind. The zero value is ready to use.
type Record[T client.Object] struct {
	m sync.Map // types.NamespacedName -> *entry[T]
}

type entry[T client.Object] struct {
	over    []string // the resource versions the writes replaced
	written T        // the object after the last write, as the cache will hold it
}

// Last returns a copy of the last write of obj when obj, as read from a cache, is a version the
// controller's own writes replaced, and ok false when obj is as new as that write or newer (the
// record then forgets obj).
func (r *Record[T]) Last(obj T) (last T, ok bool) {
	key := client.ObjectKeyFromObject(obj)
	v, found := r.m.Load(key)
	if !found {
		return last, false
	}
	if e := v.(*entry[T]); slices.Contains(e.over, obj.GetResourceVersion()) {
		return e.written.DeepCopyObject().(T), true
	}
	r.m.CompareAndDelete(key, v)
	return last, false
}

// Wrote records that writes replaced the versions over with written, the object on the server
// after them. Versions equal to written's (a write the server made nothing of) are not recorded,
// so that no reconcile takes a current copy for stale; a write that went on from the previous
// recorded one also replaced what that one had.
func (r *Record[T]) Wrote(over []string, written T) {
	if v := reflect.ValueOf(written); !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) || written.GetResourceVersion() == "" {
		return
	}
	key := client.ObjectKeyFromObject(written)
	over = slices.Clone(over)
	if v, ok := r.m.Load(key); ok {
		if prev := v.(*entry[T]); slices.Contains(over, prev.written.GetResourceVersion()) {
			over = append(over, prev.over...)
		}
	}
	slices.Sort(over)
	over = slices.DeleteFunc(slices.Compact(over), func(v string) bool { return v == "" || v == written.GetResourceVersion() })
	if len(over) == 0 {
		return
	}
	w := written.DeepCopyObject().(T)
	w.SetManagedFields(nil) // as the cache holds it
	r.m.Store(key, &entry[T]{over: over, written: w})
}

// Forget drops what the record holds of an object.
func (r *Record[T]) Forget(key types.NamespacedName) {
	r.m.Delete(key)
}

// ForgetCaughtUp is a predicate (it lets every event through) that drops an object's record once
// the cache has a version the record does not know as replaced, or the object is deleted: the
// update that brings the controller's own last write is often one its event filters drop, so no
// reconcile would come to drop it.
func (r *Record[T]) ForgetCaughtUp() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
			key := client.ObjectKeyFromObject(e.ObjectNew)
			if v, ok := r.m.Load(key); ok && !slices.Contains(v.(*entry[T]).over, e.ObjectNew.GetResourceVersion()) {
				r.m.CompareAndDelete(key, v)
			}
			return true
		},
		DeleteFunc: func(e event.TypedDeleteEvent[client.Object]) bool {
			r.m.Delete(client.ObjectKeyFromObject(e.Object))
			return true
		},
	}
}

// Len is how many objects the record holds (for tests and metrics).
func (r *Record[T]) Len() int {
	n := 0
	r.m.Range(func(any, any) bool { n++; return true })
	return n
}
