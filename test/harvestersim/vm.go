package harvestersim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	// vmFinalizer is what KubeVirt's VM controller puts on every VM
	// (kubevirt pkg/virt-controller/watch/vm.go, VirtualMachineControllerFinalizer).
	vmFinalizer = "kubevirt.io/virtualMachineControllerFinalize"
	// pvcProtectionFinalizer is added by the apiserver's StorageObjectInUseProtection admission
	// plugin; kube-controller-manager removes it once no pod uses the claim.
	pvcProtectionFinalizer = "kubernetes.io/pvc-protection"
)

// vmReconciler does what KubeVirt's VM controller does: start the VMI per run strategy once the
// VM's PVCs are bound, report VM status, and on deletion remove the VMI and (as Kubernetes'
// garbage collector would) what the VM owns. Harvester's own VM controller runs beside it
// (harvesterwebhook.go): it creates the PVCs of the volumeClaimTemplates annotation and deletes
// those of removedPersistentVolumeClaims when the VM goes.
type vmReconciler struct {
	client.Client
}

// vmClaimIndex indexes VMs by the PVCs their template mounts: a PVC's event finds its VM without
// listing (and copying) every VM of the namespace, which at a thousand VMs made this mapping the
// largest user of the bench process's memory.
const vmClaimIndex = "sim.vm.claims"

func (r *vmReconciler) setup(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kubevirtv1.VirtualMachine{}, vmClaimIndex, func(obj client.Object) []string {
		vm, ok := obj.(*kubevirtv1.VirtualMachine)
		if !ok {
			return nil
		}
		return claimNames(vm.Spec.Template)
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-virtualmachine").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.vmsUsingClaim)).
		Complete(r)
}

func (r *vmReconciler) vmsUsingClaim(ctx context.Context, obj client.Object) []reconcile.Request {
	vms := &kubevirtv1.VirtualMachineList{}
	if err := r.List(ctx, vms, client.InNamespace(obj.GetNamespace()), client.MatchingFields{vmClaimIndex: obj.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(vms.Items))
	for i := range vms.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vms.Items[i])})
	}
	return reqs
}

func (r *vmReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vm.DeletionTimestamp != nil {
		return ctrl.Result{}, r.delete(ctx, vm)
	}
	if controllerutil.AddFinalizer(vm, vmFinalizer) {
		if err := r.Update(ctx, vm); err != nil {
			return ctrl.Result{}, err
		}
	}

	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := r.Get(ctx, req.NamespacedName, vmi)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	exists := err == nil
	strategy := kubevirtv1.RunStrategyHalted
	if vm.Spec.RunStrategy != nil {
		strategy = *vm.Spec.RunStrategy
	} else if vm.Spec.Running != nil && *vm.Spec.Running {
		strategy = kubevirtv1.RunStrategyAlways
	}
	pending, err := r.claimsPending(ctx, vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch strategy {
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyRerunOnFailure:
		restart := exists && vmi.DeletionTimestamp == nil &&
			(vmi.Status.Phase == kubevirtv1.Failed || (strategy == kubevirtv1.RunStrategyAlways && vmi.Status.Phase == kubevirtv1.Succeeded))
		if restart {
			if err := r.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
			exists = false
		} else if !exists && len(pending) == 0 {
			vmi = newVMI(vm)
			if err := r.Create(ctx, vmi); err != nil {
				return ctrl.Result{}, fmt.Errorf("creating VMI %s: %w", req, err)
			}
			exists = true
		}
	case kubevirtv1.RunStrategyHalted:
		if exists && vmi.DeletionTimestamp == nil {
			if err := r.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, r.updateStatus(ctx, vm, vmi, exists, strategy, pending)
}

// newVMI stamps out the VM's instance: same name, the template's labels and annotations, owned
// by the VM (kubevirt pkg/virt-controller/watch/vm.go, setupVMIFromVM).
func newVMI(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
	labels := map[string]string{"vm.kubevirt.io/name": vm.Name}
	for k, v := range vm.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	annotations := map[string]string{}
	for k, v := range vm.Spec.Template.ObjectMeta.Annotations {
		annotations[k] = v
	}
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   vm.Namespace,
			Name:        vm.Name,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm,
				kubevirtv1.VirtualMachineGroupVersionKind)},
		},
		Spec: *vm.Spec.Template.Spec.DeepCopy(),
	}
}

