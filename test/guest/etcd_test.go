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

package guest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// newTestEtcd returns a stacked etcd with a fresh CA, skipping without the envtest binaries.
func newTestEtcd(t *testing.T) (*stackedEtcd, *testenv.ServingCertificate) {
	t.Helper()
	if _, err := testenv.AssetsDir(); err != nil {
		t.Skip("needs the envtest binaries (make envtest):", err)
	}
	ca, err := testenv.NewServingCertificate("etcd", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kubeadmEtcd("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n",
		map[string][]byte{pkiDir + "etcd/ca.crt": ca.CA, pkiDir + "etcd/ca.key": ca.CAKey}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stopAll)
	return e, ca
}

func TestStackedEtcdJoinsLikeKubeadm(t *testing.T) {
	e, _ := newTestEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// etcd refuses a change of membership for a few seconds after a member (re)joined
	// ("unhealthy cluster"): kubeadm and RKE2 retry, as the node agent's requeue and the removal
	// controller's do.
	retry := func(what string, f func() error) {
		t.Helper()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for err := f(); err != nil; err = f() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, err)
			case <-tick.C:
			}
		}
	}
	for _, node := range []string{"cp-a", "cp-b", "cp-c"} {
		retry("join "+node, func() error { return e.join(ctx, node) })
		// Idempotent: the node agent calls it on every reconcile.
		if err := e.join(ctx, node); err != nil {
			t.Fatalf("join %s again: %v", node, err)
		}
	}
	names, learners, err := e.memberNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"cp-a", "cp-b", "cp-c"}) || len(learners) > 0 {
		t.Fatalf("members %v, learners %v; want cp-a, cp-b, cp-c all voting", names, learners)
	}

	// A VM that stops and runs again: its member restarts from its data.
	e.stop("cp-b")
	if _, ok := e.clientAddr("cp-b"); ok {
		t.Fatal("a stopped member still serves")
	}
	if err := e.join(ctx, "cp-b"); err != nil {
		t.Fatalf("restarting cp-b: %v", err)
	}
	if names, _, err = e.memberNames(ctx); err != nil || len(names) != 3 {
		t.Fatalf("after the restart: members %v, %v", names, err)
	}

	// Removed (as RKE2 does on its Node's annotation): etcd stops the member itself.
	var removed string
	retry("removing cp-c", func() (err error) {
		removed, err = e.remove(ctx, "cp-c")
		return err
	})
	if removed != "cp-c" {
		t.Fatalf("removed %q, want cp-c", removed)
	}
	if names, _, err = e.memberNames(ctx); err != nil || !slices.Equal(names, []string{"cp-a", "cp-b"}) {
		t.Fatalf("after the removal: members %v, %v; want cp-a, cp-b", names, err)
	}
}

func TestNoStackedEtcdWithAnExternalOne(t *testing.T) {
	e, err := kubeadmEtcd("kind: ClusterConfiguration\netcd:\n  external:\n    endpoints: [https://10.0.0.1:2379]\n", nil, t.TempDir())
	if err != nil || e != nil {
		t.Fatalf("got %v, %v; want no stacked etcd", e, err)
	}
}
