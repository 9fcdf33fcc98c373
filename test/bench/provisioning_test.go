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

// Package bench measures the provider on the simulated Harvester. `make bench` runs it and prints
// the figures; nothing here asserts a speed.
package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
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

// relayProbe is the floor of P1 under the bench's load: a bare relay doing what P1 times of the
// provider with nothing else. Every interval the probe changes a ConfigMap on Harvester; the
// bench's watch sees the change (as it sees a VMI come up, where P1 starts); the relay's own
// watch, through the fault proxy with a ServiceAccount's token as the provider's is, sees it too,
// and a worker patches the status of an idle HarvesterMachine (no owner: the provider leaves it
// alone) on the management cluster; the bench's watch of HarvesterMachines sees that (as it sees
// a machine provisioned). relay: the bench's watch of Harvester -> its watch of the management
// cluster, per change relayed; patches: the status patches' round trips, the management
// apiserver's write latency (the baseline of the provider's status patches).
type relayProbe struct {
	mu      sync.Mutex
	seen    map[int]time.Time // Harvester's change i seen by the bench's watch
	relayed map[int]time.Time // the idle machine's status with i seen by the bench's watch
	patches []time.Duration
	failed  error
}

// relayedSeconds are the relay's latencies: seen on Harvester -> seen on the management cluster.
func (p *relayProbe) relay() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ds []time.Duration
	for i, at := range p.relayed {
		if from, ok := p.seen[i]; ok {
			ds = append(ds, at.Sub(from))
		}
	}
	return ds
}

// startRelay starts the relay probe on the simulated Harvester h (its admin client makes the
// changes, the bed's cache of it is the bench's watch); management and managementCache are the
// management cluster's client and the bench's cache of it. stop deletes the probe's objects and
// returns it.
func startRelay(ctx context.Context, h *harvestersim.Harvester, management client.Client, managementCache cache.Cache, interval time.Duration) (stop func() (*relayProbe, error), err error) {
	const ns = "bench-probe"
	harvester, harvesterCache := h.Client(), h.Env.Manager.GetCache()
	for _, c := range []client.Client{harvester, management} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "relay"}, Data: map[string]string{"seq": "-1"}}
	if err := harvester.Create(ctx, cm); err != nil {
		return nil, err
	}
	hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"}, Spec: infrav1.HarvesterMachineSpec{
		CPU: 2, Memory: resource.MustParse("4Gi"),
		Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
	}}
	if err := management.Create(ctx, hm); err != nil {
		return nil, err
	}
	probeCtx, cancel := context.WithCancel(ctx)
	relayWatch, err := relayCache(probeCtx, h, ns)
	if err != nil {
		cancel()
		return nil, err
	}
	// The handlers below compare names with these copies: the goroutines that patch cm and hm
	// decode each answer into them, which a handler must not read meanwhile.
	cmName, hmName := cm.Name, hm.Name
	p := &relayProbe{seen: map[int]time.Time{}, relayed: map[int]time.Time{}}
	latest := make(chan int, 1) // the newest change not relayed yet
	var active atomic.Bool
	active.Store(true)
	change := func(obj any) (int, bool) {
		c, ok := obj.(*corev1.ConfigMap)
		if !ok || c.Namespace != ns || c.Name != cmName || !active.Load() {
			return 0, false
		}
		i, err := strconv.Atoi(c.Data["seq"])
		return i, err == nil && i >= 0
	}
	if err := addHandler(ctx, harvesterCache, &corev1.ConfigMap{}, func(obj any) {
		if i, ok := change(obj); ok {
			p.mu.Lock()
			if _, ok := p.seen[i]; !ok {
				p.seen[i] = time.Now()
			}
			p.mu.Unlock()
		}
	}); err != nil {
		cancel()
		return nil, err
	}
	if err := addHandler(ctx, relayWatch, &corev1.ConfigMap{}, func(obj any) {
		if i, ok := change(obj); ok {
			select { // the worker relays the newest change; an older one waiting is dropped
			case <-latest:
			default:
			}
			latest <- i
		}
	}); err != nil {
		cancel()
		return nil, err
	}
	if !relayWatch.WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.New("the relay's watch of Harvester did not sync")
	}
	if err := addHandler(ctx, managementCache, &infrav1.HarvesterMachine{}, func(obj any) {
		m, ok := obj.(*infrav1.HarvesterMachine)
		if !ok || m.Namespace != ns || m.Name != hmName || !active.Load() {
			return
		}
		if i, err := strconv.Atoi(m.Status.FailureDomain); err == nil {
			p.mu.Lock()
			if _, ok := p.relayed[i]; !ok {
				p.relayed[i] = time.Now()
			}
			p.mu.Unlock()
		}
	}); err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	fail := func(err error) {
		if probeCtx.Err() == nil {
			p.mu.Lock()
			p.failed = errors.Join(p.failed, err)
			p.mu.Unlock()
		}
	}
	wg.Add(2)
	go func() { // the relay
		defer wg.Done()
		for {
			var i int
			select {
			case <-probeCtx.Done():
				return
			case i = <-latest:
			}
			base := hm.DeepCopy()
			hm.Status.FailureDomain = strconv.Itoa(i)
			start := time.Now()
			if err := management.Status().Patch(probeCtx, hm, client.MergeFrom(base)); err != nil {
				fail(fmt.Errorf("relay status patch: %w", err))
				return
			}
			p.mu.Lock()
			p.patches = append(p.patches, time.Since(start))
			p.mu.Unlock()
		}
	}()
	go func() { // the changes on Harvester
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-probeCtx.Done():
				return
			case <-tick.C:
			}
			base := cm.DeepCopy()
			cm.Data["seq"] = strconv.Itoa(i)
			if err := harvester.Patch(probeCtx, cm, client.MergeFrom(base)); err != nil {
				fail(fmt.Errorf("relay change on Harvester: %w", err))
				return
			}
		}
	}()
	return func() (*relayProbe, error) {
		cancel()
		wg.Wait()
		active.Store(false)
		return p, errors.Join(p.failed, client.IgnoreNotFound(management.Delete(ctx, hm)), client.IgnoreNotFound(harvester.Delete(ctx, cm)))
	}, nil
}

// relayCache is the relay's own watch of the ConfigMaps of namespace ns on the simulated Harvester,
// as the provider watches it: through the fault proxy, as a ServiceAccount allowed to read only
// those, with its own User-Agent (not counted as the provider's). It runs until ctx ends.
func relayCache(ctx context.Context, h *harvestersim.Harvester, ns string) (cache.Cache, error) {
	const name = "bench-relay"
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}},
	}
	for _, o := range objs {
		if err := h.Client().Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	kubeconfig, err := h.Kubeconfig(ctx, ns, name, ns, time.Hour)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = name
	c, err := cache.New(cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	return c, nil
}
