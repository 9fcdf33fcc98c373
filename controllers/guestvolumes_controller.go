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
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// CSIDriverName is the Harvester CSI driver's name: the guest PersistentVolumes it provisions
// name it in spec.csi.driver, and their spec.csi.volumeHandle is the name of the
// PersistentVolumeClaim it made for them on Harvester, in the namespace of its credential (the
// HarvesterCluster's target namespace). The driver puts no label on that claim that ties it to
// the guest, so the guest's PersistentVolumes are the only record of which claims are its.
const CSIDriverName = "driver.harvesterhci.io"

// GuestVolumeReconciler keeps HarvesterCluster.status.guestVolumes in step with the guest's
// PersistentVolumes, watched through CAPI's ClusterCache while the guest is reachable, so that
// the cluster's deletion can delete exactly those volumes on Harvester when the guest (and its
// CSI driver) is gone.
type GuestVolumeReconciler struct {
	Client           client.Client
	ClusterCache     clustercache.ClusterCache
	WatchFilterValue string

	controller controller.Controller
}

// guestVolumesController names the controller and its watches on the guests.
const guestVolumesController = "harvestercluster-guestvolumes"

// SetupWithManager watches HarvesterClusters and the connections to their guests.
func (r *GuestVolumeReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(guestVolumesController).
		WithOptions(options).
		For(&infrav1.HarvesterCluster{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue))).
		WatchesRawSource(r.ClusterCache.GetClusterSource(guestVolumesController, r.clusterToHarvesterCluster)).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

func (r *GuestVolumeReconciler) clusterToHarvesterCluster(_ context.Context, o client.Object) []reconcile.Request {
	cluster, ok := o.(*clusterv1.Cluster)
	if !ok || cluster.Spec.InfrastructureRef.Kind != "HarvesterCluster" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}}}
}

// Reconcile records the guest's Harvester volumes of one HarvesterCluster.
func (r *GuestVolumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	hc := &infrav1.HarvesterCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A deleting cluster keeps the record it has: its deletion works from it. An externally
	// managed one is not the provider's to write (CAPI's contract).
	if !hc.DeletionTimestamp.IsZero() || annotations.IsExternallyManaged(hc) {
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, hc.ObjectMeta)
	if err != nil || cluster == nil || annotations.IsPaused(cluster, hc) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := client.ObjectKeyFromObject(cluster)
	hcKey := req.NamespacedName
	err = r.ClusterCache.Watch(ctx, key, clustercache.NewWatcher(clustercache.WatcherOptions{
		Name:    guestVolumesController,
		Watcher: r.controller,
		Kind:    &corev1.PersistentVolume{},
		EventHandler: handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: hcKey}}
		}),
	}))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		// The guest is not reachable (yet, or any more): the record stays as it is, and the
		// ClusterCache's connection event brings us back.
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("watching the guest's PersistentVolumes: %w", err)
	}
	guest, err := r.ClusterCache.GetReader(ctx, key)
	if err != nil {
		if errors.Is(err, clustercache.ErrClusterNotConnected) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := guest.List(ctx, pvs); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the guest's PersistentVolumes: %w", err)
	}
	volumes := GuestVolumeHandles(pvs.Items)
	// The record deletion reads, in an annotation that clusterctl move carries, then the status
	// that shows it.
	if hc.Annotations[infrav1.GuestVolumesAnnotation] != strings.Join(volumes, ",") {
		before := hc.DeepCopy()
		annotations.AddAnnotations(hc, map[string]string{infrav1.GuestVolumesAnnotation: strings.Join(volumes, ",")})
		if err := r.Client.Patch(ctx, hc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if slices.Equal(volumes, hc.Status.GuestVolumes) {
		return ctrl.Result{}, nil
	}
	before := hc.DeepCopy()
	hc.Status.GuestVolumes = volumes
	if err := r.Client.Status().Patch(ctx, hc, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// recordedGuestVolumes are the guest's volumes a HarvesterCluster recorded: its annotation's
// and its status's (a cluster that has not written the annotation yet, or whose status a move
// dropped).
func recordedGuestVolumes(hc *infrav1.HarvesterCluster) []string {
	var names []string
	if record := hc.Annotations[infrav1.GuestVolumesAnnotation]; record != "" {
		names = strings.Split(record, ",")
	}
	names = append(names, hc.Status.GuestVolumes...)
	slices.Sort(names)
	return slices.Compact(names)
}

// GuestVolumeHandles are the Harvester claims behind the guest PersistentVolumes that the
// Harvester CSI driver provisioned and that are to be deleted with their claim (reclaim policy
// Delete), sorted.
func GuestVolumeHandles(pvs []corev1.PersistentVolume) []string {
	var out []string
	for _, pv := range pvs {
		csi := pv.Spec.CSI
		if csi == nil || csi.Driver != CSIDriverName || csi.VolumeHandle == "" ||
			pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			continue
		}
		out = append(out, csi.VolumeHandle)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// deleteGuestVolumes deletes, at the cluster's deletion, the Harvester volumes the guest's CSI
// driver made, as the cluster recorded them (recordedGuestVolumes). The guest (whose CSI credential may delete
// any claim of the target namespace anyway) cannot use the record to reach further: a claim with
// this provider's labels (a machine's disk) or one that a VM still uses (another cluster's) is
// left alone, with a warning event.
func (r *HarvesterClusterReconciler) deleteGuestVolumes(ctx context.Context, s *clusterScope) error {
	hc := s.hc
	outcomes, err := (&harvester.GuestVolumeService{C: s.client}).Delete(ctx, hc.Spec.TargetNamespace, recordedGuestVolumes(hc))
	for _, o := range outcomes {
		switch {
		case o.Deleted:
			r.Recorder.Eventf(hc, nil, corev1.EventTypeNormal, "GuestVolumeDeleted", "Delete", "Deleted volume %s/%s that the guest's CSI driver made", hc.Spec.TargetNamespace, o.Name)
		case o.Kept != "":
			r.Recorder.Eventf(hc, nil, corev1.EventTypeWarning, "GuestVolumeKept", "Delete", "Kept volume %s/%s: %s", hc.Spec.TargetNamespace, o.Name, o.Kept)
		}
	}
	return err
}
