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
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/ipam"
)

// staleReadRetry is how soon a reconcile that found what it read behind the server (the
// HarvesterMachine's status, or a VM or Machine it wrote) runs again.
const staleReadRetry = 100 * time.Millisecond

// fallbackRequeue re-checks a machine that waits on Harvester in case an event was missed; the
// watches on VMs and VMIs are the main path.
const fallbackRequeue = 5 * time.Minute

// HarvesterMachineReconciler reconciles HarvesterMachines: a KubeVirt VM per machine on
// Harvester, its volumes and cloud-init, and the machine's providerID, addresses and status.
type HarvesterMachineReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Factory  *transport.ClientFactory
	// ClusterCache reaches the guest clusters, to drain a guest node before its VM leaves a
	// host (nil: no drain).
	ClusterCache clustercache.ClusterCache
	// ProviderNamespace is the manager's namespace, where HarvesterClusterIdentities' Secrets
	// live.
	ProviderNamespace string
	// SecretMetadata reads identity Secrets' metadata from the manager's cache, so that a
	// machine's connection is reused without reading its identity Secret live (see connect);
	// nil reads it every time.
	SecretMetadata client.Reader
	// WatchFilterValue limits reconciles to objects labelled
	// `cluster.x-k8s.io/watch-filter=<value>` (CAPI's --watch-filter).
	WatchFilterValue string
	// ReferenceRecheck is how soon a machine whose image, key pair or network is missing, or
	// whose VM name is taken, looks again (0: DefaultReferenceRecheck).
	ReferenceRecheck time.Duration
	// HostDrainTimeout is the longest a guest node's drain holds a VM on a host Harvester
	// empties, whatever the Machine's nodeDrainTimeoutSeconds (0: only the Machine's).
	HostDrainTimeout time.Duration

	controller controller.Controller
	// services reach Harvester; nil is Harvester itself through Factory (harvesterServices).
	// Controller tests set their own.
	services machineServices
}

