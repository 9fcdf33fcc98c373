// Package bench measures the provider on the simulated Harvester. `make bench` runs it and prints
// the figures; nothing here asserts a speed.
package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// stamps records when each object first reached a state, by watch.
type stamps struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *stamps) mark(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[name]; !ok {
		s.at[name] = time.Now()
	}
}

func (s *stamps) get(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[name]
	return t, ok
}

func (s *stamps) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func onAddUpdate(on func(any)) toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, newObj any) { on(newObj) }}
}

// watch calls on for every add and update of obj's kind in a manager's cache.
func watch(ctx context.Context, b testing.TB, c cache.Cache, obj client.Object, on func(any)) {
	inf, err := c.GetInformer(ctx, obj)
	must(b, err)
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, newObj any) { on(newObj) },
	})
	must(b, err)
}

func must(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// createCluster creates a Cluster with its HarvesterCluster, identity and bootstrap Secrets and
// machine template, all carrying labels (the watch filter, when sharded), and no guest: the
// provider provisions HarvesterMachines without one.
func createCluster(ctx context.Context, tb *bed.Bed, kubeconfig []byte, ns, name string, labels map[string]string) error {
	c := tb.Management.Client
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "identity"}, Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{"value": []byte("#cloud-config\nruncmd:\n- echo join\n"), "format": []byte("cloud-config")},
		},
		&infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.HarvesterClusterSpec{IdentitySecret: infrav1.SecretReference{Name: "identity"}, TargetNamespace: "guests",
				LoadBalancer: infrav1.LoadBalancerSpec{Network: "default/vlan10"}},
		},
		&clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{
				ClusterNetwork:    clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name},
			},
		},
		&infrav1.HarvesterMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: infrav1.HarvesterMachineSpec{
				CPU: 2, Memory: resource.MustParse("4Gi"),
				Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
				Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
			}}},
		},
	}
	for _, obj := range objs {
		if _, ok := obj.(*corev1.Namespace); !ok {
			obj.SetLabels(mergeLabels(obj.GetLabels(), labels))
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T: %w", obj, err)
		}
	}
	return nil
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// machineDeployment of replicas machines of cluster name; labels go on it and on its machines
// (CAPI carries them on to the HarvesterMachines).
func machineDeployment(ns, name string, replicas int32, labels map[string]string) *clusterv1.MachineDeployment {
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: name,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: mergeLabels(labels, map[string]string{"pool": name})},
				Spec: clusterv1.MachineSpec{
					ClusterName:       name,
					Version:           "v1.35.4",
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachineTemplate", Name: name},
				},
			},
		},
	}
}

// probeStatusWrites patches the status of an idle HarvesterMachine (it has no owner, so the
// provider leaves it alone) every interval until stop, and times each round trip: the management
// apiserver's write latency under the same load, the baseline of the provider's status patches.
// stop deletes the machine and returns the round trips.
func probeStatusWrites(ctx context.Context, c client.Client, interval time.Duration) (stop func() ([]time.Duration, error), err error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-probe"}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "idle"}, Spec: infrav1.HarvesterMachineSpec{
		CPU: 2, Memory: resource.MustParse("4Gi"),
		Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
	}}
	if err := c.Create(ctx, hm); err != nil {
		return nil, err
	}
	probeCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var rounds []time.Duration
	var failed error
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-probeCtx.Done():
				return
			case <-tick.C:
			}
			base := hm.DeepCopy()
			hm.Status.FailureDomain = strconv.Itoa(i)
			start := time.Now()
			if err := c.Status().Patch(probeCtx, hm, client.MergeFrom(base)); err != nil {
				if probeCtx.Err() == nil {
					failed = fmt.Errorf("probe status patch: %w", err)
				}
				return
			}
			rounds = append(rounds, time.Since(start))
		}
	}()
	return func() ([]time.Duration, error) {
		cancel()
		<-done
		return rounds, errors.Join(failed, client.IgnoreNotFound(c.Delete(ctx, hm)))
	}, nil
}
