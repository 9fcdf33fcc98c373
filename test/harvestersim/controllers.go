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

package harvestersim

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// controllerOptions let several simulators live in one process (controller names are global).
var controllerOptions = controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}

func (h *Harvester) setupControllers() error {
	mgr := h.Env.Manager
	c := mgr.GetClient()
	// KubeVirt's virt-controller makes VMIs, their launcher pods and migrations' target pods
	// (launcher.go); the simulator places and runs the pods, plays virt-handler and the guests,
	// and collects what deleted VMs owned. It writes KubeVirt's kinds as KubeVirt's handler does.
	kv, err := h.kubeVirtClient()
	if err != nil {
		return err
	}
	for _, setup := range []func() error{
		func() error { return (&launcherReconciler{Client: c}).setup(mgr) },
		func() error { return (&vmGarbageCollector{Client: c}).setup(mgr) },
		func() error { return (&vmiReconciler{Client: kv, h: h}).setup(mgr) },
		func() error { return (&pvcReconciler{Client: c}).setup(mgr) },
		func() error { return (&kubeVIPReconciler{Client: c, h: h}).setup(mgr) },
		func() error { return (&migrationReconciler{Client: kv}).setup(mgr) },
	} {
		if err := setup(); err != nil {
			return err
		}
	}
	return nil
}

// requestsFor lists objects and returns a reconcile request for each, for watches that fan out.
func requestsFor(ctx context.Context, c client.Reader, list client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, opts...); err != nil {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}
