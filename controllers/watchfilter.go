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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// The --watch-filter label is on the objects a manager reconciles (and those its user labels),
// not on what they use: IPAddresses, IPAddressClaims, ClusterResourceSets, identity Secrets and
// Harvester's objects do not carry it. So the label filter is a predicate on each controller's
// own kind (For) only, and every other watch maps its events to requests and keeps those for
// objects that carry the label (watchFiltered). A global WithEventFilter would drop those
// events, and CAPI's paused filter with it the events that pause or resume an object (its
// reconcile writes the Paused condition, as CAPI's contract asks).

// watchFiltered keeps the requests of a Harvester watch's map function to the objects this
// manager reconciles: those its cache holds (a manager scoped to a namespace, --namespace, holds
// only that namespace's) and, with --watch-filter, that carry the filter label. The builder's
// WithEventFilter guards only the watches it builds; the watches on Harvester's caches are added
// to the controller afterwards and see every VM, VMI, volume, load balancer and host of a target
// namespace that several shards may share, so without this two managers would reconcile (and
// write) the same objects, and a namespace-scoped one would retry objects its cache cannot read.
// An object the cache does not hold is dropped: its own watch enqueues it when it appears.
func watchFiltered(reader client.Reader, filter string, newObj func() client.Object, mapFn handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		for _, req := range mapFn(ctx, o) {
			obj := newObj()
			if err := reader.Get(ctx, req.NamespacedName, obj); err != nil {
				continue
			}
			if filter == "" || obj.GetLabels()[clusterv1.WatchLabel] == filter {
				out = append(out, req)
			}
		}
		return out
	}
}

// controllerOwner maps an object to the object of this provider's kind that is its controller
// owner (what Owns does), as requests that watchFiltered can filter.
func controllerOwner(kind string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != kind || ref.APIVersion != infrav1.GroupVersion.String() {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}}
	}
}
