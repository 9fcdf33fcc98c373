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
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Harvester's host maintenance annotations (pkg/util/drainhelper, pkg/controller/master/node).
const (
	// AnnotationDrainRequested asks Harvester's node drain controller to put a host in
	// maintenance mode; AnnotationDrainForced makes it halt the VMs that cannot migrate.
	AnnotationDrainRequested = "harvesterhci.io/drain-requested"
	AnnotationDrainForced    = "harvesterhci.io/drain-forced"
	// AnnotationMaintainStatus is "running" while the host drains and "completed" once no VM
	// runs there.
	AnnotationMaintainStatus = "harvesterhci.io/maintain-status"
	// LabelMaintainModeStrategy is a VM's choice of what maintenance does with it.
	LabelMaintainModeStrategy = "harvesterhci.io/maintain-mode-strategy"

	// MaintainStatusRunning and MaintainStatusCompleted are AnnotationMaintainStatus's values.
	MaintainStatusRunning   = "running"
	MaintainStatusCompleted = "completed"
)

// EnableMaintenance does what Harvester's enableMaintenanceMode action does (its API server,
// pkg/api/node/formatter.go, which the bed does not run): it asks for the host's drain, forced
// or not. Harvester's own node drain and maintain-status controllers, which every simulated
// Harvester runs, do the rest: they refuse a non-forced request while a VM on the host cannot
// migrate (the annotations are removed again), halt the VMs the request's strategy says to,
// cordon and drain the host through the Eviction API (KubeVirt's admitter migrates what can
// move) and mark the host's maintain status.
func (h *Harvester) EnableMaintenance(ctx context.Context, host string, force bool) error {
	node := &corev1.Node{}
	if err := h.Env.Client.Get(ctx, client.ObjectKey{Name: host}, node); err != nil {
		return err
	}
	base := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[AnnotationDrainRequested] = "true"
	if force {
		node.Annotations[AnnotationDrainForced] = "true"
	}
	return h.Env.Client.Patch(ctx, node, client.MergeFrom(base))
}

// DisableMaintenance does what Harvester's disableMaintenanceMode action does: it uncordons the
// host and removes the maintenance annotations and KubeVirt's drain taint. (The action also
// starts the VMs labelled ShutdownAndRestartAfterDisable; the bed's VMs carry no such label.)
func (h *Harvester) DisableMaintenance(ctx context.Context, host string) error {
	node := &corev1.Node{}
	if err := h.Env.Client.Get(ctx, client.ObjectKey{Name: host}, node); err != nil {
		return err
	}
	base := node.DeepCopy()
	node.Spec.Unschedulable = false
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != "kubevirt.io/drain" {
			taints = append(taints, t)
		}
	}
	node.Spec.Taints = taints
	for _, key := range []string{AnnotationDrainRequested, AnnotationDrainForced, AnnotationMaintainStatus} {
		delete(node.Annotations, key)
	}
	return h.Env.Client.Patch(ctx, node, client.MergeFrom(base))
}

// ReportHostStatus is a kubelet's periodic status report for a host (its Ready condition's
// heartbeat). Harvester's maintain-status controller re-checks a draining host only when the
// host changes; on Harvester these reports are such changes.
func (h *Harvester) ReportHostStatus(ctx context.Context, host string) error {
	node := &corev1.Node{}
	if err := h.Env.Client.Get(ctx, client.ObjectKey{Name: host}, node); err != nil {
		return err
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			node.Status.Conditions[i].LastHeartbeatTime = metav1.Now()
		}
	}
	return h.Env.Client.Status().Update(ctx, node)
}
