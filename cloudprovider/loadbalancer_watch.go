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

package cloudprovider

import (
	"context"
	"fmt"
	"strings"
	"sync"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// byPrimaryIndex indexes guest Services by the primary Service (namespace/name) they name.
const byPrimaryIndex = "primary-service"

// eventComponent is the source of the events the load balancer records.
const eventComponent = "harvester-cloud-controller-manager"

// StartLoadBalancers starts the watches the load balancer works with and makes LoadBalancer()
// available: the guest's Services (through guest), and the Harvester load balancers labelled
// for this guest cluster (with the cloud's own credential: list and watch in its namespace, as
// Harvester's cloud-provider role allows). When one of those gets an address, the watch writes
// it to its Service's kube-vip annotation and status at once: EnsureLoadBalancer does not wait
// for Harvester, so this is how the address reaches the Service. Everything stops with ctx.
func (c *Cloud) StartLoadBalancers(ctx context.Context, guest kubernetes.Interface) error {
	harvesterLBs, err := cache.New(c.config, cache.Options{
		Scheme: c.client.Scheme(),
		DefaultNamespaces: map[string]cache.Config{c.namespace: {
			LabelSelector: labels.SelectorFromSet(labels.Set{guestcloud.LabelLBCluster: guestcloud.LabelValue(c.opts.ClusterName)}),
		}},
	})
	if err != nil {
		return fmt.Errorf("creating the load balancer cache: %w", err)
	}
	informer, err := harvesterLBs.GetInformer(ctx, &lbv1.LoadBalancer{})
	if err != nil {
		return err
	}
	services := informers.NewSharedInformerFactory(guest, 0).Core().V1().Services()
	if err := services.Informer().AddIndexers(toolscache.Indexers{byPrimaryIndex: primaryServiceOf}); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: guest.CoreV1().Events("")})
	l := &loadBalancers{
		cloud:          c,
		guest:          guest,
		services:       services.Lister(),
		servicesIndex:  services.Informer().GetIndexer(),
		servicesSynced: services.Informer().HasSynced,
		harvesterLBs:   harvesterLBs,
		waiters:        &addressWaiters{byName: map[string]chan struct{}{}},
		annotations: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "harvester-loadbalancer-address"}),
		recorder: broadcaster.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: eventComponent}),
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    l.observe,
		UpdateFunc: func(_, obj any) { l.observe(obj) },
		DeleteFunc: l.forget,
	}); err != nil {
		return err
	}
	go services.Informer().Run(ctx.Done())
	go func() {
		if err := harvesterLBs.Start(ctx); err != nil {
			klog.ErrorS(err, "the watch of Harvester load balancers stopped")
		}
	}()
	go l.runAnnotations(ctx)
	go func() {
		<-ctx.Done()
		l.annotations.ShutDown()
		broadcaster.Shutdown()
	}()
	c.loadBalancers.Store(l)
	return nil
}

func primaryServiceOf(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	if ref, ok := primaryRef(svc); ok {
		return []string{ref}, nil
	}
	return nil, nil
}

// observe wakes the calls waiting for a load balancer and queues its Service when it has an
// address, or a problem Harvester reports instead.
func (l *loadBalancers) observe(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	lb, ok := obj.(*lbv1.LoadBalancer)
	if !ok {
		return
	}
	l.waiters.notify(lb.Name)
	ns, name := lb.Labels[guestcloud.LabelLBServiceNamespace], lb.Labels[guestcloud.LabelLBServiceName]
	if lb.DeletionTimestamp == nil && ns != "" && name != "" &&
		(guestcloud.ServiceLoadBalancerAddress(lb) != "" || guestcloud.LoadBalancerProblem(lb) != "") {
		l.annotations.Add(ns + "/" + name)
	}
}

// forget wakes the calls waiting for a load balancer that is gone.
func (l *loadBalancers) forget(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if lb, ok := obj.(*lbv1.LoadBalancer); ok {
		l.waiters.notify(lb.Name)
	}
}

func (l *loadBalancers) runAnnotations(ctx context.Context) {
	if !toolscache.WaitForCacheSync(ctx.Done(), l.servicesSynced) {
		return
	}
	for {
		key, shutdown := l.annotations.Get()
		if shutdown {
			return
		}
		if err := l.annotate(ctx, key); err != nil {
			klog.ErrorS(err, "giving a load balancer's address to its Service", "service", key)
			l.annotations.AddRateLimited(key)
		} else {
			l.annotations.Forget(key)
		}
		l.annotations.Done(key)
	}
}

// annotate writes the address of a Service's load balancer to its kube-vip annotation and, in
// pool mode, its status, when the Service still wants that load balancer (a re-created Service
// has another one). A load balancer
// Harvester gives no address for a reason it reports: that reason becomes a warning on the
// Service (EnsureLoadBalancer did not wait for it).
func (l *loadBalancers) annotate(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	svc, err := l.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// The watch of Services may lag behind the service controller's.
		svc, err = l.guest.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, secondary := primaryRef(svc); secondary ||
		svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil {
		return nil
	}
	lb := &lbv1.LoadBalancer{}
	if err := l.harvesterLBs.Get(ctx, client.ObjectKey{Namespace: l.cloud.namespace, Name: l.nameOf(svc)}, lb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if lb.DeletionTimestamp != nil {
		return nil
	}
	addr := guestcloud.ServiceLoadBalancerAddress(lb)
	if addr == "" {
		if problem := guestcloud.LoadBalancerProblem(lb); problem != "" {
			l.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonAddressPending, "load balancer %s/%s has no address: %s", lb.Namespace, lb.Name, problem)
		}
		return nil
	}
	if err := l.setKubeVIPAddress(ctx, svc, addr); err != nil {
		return err
	}
	if guestcloud.LoadBalancerIPAM(lb) == lbv1.DHCP {
		return nil // kube-vip writes the status of a DHCP lease
	}
	// The status EnsureLoadBalancer would return, written now: the service controller's call that
	// the annotation triggers can wait in its queue behind the first calls of the Services made
	// with this one (a second with 40 at once and five workers); it then finds nothing to change.
	return l.setStatus(ctx, svc, ingress(addr))
}

// addressWaiters lets calls wait for changes of a load balancer, by name: a waiter takes the
// channel of the name before it looks at the cache, and a change closes it.
type addressWaiters struct {
	mu     sync.Mutex
	byName map[string]chan struct{}
}

func (w *addressWaiters) channel(name string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.byName[name]
	if !ok {
		ch = make(chan struct{})
		w.byName[name] = ch
	}
	return ch
}

func (w *addressWaiters) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.byName[name]; ok {
		close(ch)
		delete(w.byName, name)
	}
}
