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

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

func TestScopeCloseWritesWhatTheReconcileChanged(t *testing.T) {
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
	closeScope := func(before, changed *infrav1.HarvesterMachine) error {
		t.Helper()
		s, err := r.newScope(before, changed)
		if err != nil {
			t.Fatal(err)
		}
		return s.Close(ctx)
	}

	// Conditions, the rest of the status and the spec, all changed: two writes, the metadata and
	// spec first, then the status with its conditions (a manager that dies between the two
	// leaves a providerID without the provisioned flag, never the reverse).
	stale := read()
	changed := stale.DeepCopy()
	controllerutil.AddFinalizer(changed, infrav1.MachineFinalizer)
	changed.Spec.ProviderID = "harvester://uid"
	changed.Status.Initialization.Provisioned = ptr.To(true)
	setVMCondition(changed, metav1.ConditionTrue, infrav1.ReadyReason, "")
	if err := closeScope(stale, changed); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(writes, []string{"metadata", "status"}) {
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
	if err := closeScope(same.DeepCopy(), same); err != nil || len(writes) != 0 {
		t.Fatalf("unchanged machine: writes %v, err %v; want none", writes, err)
	}

	// From a stale read (the version before the writes above), with another writer's condition
	// on the server since: the status patch locked to the version read is refused, and
	// patch.Helper writes the reconcile's own conditions over the newest version; the other
	// writer's stays.
	other := read()
	conditions.Set(other, metav1.Condition{Type: "OtherWriters", Status: metav1.ConditionTrue, Reason: "Set"})
	if err := c.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	fromStale := stale.DeepCopy()
	setVMCondition(fromStale, metav1.ConditionFalse, infrav1.VMCreatingReason, "")
	writes = nil
	if err := closeScope(stale, fromStale); err != nil {
		t.Fatalf("patch from a stale read: %v", err)
	}
	if !slices.Equal(writes, []string{"status", "status"}) {
		t.Errorf("writes %v, want the refused status patch and patch.Helper's conditions", writes)
	}
	got = read()
	if conditions.GetReason(got, infrav1.VirtualMachineReadyCondition) != infrav1.VMCreatingReason || !conditions.IsTrue(got, "OtherWriters") ||
		got.Spec.ProviderID != "harvester://uid" {
		t.Fatalf("after a patch from a stale read: %+v", got)
	}

	// Only the metadata moved on since the read (CAPI's Machine controller labels the machine):
	// the status is written, the label stays.
	read1 := read()
	labelled := read1.DeepCopy()
	labelled.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "c"}
	if err := c.Update(ctx, labelled); err != nil {
		t.Fatal(err)
	}
	fromRead1 := read1.DeepCopy()
	fromRead1.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"}}
	if err := closeScope(read1, fromRead1); err != nil {
		t.Fatalf("metadata moved on: %v", err)
	}
	if got := read(); len(got.Status.Addresses) != 1 || got.Labels["cluster.x-k8s.io/cluster-name"] != "c" {
		t.Fatalf("status or label lost: %+v", got)
	}

	// A deleted machine whose last finalizer the reconcile removes: the apiserver deletes it,
	// and what would follow that write finds nothing, which is no error.
	last := read()
	if err := c.Delete(ctx, last); err != nil {
		t.Fatal(err)
	}
	deleting := read()
	released := deleting.DeepCopy()
	controllerutil.RemoveFinalizer(released, infrav1.MachineFinalizer)
	setVMCondition(released, metav1.ConditionFalse, infrav1.DeletingReason, "")
	released.Status.Addresses = nil
	if err := closeScope(deleting, released); err != nil {
		t.Fatalf("closing the scope that released the machine: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(hm), &infrav1.HarvesterMachine{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the machine is still there: %v", err)
	}
}

// Every condition a reconciler writes is one it owns: on a conflict with another writer, the
// patch keeps the reconcile's own value of each.
func TestReconcilersOwnTheConditionsTheyWrite(t *testing.T) {
	for name, tc := range map[string]struct {
		set   conditionSet
		wrote []string
	}{
		"HarvesterCluster": {clusterConditions, []string{clusterv1.PausedCondition, clusterv1.ReadyCondition, clusterv1.DeletingCondition,
			infrav1.HarvesterAvailableCondition, infrav1.FailureDomainsReadyCondition, infrav1.LoadBalancerReadyCondition,
			infrav1.GuestCredentialsReadyCondition, infrav1.AddonsReadyCondition, infrav1.IdentityExpiringSoonCondition}},
		"HarvesterMachine": {machineConditions, []string{clusterv1.PausedCondition, clusterv1.ReadyCondition,
			infrav1.VirtualMachineReadyCondition, infrav1.IPAddressesReadyCondition, infrav1.HostMaintenanceCondition,
			infrav1.ResourcesUpToDateCondition}},
	} {
		owned := tc.set.owned()
		for _, c := range tc.wrote {
			if !slices.Contains(owned, c) {
				t.Errorf("%s: %s is written but not owned", name, c)
			}
		}
		if len(owned) != len(tc.wrote) {
			t.Errorf("%s: owns %v, writes %v", name, owned, tc.wrote)
		}
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
