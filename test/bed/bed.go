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

// Package bed brings up the whole test bed in one process: a simulated Harvester, a management
// cluster with Cluster API's core controllers and webhooks, guest clusters on demand and the
// node agent that plays their kubelets. Tests, the demo and the benchmark all start it here.
package bed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Options shape the bed.
type Options struct {
	// Harvester shapes the simulated Harvester; zero values take harvestersim's defaults.
	Harvester harvestersim.Options
	// SetupManagement adds controllers to the management manager before it starts (the
	// provider's own, as main.go adds them).
	SetupManagement func(ctx context.Context, b *Bed) error
	// Kubeadm runs CAPI's kubeadm bootstrap and control-plane providers too, and lets the node
	// agent bring up a guest's control plane where a VM runs `kubeadm init`. The Harvester's
	// load-balancer pools must then hand out loopback addresses (127.0.0.0/8), which the guest
	// apiservers listen on.
	Kubeadm bool
	// CCMBinary is the CCM image's entrypoint (see ImageBinaries): a kubeadm guest's kubelets
	// run it for our CCM's pod, once kube-scheduler has placed it. Required with Kubeadm.
	CCMBinary string
	// Provider, when set, installs the provider as it ships: its rendered components and the
	// manager binary as a process (see InstallProvider). The management cluster then serves
	// none of the provider's webhooks itself.
	Provider *ProviderOptions
	// ProviderInstalledLater leaves the provider's webhooks out of the management cluster as
	// Provider does, for a caller that installs the provider itself (InstallProvider), as the
	// bench does with managers of its own settings: with both, every admission call would go to
	// the management manager's in-process webhooks and to the installed manager's.
	ProviderInstalledLater bool
	// Topology turns on CAPI's ClusterTopology feature gate and runs its ClusterClass and
	// topology controllers, for managed topologies (the ClusterClass flavour).
	Topology bool
}

// Bed is the running test bed.
type Bed struct {
	Harvester    *harvestersim.Harvester
	Management   *testenv.Environment
	ClusterCache clustercache.ClusterCache
	Nodes        *guest.NodeAgent
	// Provider is the shipped provider's manager, when Options.Provider asked for it.
	Provider *Provider

	options       Options
	ccmBinary     string
	mu            sync.Mutex
	guests        []*guest.Cluster
	providers     []*Provider
	managements   []*Management
	capiMu        sync.Mutex // serialises StartCAPIProviders
	capiProviders []*CAPIProviders
	ipam          []*IPAMProvider
}

// Start brings the bed up. Callers must Stop it, which also deletes every Cluster first.
func Start(ctx context.Context, o Options) (*Bed, error) {
	b := &Bed{options: o}
	var err error
	if b.Harvester, err = harvestersim.Start(ctx, o.Harvester); err != nil {
		return nil, err
	}
	startManagement := testenv.StartManagement
	if o.Provider != nil || o.ProviderInstalledLater {
		startManagement = testenv.StartManagementWithoutProvider
	}
	if b.Management, err = startManagement(); err != nil {
		return nil, errors.Join(err, b.Harvester.Stop())
	}
	if err := b.start(ctx, o); err != nil {
		return nil, errors.Join(err, b.Stop(ctx))
	}
	return b, nil
}

func (b *Bed) start(ctx context.Context, o Options) error {
	var err error
	if b.ClusterCache, err = testenv.AddCAPICore(ctx, b.Management); err != nil {
		return err
	}
	if o.Kubeadm {
		if err := testenv.AddKubeadmProviders(ctx, b.Management, b.ClusterCache); err != nil {
			return err
		}
	}
	if o.Topology {
		if err := testenv.AddCAPITopology(ctx, b.Management, b.ClusterCache); err != nil {
			return err
		}
	}
	if o.SetupManagement != nil {
		if err := o.SetupManagement(ctx, b); err != nil {
			return err
		}
	}
	if err := b.Management.StartManager(ctx); err != nil {
		return err
	}
	if o.Provider != nil {
		if b.Provider, err = b.InstallProvider(ctx, *o.Provider); err != nil {
			return err
		}
	}
	b.Nodes = guest.NewNodeAgent(b.Harvester.Client(), b.Management.Client)
	if o.Kubeadm {
		if o.CCMBinary == "" {
			return errors.New("a bed with kubeadm guests needs Options.CCMBinary (see ImageBinaries)")
		}
		b.ccmBinary = o.CCMBinary
		b.Nodes.StartKubeadm = b.startKubeadm
	}
	// RKE2 and K3s control planes, for clusters of the providers StartCAPIProviders runs.
	b.Nodes.StartControlPlane = b.startDistribution
	return b.Nodes.SetupWithManager(b.Harvester.Env.Manager)
}

