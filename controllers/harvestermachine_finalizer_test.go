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
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// ownedMachine is a HarvesterMachine its Machine owns, of a Cluster whose infrastructure is not
// provisioned yet, with the objects a reconcile reads before it would make a VM. Its Paused
// condition is written (False), as the reconcile before the one under test does.
func ownedMachine() (*infrav1.HarvesterMachine, []client.Object) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: "c"}}}
	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec: clusterv1.MachineSpec{ClusterName: "c"}}
	hc := &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "m", UID: "u"}}}}
	conditions.Set(hm, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason})
	return hm, []client.Object{cluster, machine, hc, hm}
}

// A machine's Paused condition is written first, alone (CAPI's paused.EnsurePausedCondition):
// a running one comes back at once for the rest, which its own status write would not bring;
// a paused one (its Cluster's spec.paused, or its own annotation) is left alone after that,
// without a finalizer, and nothing on the way to a VM is read.
func TestMachinePausedConditionIsWrittenFirst(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                     string
		clusterPaused, annotated bool
		want                     ctrl.Result
		message                  string
	}{
		{name: "running", want: ctrl.Result{RequeueAfter: staleReadRetry}},
		{name: "cluster paused", clusterPaused: true, message: "Cluster spec.paused is set to true"},
		{name: "annotated", annotated: true, message: "HarvesterMachine has the cluster.x-k8s.io/paused annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hm, objs := ownedMachine()
			hm.Status.Conditions = nil
			if tc.annotated {
				hm.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
			}
			objs[0].(*clusterv1.Cluster).Spec.Paused = ptr.To(tc.clusterPaused)
			var writes []string
			readCluster := false
			funcs := recordPatches(&writes, nil)
			funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*infrav1.HarvesterCluster); ok {
					readCluster = true
				}
				return c.Get(ctx, key, obj, opts...)
			}
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(hm).Build(), funcs)
			r := &HarvesterMachineReconciler{Client: c}
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)})
			if err != nil || res != tc.want {
				t.Fatalf("reconcile: %+v, %v; want %+v", res, err, tc.want)
			}
			if len(writes) != 1 || writes[0] != "status" || readCluster {
				t.Fatalf("writes %v, HarvesterCluster read %v; want the Paused condition only", writes, readCluster)
			}
			got := readMachine(t, c, hm)
			p := conditions.Get(got, clusterv1.PausedCondition)
			paused := tc.clusterPaused || tc.annotated
			if p == nil || (p.Status == metav1.ConditionTrue) != paused || p.Message != tc.message {
				t.Fatalf("Paused condition %+v, want paused %v with message %q", p, paused, tc.message)
			}
			if controllerutil.ContainsFinalizer(got, infrav1.MachineFinalizer) {
				t.Error("the finalizer was written with the Paused condition")
			}
			if paused {
				// Left alone: the next reconcile writes nothing.
				writes = nil
				if res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)}); err != nil || res != (ctrl.Result{}) || len(writes) != 0 {
					t.Fatalf("reconcile of the paused machine: %+v, %v, writes %v; want nothing", res, err, writes)
				}
			}
		})
	}
}

// The reconcile that finds an owned machine without the finalizer writes it first, before it
// reads anything a VM would be made from, and goes on in the same reconcile: the machine's
// conditions follow in one status write, with no second reconcile needed for them.
func TestMachineFinalizerIsWrittenFirstAndTheReconcileGoesOn(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	hm, objs := ownedMachine()
	var writes []string
	var base client.Client
	clusterRead, finalizerFirst := false, false
	funcs := recordPatches(&writes, nil)
	funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*infrav1.HarvesterCluster); ok {
			// Read on the way to a VM: the finalizer must be on the server by then.
			clusterRead = true
			finalizerFirst = controllerutil.ContainsFinalizer(readMachine(t, base, hm), infrav1.MachineFinalizer)
		}
		return c.Get(ctx, key, obj, opts...)
	}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(hm).Build(), funcs)
	base = c
	r := &HarvesterMachineReconciler{Client: c}

	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)})
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("reconcile: %+v, %v", res, err)
	}
	if !clusterRead {
		t.Error("the reconcile stopped after the finalizer: the HarvesterCluster was not read")
	} else if !finalizerFirst {
		t.Error("the HarvesterCluster was read before the finalizer was on the server")
	}
	if len(writes) != 2 || writes[0] != "metadata" || writes[1] != "status" {
		t.Fatalf("writes %v, want [metadata status]", writes)
	}
	got := readMachine(t, c, hm)
	if !controllerutil.ContainsFinalizer(got, infrav1.MachineFinalizer) {
		t.Fatal("no finalizer")
	}
	if reason := conditions.GetReason(got, infrav1.VirtualMachineReadyCondition); reason != infrav1.WaitingForClusterInfrastructureReason {
		t.Errorf("VirtualMachineReady reason %q: the reconcile did not go on past the finalizer", reason)
	}
	// The next reconcile finds nothing to change.
	writes = nil
	if res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)}); err != nil || res != (ctrl.Result{}) || len(writes) != 0 {
		t.Fatalf("second reconcile: %+v, %v, writes %v; want nothing written", res, err, writes)
	}
}

// A failed finalizer write stops the reconcile before anything else is read or written; a
// finalizer write that shows the copy read was behind the server's status writes nothing more
// and comes back soon.
func TestMachineFinalizerWriteFailsOrMeetsANewerStatus(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	for _, tc := range []struct {
		name    string
		fail    bool
		wantErr bool
		want    ctrl.Result
	}{
		{name: "refused", fail: true, wantErr: true},
		{name: "newer status on the server", want: ctrl.Result{RequeueAfter: staleReadRetry}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hm, objs := ownedMachine()
			var writes []string
			readCluster := false
			var inner client.WithWatch
			var fail error
			if tc.fail {
				fail = refused
			}
			funcs := recordPatches(&writes, fail)
			funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*infrav1.HarvesterCluster); ok {
					readCluster = true
				}
				return c.Get(ctx, key, obj, opts...)
			}
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(hm).Build(), funcs)
			inner = c
			r := &HarvesterMachineReconciler{Client: c}
			if !tc.fail {
				// Another writer's status, which the reconcile's read (a lagging cache) will not
				// have: the server moves on between the read and the finalizer write.
				stale := readMachine(t, c, hm)
				newer := stale.DeepCopy()
				setVMCondition(newer, metav1.ConditionFalse, infrav1.VMCreatingReason, "")
				if err := inner.Status().Update(ctx, newer); err != nil {
					t.Fatal(err)
				}
				r.Client = interceptor.NewClient(c, interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if m, ok := obj.(*infrav1.HarvesterMachine); ok {
							stale.DeepCopyInto(m)
							return nil
						}
						return c.Get(ctx, key, obj, opts...)
					},
				})
				writes = nil
			}
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)})
			if (err != nil) != tc.wantErr || (tc.wantErr && !errors.Is(err, refused)) || res != tc.want {
				t.Fatalf("reconcile: %+v, %v; want %+v, error %v", res, err, tc.want, tc.wantErr)
			}
			if len(writes) != 1 || writes[0] != "metadata" {
				t.Errorf("writes %v, want the finalizer's only", writes)
			}
			if readCluster {
				t.Error("the reconcile went on to read the HarvesterCluster")
			}
			if !tc.fail {
				got := readMachine(t, inner, hm)
				if conditions.GetReason(got, infrav1.VirtualMachineReadyCondition) != infrav1.VMCreatingReason {
					t.Errorf("the newer status was overwritten: %+v", got.Status.Conditions)
				}
			}
		})
	}
}
