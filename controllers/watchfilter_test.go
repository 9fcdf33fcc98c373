package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