// Reconcile brings a HarvesterMachine's VM on Harvester to the desired state.
func (r *HarvesterMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	hm := &infrav1.HarvesterMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, hm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, hm.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	if machine == nil {
		if !hm.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(hm, infrav1.MachineFinalizer) {
			// Deleted before its Machine owned it: no VM is made before that (creating one
			// needs the Machine's bootstrap data), so there is nothing to clean up.
			base := hm.DeepCopy()
			controllerutil.RemoveFinalizer(hm, infrav1.MachineFinalizer)
			return ctrl.Result{}, ignoreGone(r.Client.Patch(ctx, hm, client.MergeFrom(base)), hm)
		}
		ctrl.LoggerFrom(ctx).V(4).Info("waiting for the Machine controller to set the owner reference")
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Cluster of HarvesterMachine %s: %w", req, err)
	}

	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KRef(machine.Namespace, machine.Spec.ClusterName), "Machine", klog.KObj(machine)))
	ctx = withFailureKey(ctx, "HarvesterMachine", req.String())
	// CAPI's contract: a paused machine (or one of a paused Cluster) says so and is left alone.
	// The condition is written when it changes, apart from the rest, and the reconcile comes
	// again (the machine's own status updates do not wake it).
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, hm); err != nil || isPaused {
		return ctrl.Result{}, err
	} else if requeue {
		return ctrl.Result{RequeueAfter: staleReadRetry}, nil
	}
	before := hm.DeepCopy()
	// The finalizer comes once the machine has an owner, that is, once it may make a VM. It is
	// written first, before anything is read or made for the VM, and the reconcile goes on from
	// the version that write made: the status (conditions, in the deferred patch) follows in
	// the same reconcile instead of a second one.
	if hm.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(hm, infrav1.MachineFinalizer) {
		written, err := r.writeFinalizer(ctx, before)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !equality.Semantic.DeepEqual(written.Status, before.Status) {
			// The copy read was behind the server's: done again from the newer one.
			return ctrl.Result{RequeueAfter: staleReadRetry}, nil
		}
		hm.ObjectMeta = *written.ObjectMeta.DeepCopy()
		before = written
	}
	s, err := r.newScope(before, hm)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.machine, s.cluster = machine, cluster
	defer func() {
		if err := s.Close(ctx); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
		if conditions.IsTrue(hm, infrav1.VirtualMachineReadyCondition) {
			failures.forget(ctx)
		}
	}()

	if err := r.readHarvesterCluster(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !hm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

func (r *HarvesterMachineReconciler) reconcileNormal(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	hm := s.hm
	if s.hc == nil || !s.guestKnown || !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setVMCondition(hm, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason, "waiting for the HarvesterCluster to be provisioned")
		return ctrl.Result{}, nil
	}
	// Static addresses are claimed before anything else of the VM, so that they show in the
	// status before it is made; a VM made already keeps the network-data it booted with.
	ipReady, err := r.reconcileIPAddresses(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ipReady && hm.Spec.ProviderID == "" {
		c := conditions.Get(hm, infrav1.IPAddressesReadyCondition)
		setVMCondition(hm, metav1.ConditionFalse, c.Reason, "waiting for the NICs' static addresses: "+c.Message)
		return ctrl.Result{RequeueAfter: ipAddressRecheck}, nil
	}
	if ipReady && hm.Spec.ProviderID == "" {
		hm.Status.Addresses = ipam.MachineAddresses(hm)
	}
	if s.machine.Spec.Bootstrap.DataSecretName == nil {
		setVMCondition(hm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "waiting for the bootstrap provider to write the bootstrap data")
		return ctrl.Result{}, nil
	}
	if err := r.svc().connect(ctx, s); err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	shared, err := sharedNamespaces(ctx, r.Client, s.hc)
	if err != nil {
		return ctrl.Result{}, err
	}
	vms := r.svc().vms(s, shared)
	target := s.hc.Spec.TargetNamespace
	vm, err := vms.Get(ctx, target, hm)
	switch {
	case err != nil:
		return r.harvesterResult(ctx, err, s.reportVM)
	case vm == nil && hm.Spec.ProviderID != "":
		// Provisioned once, gone now: never made again under the old name.
		vmKey := client.ObjectKey{Namespace: target, Name: naming.VMName(hm.Name)}
		if reason := conditions.GetReason(hm, infrav1.VirtualMachineReadyCondition); reason != infrav1.VMDeletedReason {
			r.Recorder.Eventf(hm, nil, corev1.EventTypeWarning, "VirtualMachineDeleted", "Observe",
				"VM %s was deleted outside the provider; the machine must be replaced", vmKey)
		}
		setVMCondition(hm, metav1.ConditionFalse, infrav1.VMDeletedReason, fmt.Sprintf(
			"VM %s was deleted outside the provider after the machine was provisioned; it is not made again (its providerID names the old VM): delete the Machine, or let a MachineHealthCheck on InfrastructureReady=False replace it", vmKey))
		return ctrl.Result{}, nil
	case vm == nil:
		return r.createVM(ctx, s, vms)
	}
	// Once per VM: the status records the VM's UID only after a reconcile that adopted it.
	if hm.Status.VirtualMachine.UID != string(vm.UID) {
		if err := vms.AdoptCloudInit(ctx, vm); err != nil {
			return r.harvesterResult(ctx, err, s.reportVM)
		}
	}
	return r.observe(ctx, s, vms, vm)
}

func (r *HarvesterMachineReconciler) createVM(ctx context.Context, s *machineScope, vms vmService) (ctrl.Result, error) {
	hm := s.hm
	bootstrap := &corev1.Secret{}
	bootstrapKey := client.ObjectKey{Namespace: s.machine.Namespace, Name: *s.machine.Spec.Bootstrap.DataSecretName}
	if err := r.Client.Get(ctx, bootstrapKey, bootstrap); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading bootstrap data Secret %s: %w", bootstrapKey, err)
	}
	req := &harvester.VMRequest{
		VMInput: build.VMInput{
			Machine:   hm,
			Namespace: s.hc.Spec.TargetNamespace,
			Role:      naming.RoleWorker,
		},
		Bootstrap:       bootstrap.Data["value"],
		BootstrapFormat: string(bootstrap.Data["format"]),
		NetworkData:     []byte(hm.Spec.NetworkData),
	}
	if util.IsControlPlaneMachine(s.machine) {
		req.Role = naming.RoleControlPlane
	}
	if ipam.UsesIPPools(&hm.Spec) {
		// The webhook and the CRD refuse networkData together with IP pools.
		var err error
		if req.NetworkData, req.MACAddresses, err = ipam.NetworkData(hm); err != nil {
			setIPCondition(hm, metav1.ConditionFalse, infrav1.IPAddressClaimFailedReason, "rendering the network-data: "+err.Error())
			return ctrl.Result{}, nil //nolint:nilerr // reported as a condition; a change of the machine or its addresses brings it back
		}
	}
	req.FailureDomain, req.FailureDomainKey = failureDomain(s)
	vm, created, err := vms.Create(ctx, req)
	if err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	if !created {
		return ctrl.Result{RequeueAfter: staleReadRetry}, nil // made meanwhile: look at it again
	}
	r.Recorder.Eventf(hm, nil, corev1.EventTypeNormal, "VirtualMachineCreated", "Create", "Created VM %s/%s on Harvester", vm.Namespace, vm.Name)
	setVMCondition(hm, metav1.ConditionFalse, infrav1.VMCreatingReason, "the VM was created; Harvester prepares its volumes")
	return ctrl.Result{RequeueAfter: fallbackRequeue}, nil
}

