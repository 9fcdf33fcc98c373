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
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/maintenance"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedrainrules,verbs=list;watch

// MaintenanceAnnotation is on a Machine while the provider moves its VM off a host
// (maintenance.Annotation).
const MaintenanceAnnotation = maintenance.Annotation

// DefaultHostDrainTimeout is --host-maintenance-drain-timeout's default
// (maintenance.DefaultDrainTimeout).
const DefaultHostDrainTimeout = maintenance.DefaultDrainTimeout

// reconcileHostMaintenance moves a machine's VM off a host Harvester empties
// (maintenance.Service), records the move's events and sets its HostMaintenance condition (and
// VirtualMachineReady while the move holds the VM down). handled is true when the reconcile
// ends here.
func (r *HarvesterMachineReconciler) reconcileHostMaintenance(ctx context.Context, s *machineScope, vms vmService, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (handled bool, res ctrl.Result, err error) {
	svc := maintenance.Service{Client: r.Client, DrainTimeout: r.HostDrainTimeout}
	if r.ClusterCache != nil {
		svc.Guests = r.ClusterCache
	}
	rep, err := svc.Reconcile(ctx, vms, maintenance.Machine{HM: s.hm, Machine: s.machine, Cluster: s.cluster, VM: vm, VMI: vmi})
	for _, e := range rep.Events {
		r.Recorder.Eventf(s.hm, nil, e.Type, e.Reason, "HostMaintenance", "%s", e.Note)
	}
	if c := rep.HostMaintenance; c != nil {
		conditions.Set(s.hm, metav1.Condition{Type: infrav1.HostMaintenanceCondition, Status: c.Status, Reason: c.Reason, Message: c.Message, ObservedGeneration: s.hm.Generation})
	}
	if c := rep.VirtualMachine; c != nil {
		setVMCondition(s.hm, c.Status, c.Reason, c.Message)
	}
	if err != nil {
		return rep.Handled, ctrl.Result{}, err
	}
	res.RequeueAfter = rep.RequeueAfter
	if rep.Handled && res.RequeueAfter == 0 {
		res.RequeueAfter = fallbackRequeue // the VMI's events are the main path
	}
	return rep.Handled, res, nil
}
