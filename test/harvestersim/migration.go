package harvestersim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	// withVirtController: KubeVirt's migration controller drives the migration (the target pod,
	// the hand-off, the phases); the simulator plays only the virt-handlers of the two hosts.
	withVirtController bool
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
	if r.withVirtController {
		return ctrl.Result{}, r.handlers(ctx, vmim)
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

// handlers plays the target's and the source's virt-handler once virt-controller has handed the
// migration over (the VMI's migrationState names it and its target): the target is ready at an
// address, the source starts the transfer, it completes (the guest's memory moves at once here)
// and the target takes the VMI over. virt-controller then marks the migration Succeeded and
// deletes the source's pod.
func (r *migrationReconciler) handlers(ctx context.Context, vmim *kubevirtv1.VirtualMachineInstanceMigration) error {
	if vmim.IsFinal() || vmim.DeletionTimestamp != nil {
		return nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: vmim.Namespace, Name: vmim.Spec.VMIName}, vmi); err != nil {
		return client.IgnoreNotFound(err)
	}
	state := vmi.Status.MigrationState
	if state == nil || state.MigrationUID != vmim.UID || state.TargetNode == "" || state.Completed {
		return nil // not handed over yet, or done
	}
	now := metav1.Now()
	state.TargetNodeAddress = "127.0.0.1"
	state.TargetNodeDomainDetected = true
	state.TargetNodeDomainReadyTimestamp = &now
	state.StartTimestamp = &now
	state.EndTimestamp = &now
	state.Completed = true
	state.Mode = kubevirtv1.MigrationPreCopy
	vmi.Status.NodeName = state.TargetNode
	vmi.Labels[labelNodeName] = state.TargetNode
	if err := r.Update(ctx, vmi); err != nil {
		return client.IgnoreNotFound(err)
	}
	// The source's qemu, and so its launcher, exits: the kubelet reports the pod Succeeded
	// (KubeVirt leaves it, Completed, until the VMI goes).
	if state.SourcePod == "" {
		return nil
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: state.SourcePod}, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		cs.Ready, cs.Started = false, ptr.To(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}
	}
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
		}
	}
	return client.IgnoreNotFound(r.Status().Update(ctx, pod))
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
