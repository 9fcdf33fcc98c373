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
	"slices"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

func TestMachinePatchWritesSpecThenStatusLocked(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}
	var writes []string
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(hm).WithStatusSubresource(hm).Build(), recordPatches(&writes, nil))
	r := &HarvesterMachineReconciler{Client: c}
	read := func() *infrav1.HarvesterMachine { t.Helper(); return readMachine(t, c, hm) }

	// Conditions, the rest of the status and the spec, all changed: two writes, spec first (a
	// manager that dies in between leaves a providerID without the provisioned flag, never the
	// reverse).
	stale := read()
	changed := stale.DeepCopy()
	controllerutil.AddFinalizer(changed, infrav1.MachineFinalizer)
	changed.Spec.ProviderID = "harvester://uid"
	changed.Status.Initialization.Provisioned = ptr.To(true)
	setVMCondition(changed, metav1.ConditionTrue, infrav1.ReadyReason, "")
	if err := r.newScope(stale, changed).PatchObject(ctx); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 2 || writes[0] != "metadata" || writes[1] != "status" {
		t.Fatalf("writes %v, want [metadata status]", writes)
	}
	got := read()
	if got.Spec.ProviderID != "harvester://uid" || !ptr.Deref(got.Status.Initialization.Provisioned, false) ||
		!conditions.IsTrue(got, infrav1.VirtualMachineReadyCondition) || !conditions.IsTrue(got, clusterv1.ReadyCondition) ||
		!controllerutil.ContainsFinalizer(got, infrav1.MachineFinalizer) {
		t.Fatalf("not all written: %+v", got)
	}

	// Nothing changed: nothing written.
	writes = nil
	same := read()
	if err := r.newScope(same.DeepCopy(), same).PatchObject(ctx); err != nil || len(writes) != 0 {
		t.Fatalf("unchanged machine: writes %v, err %v; want none", writes, err)
	}

	// From a stale read (the version before the writes above): a conflict, nothing overwritten,
	// also when the machine is read again live.
	for _, live := range []client.Reader{nil, c} {
		r.APIReader = live
		fromStale := stale.DeepCopy()
		setVMCondition(fromStale, metav1.ConditionFalse, infrav1.VMCreatingReason, "")
		if err := r.newScope(stale, fromStale).PatchObject(ctx); !apierrors.IsConflict(err) {
			t.Fatalf("patch from a stale read (live reader %v): %v, want a conflict", live != nil, err)
		}
		if !conditions.IsTrue(read(), infrav1.VirtualMachineReadyCondition) {
			t.Fatal("a stale read overwrote the condition")
		}
	}

	// Only the metadata moved on since the read (CAPI's Machine controller labels the machine):
	// with a live reader the status is written over the newest version.
	read1 := read()
	labelled := read1.DeepCopy()
	labelled.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "c"}
	if err := c.Update(ctx, labelled); err != nil {
		t.Fatal(err)
	}
	fromRead1 := read1.DeepCopy()
	fromRead1.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"}}
	r.APIReader = nil
	if err := r.newScope(read1, fromRead1.DeepCopy()).PatchObject(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("metadata moved on, no live reader: %v, want a conflict", err)
	}
	r.APIReader = c
	if err := r.newScope(read1, fromRead1).PatchObject(ctx); err != nil {
		t.Fatalf("metadata moved on, live reader: %v", err)
	}
	if got := read(); len(got.Status.Addresses) != 1 || got.Labels["cluster.x-k8s.io/cluster-name"] != "c" {
		t.Fatalf("status or label lost: %+v", got)
	}
}

func TestSetPausedCondition(t *testing.T) {
	for _, tc := range []struct {
		name          string
		clusterPaused bool
		annotated     bool
		want          bool
		message       string
	}{
		{name: "running"},
		{name: "cluster paused", clusterPaused: true, want: true, message: "Cluster spec.paused is set to true"},
		{name: "annotated", annotated: true, want: true, message: "HarvesterMachine has the cluster.x-k8s.io/paused annotation"},
		{name: "both", clusterPaused: true, annotated: true, want: true,
			message: "Cluster spec.paused is set to true, HarvesterMachine has the cluster.x-k8s.io/paused annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			if tc.annotated {
				hm.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
			}
			cluster := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Paused: ptr.To(tc.clusterPaused)}}
			if got := setPausedCondition(hm, cluster, "HarvesterMachine"); got != tc.want {
				t.Fatalf("paused %v, want %v", got, tc.want)
			}
			c := conditions.Get(hm, clusterv1.PausedCondition)
			if c == nil || (c.Status == metav1.ConditionTrue) != tc.want || c.Message != tc.message || c.ObservedGeneration != 3 {
				t.Fatalf("condition %+v, want paused %v with message %q at generation 3", c, tc.want, tc.message)
			}
		})
	}
}

