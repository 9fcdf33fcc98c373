package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// HarvesterMachineReconciler reconciles HarvesterMachines.
type HarvesterMachineReconciler struct {
	Client client.Client
	Scheme *runtime.Scheme
	// WatchFilterValue limits reconciles to objects labelled
	// `cluster.x-k8s.io/watch-filter=<value>` (CAPI's --watch-filter).
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvestermachines;harvestermachines/status;harvestermachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvestermachinetemplates;harvestermachinetemplates/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch

// SetupWithManager registers the reconciler with a manager.
func (r *HarvesterMachineReconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.HarvesterMachine{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceNotPausedAndHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue)).
		Complete(r)
}

// Reconcile brings a HarvesterMachine's VM on Harvester to the desired state.
func (r *HarvesterMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	hm := &infrav1.HarvesterMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, hm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The VM lifecycle lands with the HarvesterMachine reconciler issue.
	return ctrl.Result{}, nil
}
