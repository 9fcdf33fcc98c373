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
	"strings"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"

	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// SetupWithManager registers the reconciler, and its watches on the load balancers and hosts
// of every Harvester connection.
func (r *HarvesterClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	cluster := func() client.Object { return &infrav1.HarvesterCluster{} }
	filtered := func(mapFn handler.MapFunc) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(watchFiltered(r.Client, r.WatchFilterValue, cluster, mapFn))
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		// Paused ones too: the reconcile writes their Paused condition.
		For(&infrav1.HarvesterCluster{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue),
			predicates.ResourceIsNotExternallyManaged(mgr.GetScheme(), log))).
		WithOptions(options).
		Watches(&clusterv1.Cluster{},
			filtered(util.ClusterToInfrastructureMapFunc(ctx,
				infrav1.GroupVersion.WithKind("HarvesterCluster"), mgr.GetClient(), &infrav1.HarvesterCluster{})),
			// Pausing and unpausing, and labels: the addons label selects the guest's addons.
			builder.WithPredicates(predicate.Or[client.Object](predicates.ClusterPausedTransitions(mgr.GetScheme(), log), predicate.LabelChangedPredicate{}))).
		// A rotated or fixed kubeconfig in an identity Secret is used at once (metadata only:
		// the provider does not cache Secrets' data).
		Watches(&corev1.Secret{}, filtered(r.secretToClusters), builder.OnlyMetadata).
		// Its guest's ClusterResourceSet, from the start: one deleted or changed by hand is
		// written again, and a manager whose RBAC does not let it read them fails to start (the
		// watch never syncs) instead of a reconcile waiting for ever on a cache made on its
		// first read. Neither its creation (the cluster's own write: waking it then made its
		// next status patch meet a stale cache) nor status updates (CAPI's, as it applies the
		// set) wake the cluster.
		Watches(&addonsv1.ClusterResourceSet{}, filtered(controllerOwner("HarvesterCluster")), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
			},
		})).
		// The admin's identities: a namespace taken out of one stops its clusters at once.
		Watches(&infrav1.HarvesterClusterIdentity{}, filtered(r.identityToClusters)).
		// A cluster being deleted waits for its machines: their deletions bring it back.
		Watches(&infrav1.HarvesterMachine{}, filtered(r.machineToCluster),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(event.UpdateEvent) bool { return false },
				DeleteFunc: func(event.DeleteEvent) bool { return true },
			})).
		Build(r)
	if err != nil {
		return err
	}
	loadBalancerToCluster := watchFiltered(r.Client, r.WatchFilterValue, cluster, r.loadBalancerToCluster)
	r.Factory.WatchCaches(c, func(hc cache.Cache) []source.Source {
		// A host's change concerns the clusters of the connection that saw it, not every
		// tenant's (a connection per identity and cluster: one host event must not wake all).
		clustersOfConnection := watchFiltered(r.Client, r.WatchFilterValue, cluster, func(context.Context, client.Object) []reconcile.Request {
			return r.connectionClusters(r.Factory.UsersOf(hc))
		})
		return []source.Source{
			source.Kind(hc, client.Object(&lbv1.LoadBalancer{}), handler.EnqueueRequestsFromMapFunc(loadBalancerToCluster)),
			source.Kind(hc, client.Object(&corev1.Node{}), handler.EnqueueRequestsFromMapFunc(clustersOfConnection)),
		}
	})
	return nil
}

// loadBalancerToCluster maps a control-plane load balancer to its HarvesterCluster, and one a
// guest's cloud controller manager made to its HarvesterCluster while that is being deleted
// (which waits for them to go; a live cluster has nothing to do on their changes).
func (r *HarvesterClusterReconciler) loadBalancerToCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	if guest := obj.GetLabels()[guestcloud.LabelLBCluster]; guest != "" {
		return r.clustersWhere(ctx, func(hc *infrav1.HarvesterCluster) bool {
			return !hc.DeletionTimestamp.IsZero() && hc.Spec.TargetNamespace == obj.GetNamespace() &&
				guestID(hc, guestcloud.LabelValue) == guest
		})
	}
	id := obj.GetLabels()[naming.LabelCluster]
	if id == "" {
		return nil
	}
	return r.clustersWhere(ctx, func(hc *infrav1.HarvesterCluster) bool {
		return guestID(hc, nil) == id
	})
}

// guestID is the ID of a HarvesterCluster's guest cluster, passed through form when given, or
// "" while it is not known.
func guestID(hc *infrav1.HarvesterCluster, form func(string) string) string {
	name := hc.Labels[clusterv1.ClusterNameLabel]
	if name == "" {
		return ""
	}
	g, ok := naming.GuestOf(hc, name)
	if !ok {
		return ""
	}
	if form != nil {
		return form(g.ID())
	}
	return g.ID()
}

// clustersWhere returns the HarvesterClusters match holds for, read from the cache without
// copies: every load balancer event of every connection maps through it.
func (r *HarvesterClusterReconciler) clustersWhere(ctx context.Context, match func(*infrav1.HarvesterCluster) bool) []reconcile.Request {
	list := &infrav1.HarvesterClusterList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if match(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// machineToCluster maps a HarvesterMachine to its cluster's HarvesterCluster.
func (r *HarvesterClusterReconciler) machineToCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, cluster); err == nil && cluster.Spec.InfrastructureRef.Name != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: cluster.Spec.InfrastructureRef.Name}}}
	}
	// Without its Cluster, the HarvesterCluster carrying the same cluster label.
	list := &infrav1.HarvesterClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// secretToClusters maps an identity Secret to the HarvesterClusters that use it: those of its
// namespace that name it, and, for a Secret of the provider's namespace, those that name a
// HarvesterClusterIdentity whose Secret it is.
func (r *HarvesterClusterReconciler) secretToClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	reqs := r.clustersWhere(ctx, func(hc *infrav1.HarvesterCluster) bool {
		id := hc.Spec.Identity()
		return hc.Namespace == obj.GetNamespace() && id.Kind == "Secret" && id.Name == obj.GetName()
	})
	if r.ProviderNamespace == "" || obj.GetNamespace() != r.ProviderNamespace {
		return reqs
	}
	identities := &infrav1.HarvesterClusterIdentityList{}
	if err := r.Client.List(ctx, identities); err != nil {
		return reqs
	}
	for i := range identities.Items {
		if identities.Items[i].Spec.SecretName == obj.GetName() {
			reqs = append(reqs, r.identityToClusters(ctx, &identities.Items[i])...)
		}
	}
	return reqs
}

// identityToClusters maps a HarvesterClusterIdentity to the HarvesterClusters that name it: a
// change of what it allows takes effect at their next reconcile, which this brings at once.
func (r *HarvesterClusterReconciler) identityToClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.clustersWhere(ctx, func(hc *infrav1.HarvesterCluster) bool {
		id := hc.Spec.Identity()
		return id.Kind == infrav1.HarvesterClusterIdentityKind && id.Name == obj.GetName()
	})
}

// connectionClusters returns the HarvesterClusters among a connection's users (their userKey).
func (r *HarvesterClusterReconciler) connectionClusters(users []string) []reconcile.Request {
	var reqs []reconcile.Request
	for _, u := range users {
		rest, ok := strings.CutPrefix(u, clusterUserPrefix)
		if !ok {
			continue
		}
		namespace, name, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}})
	}
	return reqs
}