func claimNames(tmpl *kubevirtv1.VirtualMachineInstanceTemplateSpec) []string {
	if tmpl == nil {
		return nil
	}
	var names []string
	for _, v := range tmpl.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return names
}

// claimsPending returns the claims the VM's volumes name that are missing or not bound.
func (r *vmReconciler) claimsPending(ctx context.Context, vm *kubevirtv1.VirtualMachine) ([]string, error) {
	var pending []string
	for _, name := range claimNames(vm.Spec.Template) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: vm.Namespace, Name: name}, pvc); err != nil {
			if apierrors.IsNotFound(err) {
				pending = append(pending, name+" (not found)")
				continue
			}
			return nil, err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			pending = append(pending, name)
		}
	}
	return pending, nil
}

func (r *vmReconciler) updateStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, exists bool, strategy kubevirtv1.VirtualMachineRunStrategy, pending []string) error {
	status := vm.Status.DeepCopy()
	status.Created = exists
	status.Ready = exists && vmiReady(vmi)
	status.RunStrategy = strategy
	readyCond := kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse}
	switch {
	case exists && vmi.DeletionTimestamp != nil:
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopping
	case exists && vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed:
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusMigrating
	case exists && vmi.Status.Phase == kubevirtv1.Running:
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning
	case exists && vmi.Status.Phase == kubevirtv1.Scheduling && unschedulable(vmi):
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusUnschedulable
	case exists:
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
	case len(pending) > 0 && strategy != kubevirtv1.RunStrategyHalted:
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding
		readyCond.Reason, readyCond.Message = "WaitingForVolumeBinding", "waiting for PVCs: "+strings.Join(pending, ", ")
	default:
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	}
	if status.Ready {
		readyCond.Status = corev1.ConditionTrue
	}
	status.Conditions = setVMCondition(status.Conditions, readyCond)
	if equalJSON(status, &vm.Status) {
		return nil
	}
	vm.Status = *status
	return r.Status().Update(ctx, vm)
}

func setVMCondition(conds []kubevirtv1.VirtualMachineCondition, c kubevirtv1.VirtualMachineCondition) []kubevirtv1.VirtualMachineCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status != c.Status {
				c.LastTransitionTime = metav1.Now()
			} else {
				c.LastTransitionTime = conds[i].LastTransitionTime
			}
			conds[i] = c
			return conds
		}
	}
	c.LastTransitionTime = metav1.Now()
	return append(conds, c)
}

// delete does the VM's cascade: the VMI first, then the Secrets and PVCs the VM owns
// (Kubernetes' garbage collector, which envtest lacks), then lets the VM go. Harvester's VM
// controller deletes the PVCs listed for removal, under its own finalizer.
func (r *vmReconciler) delete(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := r.Get(ctx, client.ObjectKeyFromObject(vm), vmi)
	if err == nil {
		if vmi.DeletionTimestamp == nil {
			if err := r.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return nil // the VMI's deletion brings us back
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := deleteOwned(ctx, r.Client, vm.Namespace, vm.UID, &corev1.SecretList{}); err != nil {
		return err
	}
	if err := deleteOwned(ctx, r.Client, vm.Namespace, vm.UID, &corev1.PersistentVolumeClaimList{}); err != nil {
		return err
	}
	if controllerutil.RemoveFinalizer(vm, vmFinalizer) {
		return r.Update(ctx, vm)
	}
	return nil
}

// deleteOwned deletes the objects of a list kind in namespace that name owner among their owners.
func deleteOwned(ctx context.Context, c client.Client, namespace string, owner types.UID, list client.ObjectList) error {
	// The cache's own objects, not copies: they are only read, and named in the deletes.
	if err := c.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var objs []client.Object
	switch l := list.(type) {
	case *corev1.SecretList:
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	case *corev1.PersistentVolumeClaimList:
		for i := range l.Items {
			objs = append(objs, &l.Items[i])
		}
	}
	for _, o := range objs {
		for _, ref := range o.GetOwnerReferences() {
			if ref.UID == owner {
				if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

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
	if pvc.Status.Phase == corev1.ClaimBound || pvc.Spec.StorageClassName == nil {
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
