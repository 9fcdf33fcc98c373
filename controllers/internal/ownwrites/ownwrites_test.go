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

package ownwrites

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func cm(rv, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: rv,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}, Data: map[string]string{"v": data}}
}

// A read of a version the writes replaced gives a copy of the last write; a read of the write
// itself, or of a later version, gives nothing and drops the record.
func TestLastGivesTheWriteForAReplacedVersion(t *testing.T) {
	var r Record[*corev1.ConfigMap]
	if _, ok := r.Last(cm("1", "")); ok {
		t.Fatal("an empty record gives a write")
	}
	r.Wrote([]string{"1"}, cm("2", "written"))
	last, ok := r.Last(cm("1", "read"))
	if !ok || last.ResourceVersion != "2" || last.Data["v"] != "written" {
		t.Fatalf("Last of the replaced version: %v %v, want the write", last, ok)
	}
	if last.ManagedFields != nil {
		t.Error("the recorded write keeps its managed fields; the cache has none")
	}
	last.Data["v"] = "changed by the reconcile"
	if again, _ := r.Last(cm("1", "read")); again.Data["v"] != "written" {
		t.Error("Last gives the record itself, not a copy")
	}
	if _, ok := r.Last(cm("2", "written")); ok {
		t.Error("the write itself is taken for stale")
	}
	if r.Len() != 0 {
		t.Error("a read as new as the write leaves the record")
	}
}

// A write the server made nothing of (same version) records nothing; a write that goes on from
// the previous recorded one replaces what that one replaced too.
func TestWroteChainsWritesAndSkipsNoOps(t *testing.T) {
	var r Record[*corev1.ConfigMap]
	r.Wrote([]string{"5"}, cm("5", ""))
	if r.Len() != 0 {
		t.Fatal("a no-op write is recorded")
	}
	r.Wrote([]string{"1"}, cm("2", "finalizer"))
	r.Wrote([]string{"2"}, cm("3", "status"))
	for _, rv := range []string{"1", "2"} {
		if last, ok := r.Last(cm(rv, "")); !ok || last.ResourceVersion != "3" {
			t.Errorf("version %s: %v %v, want the last write 3", rv, last, ok)
		}
	}
	// A write from a version the record does not know starts afresh; a nil write changes nothing.
	r.Wrote([]string{"7"}, cm("8", "elsewhere"))
	var nothing *corev1.ConfigMap
	r.Wrote([]string{"8"}, nothing)
	if last, ok := r.Last(cm("7", "")); !ok || last.ResourceVersion != "8" {
		t.Errorf("after an unrelated and a nil write: %v %v, want the write 8", last, ok)
	}
	if _, ok := r.Last(cm("1", "")); ok {
		t.Error("an unrelated write kept the earlier chain")
	}
}

// The predicate lets every event through, keeps the record for an update to a replaced version
// and drops it for a newer one or a deletion.
func TestForgetCaughtUp(t *testing.T) {
	var r Record[*corev1.ConfigMap]
	p := r.ForgetCaughtUp()
	r.Wrote([]string{"1", "2"}, cm("3", ""))
	if !p.Update(event.UpdateEvent{ObjectOld: cm("1", ""), ObjectNew: cm("2", "")}) || r.Len() != 1 {
		t.Fatal("an update to a replaced version dropped the record (or the event)")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: cm("2", ""), ObjectNew: cm("3", "")}) || r.Len() != 0 {
		t.Fatal("the cache's copy of the write left the record")
	}
	r.Wrote([]string{"3"}, cm("4", ""))
	if !p.Delete(event.DeleteEvent{Object: cm("4", "")}) || r.Len() != 0 {
		t.Fatal("a deletion left the record")
	}
	r.Wrote([]string{"4"}, cm("5", ""))
	r.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if r.Len() != 0 {
		t.Fatal("Forget left the record")
	}
	if !p.Create(event.CreateEvent{Object: client.Object(cm("1", ""))}) {
		t.Fatal("the predicate drops creations")
	}
}
