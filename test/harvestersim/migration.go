package harvestersim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// migrationReconciler live-migrates a VMI when a VirtualMachineInstanceMigration names it: a
// host that satisfies the VMI's required constraints other than its current one, the VMI's
// nodeName and migrationState updated, its addresses kept (bridge NICs keep their MAC and so
// their lease). Harvester's "Migrate" action and maintenance mode create such objects.
type migrationReconciler struct {
	client.Client
}

func (r *migrationReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-migration").
		For(&kubevirtv1.VirtualMachineInstanceMigration{}).
		Complete(r)
}

func (r *migrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmim := &kubevirtv1.VirtualMachineInstanceMigration{}
	if err := r.Get(ctx, req.NamespacedName, vmim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vmim.Status.Phase == kubevirtv1.MigrationSucceeded || vmim.Status.Phase == kubevirtv1.MigrationFailed || vmim.DeletionTimestamp != nil {
		// KubeVirt's migration mutator puts its finalizer on every migration; its migration
		// controller lifts it once the migration is over (kubevirt
		// pkg/virt-controller/watch/migration).
		if controllerutil.RemoveFinalizer(vmim, kubevirtv1.VirtualMachineInstanceMigrationFinalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, vmim))
		}
		return ctrl.Result{}, nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: vmim.Namespace, Name: vmim.Spec.VMIName}, vmi); err != nil {
		return ctrl.Result{}, r.finish(ctx, vmim, kubevirtv1.MigrationFailed, fmt.Sprintf("VMI %s: %v", vmim.Spec.VMIName, err))
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		return ctrl.Result{}, r.finish(ctx, vmim, kubevirtv1.MigrationFailed, "the VMI is not running")
	}
	nodes := &corev1.NodeList{}
	if err := r.List(ctx, nodes); err != nil {
		return ctrl.Result{}, err
	}
	others := &kubevirtv1.VirtualMachineInstanceList{}
	if err := r.List(ctx, others); err != nil {
		return ctrl.Result{}, err
	}
	source := vmi.Status.NodeName
	target, err := schedule(vmi, nodes.Items, others.Items, source)
	if err != nil {
		return ctrl.Result{}, r.finish(ctx, vmim, kubevirtv1.MigrationFailed, "no target host: "+err.Error())
	}
	now := metav1.Now()
	vmi.Status.NodeName = target
	vmi.Labels[labelNodeName] = target
	vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{
		StartTimestamp: &now, EndTimestamp: &now, SourceNode: source, TargetNode: target,
		Completed: true, MigrationUID: vmim.UID, Mode: kubevirtv1.MigrationPreCopy,
	}
	if err := r.Update(ctx, vmi); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.finish(ctx, vmim, kubevirtv1.MigrationSucceeded, "")
}

func (r *migrationReconciler) finish(ctx context.Context, vmim *kubevirtv1.VirtualMachineInstanceMigration, phase kubevirtv1.VirtualMachineInstanceMigrationPhase, message string) error {
	vmim.Status.Phase = phase
	if message != "" {
		// KubeVirt has no condition for this; it tells in an event and the log.
		ctrl.LoggerFrom(ctx).Info("migration failed", "migration", vmim.Name, "reason", message)
	}
	return r.Status().Update(ctx, vmim)
}

// Migrate asks for a live migration of a VMI, as Harvester's "Migrate" action does, and returns
// the migration object; its status.phase says how it ended.
func (h *Harvester) Migrate(ctx context.Context, namespace, vmi string) (*kubevirtv1.VirtualMachineInstanceMigration, error) {
	vmim := &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: vmi + "-migration-"},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmi},
	}
	return vmim, h.Env.Client.Create(ctx, vmim)
}
