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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

func TestWatchFilteredKeepsOnlyTheManagersObjects(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	machine := func(name, shard string) *infrav1.HarvesterMachine {
		hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if shard != "" {
			hm.Labels = map[string]string{clusterv1.WatchLabel: shard}
		}
		return hm
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(machine("a", "shard-a"), machine("b", "shard-b"), machine("none", "")).Build()
	all := func(context.Context, client.Object) []reconcile.Request {
		var out []reconcile.Request
		for _, n := range []string{"a", "b", "none", "gone"} {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: n}})
		}
		return out
	}
	newMachine := func() client.Object { return &infrav1.HarvesterMachine{} }
	for filter, want := range map[string][]string{"shard-a": {"a"}, "shard-b": {"b"}, "": {"a", "b", "none"}} {
		var got []string
		for _, req := range watchFiltered(reader, filter, newMachine, all)(context.Background(), nil) {
			got = append(got, req.Name)
		}
		if len(got) != len(want) {
			t.Fatalf("filter %q: got %v, want %v", filter, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("filter %q: got %v, want %v", filter, got, want)
			}
		}
	}
}

// With --watch-filter, an object of a kind that never carries the filter label (here an
// IPAddressClaim) still brings the labelled machine that owns it: the label is checked on the
// machine, not on the claim (a global event filter dropped the claim's events).
func TestOwnedObjectsWithoutTheLabelReachTheirLabelledOwner(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	labelled := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m",
		Labels: map[string]string{clusterv1.WatchLabel: "shard-a"}}}
	other := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "n"}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(labelled, other).Build()
	claimOf := func(owner string) *ipamv1.IPAddressClaim {
		return &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: owner + "-nic-0-0",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "HarvesterMachine",
				Name: owner, UID: "u", Controller: ptr.To(true)}}}}
	}
	mapFn := watchFiltered(reader, "shard-a", func() client.Object { return &infrav1.HarvesterMachine{} }, controllerOwner("HarvesterMachine"))
	if got := mapFn(context.Background(), claimOf("m")); len(got) != 1 || got[0].Name != "m" {
		t.Fatalf("the labelled owner's claim: %v", got)
	}
	if got := mapFn(context.Background(), claimOf("n")); len(got) != 0 {
		t.Fatalf("another shard's claim: %v", got)
	}
}