// AddGuest starts the control plane of a guest cluster whose CAPI Cluster is namespace/name.
func (b *Bed) AddGuest(ctx context.Context, namespace, name string, withCCM bool) (*guest.Cluster, error) {
	return b.addGuestIn(ctx, b.Management.Client, namespace, name, withCCM)
}

// AddGuestOf is AddGuest for a cluster of another management cluster of the bed: its
// kubeconfig Secret is written there.
func (b *Bed) AddGuestOf(ctx context.Context, m *Management, namespace, name string) (*guest.Cluster, error) {
	return b.addGuestIn(ctx, m.Env.Client, namespace, name, false)
}

func (b *Bed) addGuestIn(ctx context.Context, management client.Client, namespace, name string, withCCM bool) (*guest.Cluster, error) {
	g, err := guest.Start(ctx, management, namespace, name, withCCM)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.guests = append(b.guests, g)
	b.mu.Unlock()
	b.Nodes.AddGuest(g)
	return g, nil
}

// StopGuest stops a guest that AddGuest started, as its control plane's machines going away
// would: the node agent stops registering Nodes in it and its apiserver stops; Stop then leaves
// it alone. A suite that starts a guest per test stops each at the test's end, or every idle
// guest apiserver and etcd of the suite keeps running (and using CPU) until the suite ends.
func (b *Bed) StopGuest(g *guest.Cluster) error {
	b.mu.Lock()
	i := slices.Index(b.guests, g)
	if i >= 0 {
		b.guests = slices.Delete(b.guests, i, i+1)
	}
	b.mu.Unlock()
	if i < 0 {
		return nil // stopped already (or never the bed's)
	}
	b.Nodes.RemoveGuest(g)
	return g.Stop()
}

// startKubeadm brings up a guest's control plane as `kubeadm init` would, and stops it with the bed.
func (b *Bed) startKubeadm(ctx context.Context, namespace, name string, n *guest.KubeadmNode) (*guest.Cluster, error) {
	g, err := guest.StartKubeadm(ctx, namespace, name, n)
	if err != nil {
		return nil, err
	}
	// Its addons are scheduled, and our CCM runs from its pod where kube-scheduler puts it.
	if err := g.StartScheduling(context.WithoutCancel(ctx), b.ccmBinary); err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	b.mu.Lock()
	b.guests = append(b.guests, g)
	b.mu.Unlock()
	return g, nil
}

// Guest returns the running guest of the Cluster namespace/name, or nil.
func (b *Bed) Guest(namespace, name string) *guest.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.guests {
		if g.Namespace == namespace && g.Name == name {
			return g
		}
	}
	return nil
}

// Stop deletes every Cluster (CAPI's cluster cache otherwise keeps the manager from stopping),
// then stops the management cluster, the simulated Harvester (and with it the node agent, which
// talks to the guests) and last the guests.
func (b *Bed) Stop(ctx context.Context) error {
	var errs []error
	b.mu.Lock()
	managements := b.managements
	b.managements = nil
	b.mu.Unlock()
	for _, m := range managements {
		errs = append(errs, m.stop(ctx))
	}
	if b.Management != nil {
		errs = append(errs, deleteClusters(ctx, b.Management.Client))
	}
	b.mu.Lock()
	providers, capiProviders := b.providers, b.capiProviders
	b.providers, b.capiProviders = nil, nil
	b.mu.Unlock()
	for _, p := range providers {
		errs = append(errs, p.cleanup())
	}
	for _, p := range capiProviders {
		errs = append(errs, p.stop())
	}
	b.mu.Lock()
	ipam := b.ipam
	b.ipam = nil
	b.mu.Unlock()
	for _, p := range ipam {
		errs = append(errs, p.Stop())
	}
	if b.Management != nil {
		errs = append(errs, b.Management.Stop())
	}
	// The ClusterCache runs its caches outside the manager's context; without this their
	// watches keep the guest apiservers from stopping.
	if s, ok := b.ClusterCache.(interface{ Shutdown() }); ok {
		s.Shutdown()
	}
	if b.Harvester != nil {
		errs = append(errs, b.Harvester.Stop())
	}
	b.mu.Lock()
	guests := b.guests
	b.guests = nil
	b.mu.Unlock()
	for _, g := range guests {
		errs = append(errs, g.Stop())
	}
	return errors.Join(errs...)
}

