package controllers

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// watchFiltered keeps the requests of a Harvester watch's map function to the objects this
// manager's --watch-filter selects. The builder's WithEventFilter guards only the watches it
// builds; the watches on Harvester's caches are added to the controller afterwards and see every
// VM, VMI, volume, load balancer and host of a target namespace that several shards may share,
// so without this two managers would reconcile (and write) the same objects. An object the
// cache cannot find is dropped too: its own watch enqueues it when it appears.
func watchFiltered(reader client.Reader, filter string, newObj func() client.Object, mapFn handler.MapFunc) handler.MapFunc {
	if filter == "" {
		return mapFn
	}
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		for _, req := range mapFn(ctx, o) {
			obj := newObj()
			if err := reader.Get(ctx, req.NamespacedName, obj); err != nil {
				continue
			}
			if obj.GetLabels()[clusterv1.WatchLabel] == filter {
				out = append(out, req)
			}
		}
		return out
	}
}
