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
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// HarvesterMachineTemplateReconciler keeps a HarvesterMachineTemplate's status.capacity and
// status.nodeInfo in step with its spec: what the cluster autoscaler reads to scale a
// MachineDeployment up from zero, when it has no node to look at. It needs nothing from
// Harvester: the capacity follows from the spec alone.
type HarvesterMachineTemplateReconciler struct {
	Client client.Client
	// WatchFilterValue is CAPI's --watch-filter.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvestermachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvestermachinetemplates/status,verbs=get;update;patch

// SetupWithManager registers the reconciler. It watches the templates only; a change of status
// by anyone else also comes back here and is put right.
func (r *HarvesterMachineTemplateReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.HarvesterMachineTemplate{}, builder.WithPredicates(
			predicates.ResourceNotPausedAndHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue))).
		WithOptions(options).
		Complete(r)
}

// Reconcile writes the template's capacity and node info when they differ from its spec's.
func (r *HarvesterMachineTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &infrav1.HarvesterMachineTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	desired := infrav1.HarvesterMachineTemplateStatus{
		Capacity: build.MachineCapacity(&t.Spec.Template.Spec),
		NodeInfo: build.MachineNodeInfo(),
	}
	if apiequality.Semantic.DeepEqual(t.Status, desired) {
		return ctrl.Result{}, nil
	}
	before := t.DeepCopy()
	t.Status = desired
	if err := r.Client.Status().Patch(ctx, t, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("writing the capacity of HarvesterMachineTemplate %s/%s: %w", t.Namespace, t.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("capacity written", "capacity", desired.Capacity)
	return ctrl.Result{}, nil
}