// deleteClusters deletes all Clusters of a management cluster and waits until they are gone, as
// long as their deletion goes on (a busy machine makes it slow): it gives up when the Clusters
// left and what their Deleting conditions say have not changed for two minutes, or after 15.
func deleteClusters(ctx context.Context, c client.Client) error {
	clusters := &clusterv1.ClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return err
	}
	for i := range clusters.Items {
		if err := c.Delete(ctx, &clusters.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	left, changed := "", time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, clusters); err != nil {
			return false, err
		}
		var now []string
		for _, cl := range clusters.Items {
			d := conditions.Get(&cl, clusterv1.DeletingCondition)
			if d == nil {
				d = &metav1.Condition{}
			}
			now = append(now, fmt.Sprintf("%s/%s (%s: %s)", cl.Namespace, cl.Name, d.Reason, d.Message))
		}
		if s := strings.Join(now, ", "); s != left {
			left, changed = s, time.Now()
		} else if len(now) > 0 && time.Since(changed) >= 2*time.Minute {
			return false, errors.New("no progress")
		}
		return len(now) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("deleting the Clusters (%s left, unchanged for %s): %w", left, time.Since(changed).Round(time.Second), err)
	}
	return nil
}

// LeakCheck lists what is left on the simulated Harvester in a target namespace: VMs, VMIs,
// PVCs, Secrets, LoadBalancers, ServiceAccounts, RoleBindings, ClusterRoleBindings bound to its
// ServiceAccounts, and IP pool allocations of its load balancers. An empty list means clean.
func (b *Bed) LeakCheck(ctx context.Context, namespace string) ([]string, error) {
	return LeakCheck(ctx, b.Harvester.Client(), namespace)
}

// ProviderNamespacedRole is the ClusterRole config/harvester/target-namespace.yaml binds the
// provider's identity to in a target namespace.
const ProviderNamespacedRole = "capi-harvester-provider-namespaced"

// LeakCheck is Bed.LeakCheck against any Harvester, through an admin client c; the namespace
// must hold nothing but what the provider made for the clusters under test.
func LeakCheck(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	var leaks []string
	lists := []struct {
		kind string
		list client.ObjectList
	}{
		{"VirtualMachine", &kubevirtv1.VirtualMachineList{}},
		{"VirtualMachineInstance", &kubevirtv1.VirtualMachineInstanceList{}},
		{"PersistentVolumeClaim", &corev1.PersistentVolumeClaimList{}},
		{"Secret", &corev1.SecretList{}},
		{"LoadBalancer", &lbv1.LoadBalancerList{}},
		{"ServiceAccount", &corev1.ServiceAccountList{}},
		{"RoleBinding", &rbacv1.RoleBindingList{}},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing %ss: %w", l.kind, err)
		}
		if rbs, ok := l.list.(*rbacv1.RoleBindingList); ok {
			// The admin's binding of the provider's identity (target-namespace.yaml) is not the
			// provider's to delete.
			rbs.Items = slices.DeleteFunc(rbs.Items, func(rb rbacv1.RoleBinding) bool { return rb.RoleRef.Name == ProviderNamespacedRole })
		}
		for _, name := range names(l.list) {
			leaks = append(leaks, l.kind+" "+namespace+"/"+name)
		}
	}
	crbs := &rbacv1.ClusterRoleBindingList{}
	if err := c.List(ctx, crbs); err != nil {
		return nil, err
	}
	for _, crb := range crbs.Items {
		for _, s := range crb.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace {
				leaks = append(leaks, "ClusterRoleBinding "+crb.Name)
				break
			}
		}
	}
	pools := &lbv1.IPPoolList{}
	if err := c.List(ctx, pools); err != nil {
		return nil, err
	}
	for _, p := range pools.Items {
		for ip, who := range p.Status.Allocated {
			if strings.HasPrefix(who, namespace+"/") {
				leaks = append(leaks, fmt.Sprintf("IPPool %s allocation %s to %s", p.Name, ip, who))
			}
		}
	}
	slices.Sort(leaks)
	return leaks, nil
}

func names(list client.ObjectList) []string {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		if o, err := meta.Accessor(item); err == nil {
			out = append(out, o.GetName())
		}
	}
	return out
}
