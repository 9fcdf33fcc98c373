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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// migrationReconciler plays the virt-handlers of a live migration's two hosts once KubeVirt's
// migration controller has made the target's launcher pod and handed the migration over.
// Harvester's "Migrate" action and maintenance mode create VirtualMachineInstanceMigrations.
type migrationReconciler struct {
	client.Client
}

func (r *migrationReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-migration").
		For(&kubevirtv1.VirtualMachineInstanceMigration{}).
		// virt-controller hands a migration over by writing the VMI's migrationState, after the
		// migration's own last change: the VMI's event brings its migration here.
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.migrationOf)).
		Complete(r)
}

// migrationOf is the migration a VMI's migrationState names, while it is under way.
func (r *migrationReconciler) migrationOf(ctx context.Context, obj client.Object) []reconcile.Request {
	vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance)
	if !ok || vmi.Status.MigrationState == nil || vmi.Status.MigrationState.Completed {
		return nil
	}
	migrations := &kubevirtv1.VirtualMachineInstanceMigrationList{}
	if err := r.List(ctx, migrations, client.InNamespace(vmi.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	for i := range migrations.Items {
		if migrations.Items[i].UID == vmi.Status.MigrationState.MigrationUID {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(&migrations.Items[i])}}
		}
	}
	return nil
}

func (r *migrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmim := &kubevirtv1.VirtualMachineInstanceMigration{}
	if err := r.Get(ctx, req.NamespacedName, vmim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, r.handlers(ctx, vmim)
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
	// The target's handler clears an evacuation's mark once the VM has left the host
	// (kubevirt pkg/virt-handler/migration-target.go).
	if vmi.Status.EvacuationNodeName == state.SourceNode {
		vmi.Status.EvacuationNodeName = ""
	}
	finalizeHotplug(vmi)
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

// Migrate asks for a live migration of a VMI, as Harvester's "Migrate" action does, and returns
// the migration object; its status.phase says how it ended.
func (h *Harvester) Migrate(ctx context.Context, namespace, vmi string) (*kubevirtv1.VirtualMachineInstanceMigration, error) {
	vmim := &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: vmi + "-migration-"},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmi},
	}
	return vmim, h.Env.Client.Create(ctx, vmim)
}

// Labels virt-controller puts on a VMI for the migration of a CPU or memory hotplug
// (kubevirt.io/api core/v1 types.go), which the target's handler removes.
var hotplugLabels = []string{
	"kubevirt.io/vmi-pod-cpu-resource-limits",
	"kubevirt.io/vmi-pod-memory-resource-requests",
	"kubevirt.io/memory-hotplug-overhead-ratio",
}

// finalizeHotplug does what the target's virt-handler does for a CPU or memory hotplug as it
// finalises the migration KubeVirt's workload updater made for it (kubevirt
// pkg/virt-handler/migration-target.go, hotplugCPU and hotplugMemory): the guest gets the
// sockets and memory of the VMI's spec, the status says so, and the hotplug conditions and
// labels go. (The migration is Succeeded for virt-controller only once they are gone.)
func finalizeHotplug(vmi *kubevirtv1.VirtualMachineInstance) {
	var kept []kubevirtv1.VirtualMachineInstanceCondition
	for _, c := range vmi.Status.Conditions {
		switch {
		case c.Type == kubevirtv1.VirtualMachineInstanceVCPUChange:
			if cpu := vmi.Spec.Domain.CPU; cpu != nil {
				vmi.Status.CurrentCPUTopology = &kubevirtv1.CPUTopology{Sockets: cpu.Sockets, Cores: cpu.Cores, Threads: cpu.Threads}
			}
		case c.Type == kubevirtv1.VirtualMachineInstanceMemoryChange && c.Status == corev1.ConditionTrue:
			if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil && vmi.Status.Memory != nil {
				vmi.Status.Memory.GuestRequested = ptr.To(m.Guest.DeepCopy())
				vmi.Status.Memory.GuestCurrent = ptr.To(m.Guest.DeepCopy())
			}
		default:
			kept = append(kept, c)
		}
	}
	vmi.Status.Conditions = kept
	for _, l := range hotplugLabels {
		delete(vmi.Labels, l)
	}
}