// A reconcile that reads, from the cache, a version its own reconciler's last writes replaced
// works from that last write instead (a patch from the cache's copy would conflict, and read
// live), without waiting for the cache; once the cache has caught up, the record goes.
func TestMachineReconcileWorksFromItsOwnWriteWhileTheCacheLags(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(hm).WithStatusSubresource(hm).Build()
	r := &HarvesterMachineReconciler{Client: c}
	read := func() *infrav1.HarvesterMachine { t.Helper(); return readMachine(t, c, hm) }

	old := read()
	if ownLast(r, old) != nil {
		t.Fatal("nothing written yet, and the read is stale")
	}
	changed := old.DeepCopy()
	changed.Status.Initialization.Provisioned = ptr.To(true)
	if err := r.newScope(old, changed).PatchObject(ctx); err != nil {
		t.Fatal(err)
	}
	own := ownLast(r, old.DeepCopy())
	if own == nil {
		t.Fatal("the version read before the write is not taken for stale")
	}
	if own.ResourceVersion != read().ResourceVersion || !ptr.Deref(own.Status.Initialization.Provisioned, false) {
		t.Errorf("the reconcile would work from version %s (provisioned %v), want the write %s", own.ResourceVersion, own.Status.Initialization.Provisioned, read().ResourceVersion)
	}
	// A patch from the own write is not a conflict: it is the server's version.
	next := own.DeepCopy()
	next.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"}}
	if err := r.newScope(own, next).PatchObject(ctx); err != nil {
		t.Fatalf("patch from the own last write: %v", err)
	}
	if got := read(); len(got.Status.Addresses) != 1 || !ptr.Deref(got.Status.Initialization.Provisioned, false) {
		t.Fatalf("status after the second patch: %+v", got.Status)
	}
	if ownLast(r, read()) != nil {
		t.Error("the written version is taken for stale")
	}
	if ownLast(r, old.DeepCopy()) != nil {
		t.Error("once the cache had the write, the record must go: the cache never goes back")
	}

	// A patch the server makes nothing of leaves the version as it was: nothing to wait for.
	same := read()
	r.writes.Wrote([]string{same.ResourceVersion}, same)
	if ownLast(r, same) != nil {
		t.Error("a write that changed nothing makes the read stale")
	}

	// A reconcile that writes the metadata (a finalizer) and then the status leaves two versions
	// behind: the one it read and the one its metadata patch made. The cache may deliver the
	// second before the last; a reconcile from it would conflict too.
	first := read()
	both := first.DeepCopy()
	both.Finalizers = append(both.Finalizers, infrav1.MachineFinalizer)
	both.Status.Initialization.Provisioned = ptr.To(false)
	if err := r.newScope(first, both).PatchObject(ctx); err != nil {
		t.Fatal(err)
	}
	last := read()
	// The fake client counts versions up by one per write: the metadata patch made last-1.
	v, err := strconv.Atoi(last.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	intermediate := last.DeepCopy()
	intermediate.ResourceVersion = strconv.Itoa(v - 1)
	if intermediate.ResourceVersion == first.ResourceVersion || !slices.Contains(last.Finalizers, infrav1.MachineFinalizer) {
		t.Fatalf("the patch did not write metadata and status apart: read %s, last %s", first.ResourceVersion, last.ResourceVersion)
	}
	for _, stale := range []*infrav1.HarvesterMachine{first, intermediate} {
		if own := ownLast(r, stale.DeepCopy()); own == nil || own.ResourceVersion != last.ResourceVersion {
			t.Errorf("version %s, which the reconcile's writes left behind, does not give the last write %s: %v", stale.ResourceVersion, last.ResourceVersion, own)
		}
	}

	// The cache's update event with the intermediate version keeps the record; the one with
	// the last write drops it (no reconcile follows the own status write to do it).
	forget := r.writes.ForgetCaughtUp()
	forget.Update(event.UpdateEvent{ObjectOld: first, ObjectNew: intermediate})
	if ownLast(r, first.DeepCopy()) == nil {
		t.Error("the intermediate version dropped the record")
	}
	forget.Update(event.UpdateEvent{ObjectOld: intermediate, ObjectNew: last})
	if r.writes.Len() != 0 {
		t.Error("the cache's copy of the last write left the record behind")
	}
}

// recordPatches passes patches on, recording each in writes: "metadata" for one of the object
// itself (metadata and spec), the subresource's name otherwise. A patch of the object fails with
// fail when that is not nil.
func recordPatches(writes *[]string, fail error) interceptor.Funcs {
	return interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			*writes = append(*writes, "metadata")
			if fail != nil {
				return fail
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			*writes = append(*writes, sub)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// readMachine reads hm's current version from c.
func readMachine(t *testing.T, c client.Client, hm *infrav1.HarvesterMachine) *infrav1.HarvesterMachine {
	t.Helper()
	got := &infrav1.HarvesterMachine{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(hm), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// ownLast is the reconciler's own last write of hm when hm is a version it replaced, else nil.
func ownLast(r *HarvesterMachineReconciler, hm *infrav1.HarvesterMachine) *infrav1.HarvesterMachine {
	if own, ok := r.writes.Last(hm); ok {
		return own
	}
	return nil
}