// observe reports the VM's state on the machine: providerID, addresses, host, and
// provisioned once the VMI runs with an address on the management network.
func (r *HarvesterMachineReconciler) observe(ctx context.Context, s *machineScope, vms vmService, vm *kubevirtv1.VirtualMachine) (ctrl.Result, error) {
	hm := s.hm
	if hm.Spec.ProviderID == "" {
		hm.Spec.ProviderID = infrav1.ProviderIDPrefix + string(vm.UID)
	}
	hm.Status.VirtualMachine.Namespace = vm.Namespace
	hm.Status.VirtualMachine.Name = vm.Name
	hm.Status.VirtualMachine.UID = string(vm.UID)
	hm.Status.VirtualMachine.PrintableStatus = string(vm.Status.PrintableStatus)
	st, err := vms.Observe(ctx, vm, hm)
	if err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	if st.VMI != nil {
		hm.Status.VirtualMachine.Host = st.Host
		// Where the VM runs, not what was asked (the same, as placement is required, unless
		// the domains changed since).
		if st.Host != "" {
			if host, err := vms.Host(ctx, st.Host); err == nil {
				hm.Status.FailureDomain = harvester.FailureDomainOf(host, s.hc.Status.FailureDomains)
			}
		}
	}
	if st.VMI != nil && st.VMI.Status.Phase == kubevirtv1.Running {
		// The claimed addresses stay first, also before the guest agent reports them.
		hm.Status.Addresses = ipam.MachineAddresses(hm)
		for _, a := range st.Addresses {
			ma := clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address}
			if !slices.Contains(hm.Status.Addresses, ma) {
				hm.Status.Addresses = append(hm.Status.Addresses, ma)
			}
		}
	}
	if !st.Ready {
		setVMCondition(hm, metav1.ConditionFalse, st.Reason, st.Message)
	}
	handled, maintenance, err := r.reconcileHostMaintenance(ctx, s, vms, vm, st.VMI)
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: staleReadRetry}, nil // the VM or Machine changed since it was read
	case err != nil:
		return r.harvesterResult(ctx, err, s.reportVM)
	case handled:
		return maintenance, nil
	}
	err = r.reconcileResources(ctx, s, vms, vm, st.VMI)
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: staleReadRetry}, nil // the VM changed since it was read
	case err != nil:
		return r.harvesterResult(ctx, err, s.reportVM)
	case !st.Ready:
		return ctrl.Result{RequeueAfter: min(fallbackRequeue, nonZero(maintenance.RequeueAfter, fallbackRequeue))}, nil
	}
	if !ptr.Deref(hm.Status.Initialization.Provisioned, false) {
		// Once per machine, when it becomes provisioned (again only if writing the status fails).
		observeProvisioned(vm, st.VMI, time.Now())
	}
	hm.Status.Initialization.Provisioned = ptr.To(true)
	setVMCondition(hm, metav1.ConditionTrue, infrav1.ReadyReason, "")
	return maintenance, nil
}

// nonZero is d, or def when d is zero.
func nonZero(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (r *HarvesterMachineReconciler) reconcileDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	hm := s.hm
	setVMCondition(hm, metav1.ConditionFalse, infrav1.DeletingReason, "deleting the VM and its volumes")
	if s.hc == nil || !s.guestKnown || s.hc.Annotations[infrav1.SkipHarvesterCleanupAnnotation] == "true" {
		// Without its HarvesterCluster the machine cannot reach Harvester (the cluster's deletion
		// runs after its machines, so that happens only when it was removed by force); one that
		// has not recorded its owner mark has made nothing, nor could the machine; with the
		// skip annotation the user asked for no cleanup.
		ctrl.LoggerFrom(ctx).Info("removing the finalizer without cleanup on Harvester")
		if err := r.ipam().Release(ctx, hm); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(hm, infrav1.MachineFinalizer)
		return ctrl.Result{}, nil
	}
	if err := r.svc().connect(ctx, s); err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	gone, deleted, err := r.svc().vms(s, nil).Delete(ctx, s.hc.Spec.TargetNamespace, hm)
	if deleted {
		r.Recorder.Eventf(hm, nil, corev1.EventTypeNormal, "VirtualMachineDeleted", "Delete", "Deleted VM %s/%s on Harvester", s.hc.Spec.TargetNamespace, naming.VMName(hm.Name))
	}
	if err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	if !gone {
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil // the deletion events of the VM and its volumes bring us back
	}
	// The addresses go back to their pools only now that the VM using them is gone.
	if err := r.ipam().Release(ctx, hm); err != nil {
		return ctrl.Result{}, err
	}
	r.svc().release(s)
	controllerutil.RemoveFinalizer(hm, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}

// harvesterResult is the package's harvesterResult, with the machine's reference rechecks after
// r.ReferenceRecheck when it is set.
func (r *HarvesterMachineReconciler) harvesterResult(ctx context.Context, err error, report func(reason, message string)) (ctrl.Result, error) {
	res, rerr := harvesterResult(ctx, err, report)
	if e, ok := transport.AsError(err); ok && e.Kind == transport.KindReference && res.RequeueAfter == referenceRecheck && r.ReferenceRecheck > 0 {
		res.RequeueAfter = r.ReferenceRecheck
	}
	return res, rerr
}
