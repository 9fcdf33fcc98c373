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
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Annotations and finalizers of Harvester and KubeVirt.
const (
	// AnnotationVolumeClaimTemplates holds the JSON list of PVCs Harvester creates for a VM.
	AnnotationVolumeClaimTemplates = "harvesterhci.io/volumeClaimTemplates"
	// AnnotationRemovedPVCs lists (comma-separated) the PVCs Harvester deletes with the VM.
	AnnotationRemovedPVCs = "harvesterhci.io/removedPersistentVolumeClaims"
	// AnnotationImageID names the image (`namespace/name`) an image-backed PVC is cloned from.
	AnnotationImageID = "harvesterhci.io/imageId"

	// FinalizerHarvesterVMCleanup is the finalizer under which Harvester's VM controller deletes
	// a VM's removedPersistentVolumeClaims (wrangler's OnRemove, pkg/controller/master/virtualmachine).
	FinalizerHarvesterVMCleanup = "wrangler.cattle.io/VMController.CleanupPVCAndSnapshot"

	// pvcProtectionFinalizer is added by the apiserver's StorageObjectInUseProtection admission
	// plugin; kube-controller-manager removes it once no pod uses the claim.
	pvcProtectionFinalizer = "kubernetes.io/pvc-protection"
)

// pvcReconciler binds claims whose storage class exists (the volume provisioner and PV binder)
// and lifts the pvc-protection finalizer of deleted claims no VMI uses any more.
type pvcReconciler struct {
	client.Client
}

func (r *pvcReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-persistentvolumeclaim").
		For(&corev1.PersistentVolumeClaim{}).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfVMI)).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(r.allClaims)).
		Complete(r)
}

func (r *pvcReconciler) claimsOfVMI(_ context.Context, obj client.Object) []reconcile.Request {
	vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, v := range vmi.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: vmi.Namespace, Name: v.PersistentVolumeClaim.ClaimName}})
		}
	}
	return reqs
}

func (r *pvcReconciler) allClaims(ctx context.Context, _ client.Object) []reconcile.Request {
	return requestsFor(ctx, r.Client, &corev1.PersistentVolumeClaimList{})
}

func (r *pvcReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.DeletionTimestamp != nil {
		inUse, err := r.inUse(ctx, pvc)
		if err != nil || inUse {
			return ctrl.Result{}, err
		}
		if controllerutil.RemoveFinalizer(pvc, pvcProtectionFinalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, pvc))
		}
		return ctrl.Result{}, nil
	}
	if pvc.Spec.StorageClassName == nil {
		return ctrl.Result{}, nil
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		// Longhorn's CSI driver and the external resizer grow a bound volume whose request
		// grew (Kubernetes admits that only where the class allows expansion): a block volume
		// has its new capacity at once, and KubeVirt's ExpandDisks hands it to the running guest.
		asked := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if has := pvc.Status.Capacity[corev1.ResourceStorage]; has.Cmp(asked) < 0 {
			pvc.Status.Capacity[corev1.ResourceStorage] = asked
			return ctrl.Result{}, r.Status().Update(ctx, pvc)
		}
		return ctrl.Result{}, nil
	}
	sc := &storagev1.StorageClass{}
	if err := r.Get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, sc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // stays Pending, as with a real missing class
		}
		return ctrl.Result{}, err
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]}
	return ctrl.Result{}, r.Status().Update(ctx, pvc)
}

func (r *pvcReconciler) inUse(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	// Read only: no copy of every VMI of the namespace for each volume event.
	if err := r.List(ctx, vmis, client.InNamespace(pvc.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	for _, vmi := range vmis.Items {
		for _, v := range vmi.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
				return true, nil
			}
		}
	}
	return false, nil
}

func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
