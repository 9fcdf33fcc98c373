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
	e, err := newStackedEtcd("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n",
		map[string][]byte{pkiDir + "etcd/ca.crt": ca.CA, pkiDir + "etcd/ca.key": ca.CAKey}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stopAll)
	return e, ca
}

// members returns the member names and which of them are learners.
func (e *stackedEtcd) memberNames(ctx context.Context) ([]string, []string, error) {
	e.mu.Lock()
	running := e.running()
	e.mu.Unlock()
	c, err := e.client(running)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	list, err := c.MemberList(ctx)
	if err != nil {
		return nil, nil, err
	}
	var names, learners []string
	for _, m := range list.Members {
		names = append(names, m.Name)
		if m.IsLearner {
			learners = append(learners, m.Name)
		}
	}
	slices.Sort(names)
	return names, learners, nil
}

func TestStackedEtcdJoinsLikeKubeadm(t *testing.T) {
	e, _ := newTestEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, node := range []string{"cp-a", "cp-b", "cp-c"} {
		// etcd refuses a new member for a few seconds after the last one joined ("unhealthy
		// cluster"): kubeadm retries, as the node agent's requeue does.
		for err := e.join(ctx, node); err != nil; err = e.join(ctx, node) {
			if ctx.Err() != nil {
				t.Fatalf("join %s: %v", node, err)
			}
			time.Sleep(time.Second)
		}
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
}

func TestNoStackedEtcdWithAnExternalOne(t *testing.T) {
	e, err := newStackedEtcd("kind: ClusterConfiguration\netcd:\n  external:\n    endpoints: [https://10.0.0.1:2379]\n", nil, t.TempDir())
	if err != nil || e != nil {
		t.Fatalf("got %v, %v; want no stacked etcd", e, err)
	}
}
