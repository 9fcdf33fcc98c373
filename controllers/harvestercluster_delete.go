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
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// dropFinalizer removes the finalizer of a HarvesterCluster that never made anything.
func (r *HarvesterClusterReconciler) dropFinalizer(ctx context.Context, hc *infrav1.HarvesterCluster) error {
	if !controllerutil.ContainsFinalizer(hc, infrav1.ClusterFinalizer) {
		return nil
	}
	base := hc.DeepCopy()
	controllerutil.RemoveFinalizer(hc, infrav1.ClusterFinalizer)
	return ignoreGone(r.Client.Patch(ctx, hc, client.MergeFrom(base)), hc)
}

// machinesLeft lists the cluster's HarvesterMachines: they reach Harvester through this
// cluster's identity and target namespace, so the cluster must outlive them, whatever the order
// in which a user (or `kubectl delete -f`, or a GitOps prune) deletes the objects.
func (r *HarvesterClusterReconciler) machinesLeft(ctx context.Context, s *clusterScope) ([]string, error) {
	list := &infrav1.HarvesterMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.hc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: s.cluster.Name}); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names, nil
}

func (r *HarvesterClusterReconciler) reconcileDelete(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	hc := s.hc
	left, err := r.machinesLeft(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(left) > 0 {
		shown := left[:min(len(left), 5)]
		msg := fmt.Sprintf("waiting for %d HarvesterMachines to delete their VMs first: %s", len(left), strings.Join(shown, ", "))
		if len(left) > len(shown) {
			msg += ", ..."
		}
		if s.cluster.DeletionTimestamp.IsZero() {
			msg += fmt.Sprintf("; the Cluster %s still exists: delete the Cluster, which deletes its machines and then this HarvesterCluster", s.cluster.Name)
		}
		setClusterCondition(hc, clusterv1.DeletingCondition, metav1.ConditionTrue, infrav1.WaitingForMachinesDeletionReason, msg)
		return ctrl.Result{}, nil // a HarvesterMachine's deletion brings us back
	}
	setClusterCondition(hc, clusterv1.DeletingCondition, metav1.ConditionTrue, infrav1.DeletingReason, "deleting the cluster's objects on Harvester")
	setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "deleting the cluster's objects on Harvester")
	if hc.Annotations[infrav1.SkipHarvesterCleanupAnnotation] == "true" {
		r.Recorder.Eventf(hc, nil, corev1.EventTypeWarning, "CleanupSkipped", "Delete", "Skipped cleanup on Harvester as the %s annotation asks; remove what is left there by hand", infrav1.SkipHarvesterCleanupAnnotation)
		return ctrl.Result{}, r.finishDelete(ctx, s)
	}
	if err := r.connect(ctx, s); err != nil {
		return harvesterResult(ctx, err, s.report(infrav1.HarvesterAvailableCondition))
	}
	if err := r.deleteCredentials(ctx, s); err != nil {
		return harvesterResult(ctx, err, s.report(infrav1.GuestCredentialsReadyCondition))
	}
	lbs := &harvester.LoadBalancerService{C: s.client}
	remaining, deleted, err := lbs.DeleteGuest(ctx, hc, s.guest)
	for _, lb := range deleted {
		r.Recorder.Eventf(hc, nil, corev1.EventTypeNormal, "GuestLoadBalancerDeleted", "Delete", "Deleted load balancer %s/%s that the guest's cloud controller manager made for Service %s/%s",
			lb.Namespace, lb.Name, lb.Labels[guestcloud.LabelLBServiceNamespace], lb.Labels[guestcloud.LabelLBServiceName])
	}
	if err != nil || remaining > 0 {
		// Each one's deletion event brings us back.
		return harvesterResult(ctx, err, s.report(infrav1.LoadBalancerReadyCondition))
	}
	if err := r.deleteGuestVolumes(ctx, s); err != nil {
		return harvesterResult(ctx, err, s.report(clusterv1.DeletingCondition))
	}
	gone, deletedCP, err := lbs.DeleteControlPlane(ctx, hc, s.guest)
	if err != nil {
		return harvesterResult(ctx, err, s.report(infrav1.LoadBalancerReadyCondition))
	}
	if deletedCP {
		r.Recorder.Eventf(hc, nil, corev1.EventTypeNormal, "LoadBalancerDeleted", "Delete", "Deleted load balancer %s/%s on Harvester",
			hc.Spec.TargetNamespace, harvester.ControlPlaneLoadBalancerName(hc, s.guest))
	}
	if !gone {
		return ctrl.Result{}, nil // its deletion event brings us back
	}
	return ctrl.Result{}, r.finishDelete(ctx, s)
}

// finishDelete lets go of the addons, the connection and the identity Secret, then of the
// HarvesterCluster.
func (r *HarvesterClusterReconciler) finishDelete(ctx context.Context, s *clusterScope) error {
	if err := r.deleteAddons(ctx, s.hc, s.cluster.Name); err != nil {
		return err
	}
	r.Factory.Release(s.userKey())
	r.checked.Delete(s.hc.UID)
	if err := r.releaseIdentity(ctx, s.hc); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(s.hc, infrav1.ClusterFinalizer)
	return nil
}
