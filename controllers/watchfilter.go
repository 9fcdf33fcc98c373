package controllers

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

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
