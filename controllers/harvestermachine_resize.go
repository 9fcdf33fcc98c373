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

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// reconcileResources gives a machine's VM the CPUs, memory and disk sizes of its spec
// (harvester.ReconcileSize) and reports in ResourcesUpToDate how far Harvester and KubeVirt are,
// with an event for each change asked and each refusal. A conflict is returned for the caller to
// read the VM again; other Harvester errors are transport errors.
func (r *HarvesterMachineReconciler) reconcileResources(ctx context.Context, s *machineScope, vms vmService, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	rep, err := harvester.ReconcileSize(ctx, vms, s.hm, vm, vmi)
	for _, e := range rep.Events {
		r.Recorder.Eventf(s.hm, nil, e.Type, e.Reason, "Resize", "%s", e.Note)
	}
	if rep.Report {
		setResourcesCondition(s.hm, rep.Status, rep.Reason, rep.Message)
	}
	return err
}

func setResourcesCondition(hm *infrav1.HarvesterMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hm, metav1.Condition{
		Type: infrav1.ResourcesUpToDateCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: hm.Generation,
	})
}
