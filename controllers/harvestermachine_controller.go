package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// staleReadRetry is how soon a reconcile whose status patch found a newer HarvesterMachine than
// the one it read (the cache was a write behind) runs again.
const staleReadRetry = 100 * time.Millisecond

// fallbackRequeue re-checks a machine that waits on Harvester in case an event was missed; the
// watches on VMs and VMIs are the main path.
const fallbackRequeue = 5 * time.Minute

// HarvesterMachineReconciler reconciles HarvesterMachines: a KubeVirt VM per machine on
// Harvester, its volumes and cloud-init, and the machine's providerID, addresses and status.
type HarvesterMachineReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Factory  *harvester.ClientFactory
	// ProviderNamespace is the manager's namespace, where HarvesterClusterIdentities' Secrets
	// live.
	ProviderNamespace string
	// SecretMetadata reads identity Secrets' metadata from the manager's cache, so that a
	// machine's connection is reused without reading its identity Secret live (see connect);
	// nil reads it every time.
	SecretMetadata client.Reader
	// APIReader reads HarvesterMachines live when a status patch meets a conflict (see patch);
	// nil requeues instead.
	APIReader client.Reader
	// WatchFilterValue limits reconciles to objects labelled
	// `cluster.x-k8s.io/watch-filter=<value>` (CAPI's --watch-filter).
	WatchFilterValue string
	// ReferenceRecheck is how soon a machine whose image, key pair or network is missing, or
	// whose VM name is taken, looks again (0: DefaultReferenceRecheck).
	ReferenceRecheck time.Duration

	controller controller.Controller
	// superseded holds, by machine, the resourceVersions a reconcile's own writes left behind
	// (the one it read, and the one its metadata patch made when a status patch followed) and
	// the version written last: until the cache has moved past them, a reconcile works from
	// its own last write instead of the cache's copy, whose status patch would conflict (see
	// ownLastWrite).
	superseded sync.Map // types.NamespacedName -> *ownWrite
}

// ownWrite is what a reconcile's writes left behind (over) and made (written) of one machine.
type ownWrite struct {
	over    []string
	written *infrav1.HarvesterMachine
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvestermachines;harvestermachines/status;harvestermachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch

// SetupWithManager registers the reconciler, its watches on management objects, and its watches
// on the VMs and VMIs of every Harvester connection the factory opens.
func (r *HarvesterMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	machine := func() client.Object { return &infrav1.HarvesterMachine{} }
	filtered := func(mapFn handler.MapFunc) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(watchFiltered(r.Client, r.WatchFilterValue, machine, mapFn))
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		// Paused ones too: the reconcile writes their Paused condition.
		For(&infrav1.HarvesterMachine{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue), r.forgetCaughtUp(), ownStatusIgnored)).
		WithOptions(options).
		Watches(&clusterv1.Machine{}, filtered(
			util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("HarvesterMachine"))),
			builder.WithPredicates(machineChangedForInfrastructure)).
		Watches(&infrav1.HarvesterCluster{}, filtered(r.harvesterClusterToMachines),
			builder.WithPredicates(clusterChangedForMachines)).
		// Static addresses: a claim's binding, and its IPAddress appearing in the cache.
		Watches(&ipamv1.IPAddressClaim{}, filtered(controllerOwner("HarvesterMachine"))).
		Watches(&ipamv1.IPAddress{}, filtered(r.ipAddressToMachine)).
		Watches(&clusterv1.Cluster{}, filtered(r.clusterToMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log))).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	toMachine := watchFiltered(r.Client, r.WatchFilterValue, machine, harvesterObjectToMachine)
	volumeToMachine := watchFiltered(r.Client, r.WatchFilterValue, machine, r.volumeToMachine)
	r.Factory.WatchCaches(c, func(hc cache.Cache) []source.Source {
		return []source.Source{
			source.Kind(hc, client.Object(&kubevirtv1.VirtualMachine{}), handler.EnqueueRequestsFromMapFunc(toMachine), observedChange),
			source.Kind(hc, client.Object(&kubevirtv1.VirtualMachineInstance{}), readyFirst(toMachine), observedChange),
			// A deleting machine waits for its volumes to go.
			source.Kind(hc, client.Object(&corev1.PersistentVolumeClaim{}), handler.EnqueueRequestsFromMapFunc(volumeToMachine),
				predicate.Funcs{
					CreateFunc: func(event.TypedCreateEvent[client.Object]) bool { return false },
					DeleteFunc: func(event.TypedDeleteEvent[client.Object]) bool { return true },
					UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
						return !e.ObjectNew.GetDeletionTimestamp().IsZero()
					},
				}),
		}
	})
	return nil
}

// readyPriority is the work-queue priority of a machine whose VM has just come up (the default
// is 0; controller-runtime gives the events of a watch's first list -100).
const readyPriority = 10

// readyFirst enqueues a VMI's machine as handler.EnqueueRequestsFromMapFunc does, except when an
// update shows the VMI running with an address for the first time, the change that makes the
// machine provisioned: that machine goes ahead of the queue, so that while many machines are made
// at once, one whose VM is up waits for no other machine's creation work (P1 in
// docs/performance.md).
func readyFirst(toMachine handler.MapFunc) handler.EventHandler {
	inner := handler.EnqueueRequestsFromMapFunc(toMachine)
	return handler.Funcs{
		CreateFunc:  inner.Create,
		DeleteFunc:  inner.Delete,
		GenericFunc: inner.Generic,
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if !ok || !runningWithAddress(e.ObjectNew) || runningWithAddress(e.ObjectOld) {
				inner.Update(ctx, e, q)
				return
			}
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(readyPriority)}, toMachine(ctx, e.ObjectNew)...)
		},
	}
}

// runningWithAddress says whether obj is a running VMI with an address on some NIC.
func runningWithAddress(obj client.Object) bool {
	vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance)
	if !ok || vmi.Status.Phase != kubevirtv1.Running {
		return false
	}
	return slices.ContainsFunc(vmi.Status.Interfaces, func(i kubevirtv1.VirtualMachineInstanceNetworkInterface) bool {
		return i.IP != "" || len(i.IPs) > 0
	})
}

// observedChange passes every creation and deletion of a VM or VMI, and those updates that
// change what a machine's reconcile reads of it (VMService.Get and Observe: ownership labels,
// UID, deletion, the VM's printable status; the VMI's phase, host, NICs and conditions).
// Harvester and KubeVirt update both many times while a VM starts (finalizers, volume and
// guest-agent status), and each reconcile would cost requests.
var observedChange = predicate.Funcs{UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if !maps.Equal(o.GetLabels(), n.GetLabels()) || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) || o.GetUID() != n.GetUID() {
		return true
	}
	switch n := n.(type) {
	case *kubevirtv1.VirtualMachine:
		o, ok := o.(*kubevirtv1.VirtualMachine)
		return !ok || o.Status.PrintableStatus != n.Status.PrintableStatus
	case *kubevirtv1.VirtualMachineInstance:
		o, ok := o.(*kubevirtv1.VirtualMachineInstance)
		return !ok || o.Status.Phase != n.Status.Phase || o.Status.NodeName != n.Status.NodeName ||
			!equality.Semantic.DeepEqual(o.Status.Interfaces, n.Status.Interfaces) ||
			!equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions)
	}
	return true
}}

// ownStatusIgnored drops the HarvesterMachine updates that change only its status: the provider
// alone writes it, each reconcile writes what it found, and being woken by its own write found
// nothing new (about six times per machine while it provisions). A reconcile that must run again
// says so (RequeueAfter); metadata and spec changes (finalizers, owners, labels, deletion) pass,
// and so does a status that lost what the provider recorded in it (the provider never removes
// a VM's UID, the provisioned flag or a condition: someone else wrote it, say a restore of an
// old copy), which is recorded again.
var ownStatusIgnored = predicate.Funcs{UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
	if metadataOrGenerationChanged(e.ObjectOld, e.ObjectNew) || !slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers()) {
		return true
	}
	o, ok1 := e.ObjectOld.(*infrav1.HarvesterMachine)
	n, ok2 := e.ObjectNew.(*infrav1.HarvesterMachine)
	return !ok1 || !ok2 ||
		(o.Status.VirtualMachine.UID != "" && n.Status.VirtualMachine.UID == "") ||
		(ptr.Deref(o.Status.Initialization.Provisioned, false) && !ptr.Deref(n.Status.Initialization.Provisioned, false)) ||
		len(n.Status.Conditions) < len(o.Status.Conditions)
}}

// machineChangedForInfrastructure passes the Machine updates that change what its
// HarvesterMachine's reconcile reads of it: metadata (labels, annotations, owners, deletion) and
// spec (bootstrap data, failure domain: a change bumps the generation). CAPI's Machine controller
// patches a Machine's status many times while it provisions, and each update used to reconcile
// the HarvesterMachine for nothing.
var machineChangedForInfrastructure = predicate.Funcs{UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
	return metadataOrGenerationChanged(e.ObjectOld, e.ObjectNew)
}}

// clusterChangedForMachines passes the HarvesterCluster updates that change what its machines'
// reconciles read of it: metadata, spec (generation), failure domains, provisioning, and whether
// Harvester is available (a fixed identity or a Harvester back wakes the machines waiting on
// it). A cluster's other status updates (its conditions while it provisions, token renewals)
// used to reconcile every machine of the cluster: at 1,000 machines in 50 clusters most of the
// HarvesterMachine reconciles of a creation (docs/performance.md).
var clusterChangedForMachines = predicate.Funcs{UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
	if metadataOrGenerationChanged(e.ObjectOld, e.ObjectNew) {
		return true
	}
	o, ok1 := e.ObjectOld.(*infrav1.HarvesterCluster)
	n, ok2 := e.ObjectNew.(*infrav1.HarvesterCluster)
	if !ok1 || !ok2 {
		return true
	}
	available := func(hc *infrav1.HarvesterCluster) string {
		if c := conditions.Get(hc, infrav1.HarvesterAvailableCondition); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return ""
	}
	return !equality.Semantic.DeepEqual(o.Status.FailureDomains, n.Status.FailureDomains) ||
		!equality.Semantic.DeepEqual(o.Status.Initialization, n.Status.Initialization) ||
		available(o) != available(n)
}}

func metadataOrGenerationChanged(o, n client.Object) bool {
	return o.GetGeneration() != n.GetGeneration() ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}

// volumeToMachine maps a machine's volume to its HarvesterMachine. Volumes carry the machine's
// label value only, which is a hash for names no label can hold: then the machine is found by it.
func (r *HarvesterMachineReconciler) volumeToMachine(ctx context.Context, obj client.Object) []reconcile.Request {
	namespace, value, ok := harvester.MachineOf(obj)
	if !ok {
		return nil
	}
	if hm := (&infrav1.HarvesterMachine{}); r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: value}, hm) == nil {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(hm)}}
	}
	list := &infrav1.HarvesterMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	for i := range list.Items {
		if harvester.MachineLabelValue(list.Items[i].Name) == value {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}}
		}
	}
	return nil
}

// harvesterObjectToMachine maps a VM or VMI on Harvester to its HarvesterMachine by the name it
// carries (not by its own name, which may be a hash of the machine's).
func harvesterObjectToMachine(_ context.Context, obj client.Object) []reconcile.Request {
	namespace, name, ok := harvester.MachineOf(obj)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}}}
}

func (r *HarvesterMachineReconciler) clusterToMachines(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.machinesOfCluster(ctx, obj.GetNamespace(), obj.GetName())
}

func (r *HarvesterMachineReconciler) harvesterClusterToMachines(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	return r.machinesOfCluster(ctx, obj.GetNamespace(), name)
}

func (r *HarvesterMachineReconciler) machinesOfCluster(ctx context.Context, namespace, cluster string) []reconcile.Request {
	list := &infrav1.HarvesterMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile brings a HarvesterMachine's VM on Harvester to the desired state.
func (r *HarvesterMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	hm := &infrav1.HarvesterMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, hm); err != nil {
		if apierrors.IsNotFound(err) {
			r.superseded.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if own := r.ownLastWrite(hm); own != nil {
		// Another event came before the cache had this reconciler's own last write: the work
		// goes on from that write (the cache's copy would make a status patch that conflicts,
		// and a live read), without waiting for the cache.
		if !own.DeletionTimestamp.IsZero() && len(own.Finalizers) == 0 {
			return ctrl.Result{}, nil // the last write released it: the server deletes it
		}
		hm = own
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
	before := hm.DeepCopy()
	paused := setPausedCondition(hm, cluster, "HarvesterMachine")
	// The finalizer comes once the machine has an owner, that is, once it may make a VM. It is
	// written first, before anything is read or made for the VM, and the reconcile goes on from
	// the version that write made: the status (conditions, in the deferred patch) follows in
	// the same reconcile instead of a second one.
	if !paused && hm.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(hm, infrav1.MachineFinalizer) {
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
	defer func() {
		switch err := r.patch(ctx, before, hm); {
		case apierrors.IsConflict(err) && reterr == nil:
			// Read from a cache a write behind: done again from the next version.
			ctrl.LoggerFrom(ctx).V(4).Info("the HarvesterMachine changed since it was read; reconciling again")
			res = ctrl.Result{RequeueAfter: staleReadRetry}
		case err != nil:
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
		if conditions.IsTrue(hm, infrav1.VirtualMachineReadyCondition) {
			failures.forget(ctx)
		}
	}()
	if paused {
		return ctrl.Result{}, nil
	}

	s := &machineScope{machine: machine, cluster: cluster, hm: hm}
	if err := r.readHarvesterCluster(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !hm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

// machineScope holds what one reconcile works with.
type machineScope struct {
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	hm      *infrav1.HarvesterMachine
	hc      *infrav1.HarvesterCluster // nil when gone
	// guest names the cluster on Harvester; guestKnown is false while the HarvesterCluster
	// has not recorded its owner mark (then nothing of the cluster is on Harvester yet).
	guest      harvester.Guest
	guestKnown bool
	client     *harvester.Client
}

func (s *machineScope) userKey() string {
	return "HarvesterMachine/" + s.hm.Namespace + "/" + s.hm.Name
}

func (r *HarvesterMachineReconciler) readHarvesterCluster(ctx context.Context, s *machineScope) error {
	ref := s.cluster.Spec.InfrastructureRef
	if ref.Name == "" {
		return nil
	}
	hc := &infrav1.HarvesterCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: ref.Name}, hc); err != nil {
		return client.IgnoreNotFound(err)
	}
	s.hc = hc
	s.guest, s.guestKnown = harvester.GuestOf(hc, s.cluster.Name)
	return nil
}

// connect opens (or reuses) the connection to the cluster's Harvester; a failure is an Error
// for the machine's condition.
func (r *HarvesterMachineReconciler) connect(ctx context.Context, s *machineScope) error {
	c, _, err := connect(ctx, r.Client, r.SecretMetadata, r.Factory, s.hc, s.userKey(), r.ProviderNamespace)
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

// reportVM reports a failed step's reason and message on the VirtualMachineReady condition.
func (s *machineScope) reportVM(reason, message string) {
	setVMCondition(s.hm, metav1.ConditionFalse, reason, message)
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
		hm.Status.Addresses = claimedMachineAddresses(hm)
	}
	if s.machine.Spec.Bootstrap.DataSecretName == nil {
		setVMCondition(hm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "waiting for the bootstrap provider to write the bootstrap data")
		return ctrl.Result{}, nil
	}
	if err := r.connect(ctx, s); err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	shared, err := r.sharedNamespaces(ctx, s.hc)
	if err != nil {
		return ctrl.Result{}, err
	}
	vms := &harvester.VMService{C: s.client, Guest: s.guest, SharedNamespaces: shared}
	target := s.hc.Spec.TargetNamespace
	vm, err := vms.Get(ctx, target, hm)
	switch {
	case err != nil:
		return r.harvesterResult(ctx, err, s.reportVM)
	case vm == nil && hm.Spec.ProviderID != "":
		// Provisioned once, gone now: never made again under the old name.
		vmKey := client.ObjectKey{Namespace: target, Name: harvester.VMName(hm.Name)}
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

func (r *HarvesterMachineReconciler) createVM(ctx context.Context, s *machineScope, vms *harvester.VMService) (ctrl.Result, error) {
	hm := s.hm
	bootstrap := &corev1.Secret{}
	bootstrapKey := client.ObjectKey{Namespace: s.machine.Namespace, Name: *s.machine.Spec.Bootstrap.DataSecretName}
	if err := r.Client.Get(ctx, bootstrapKey, bootstrap); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading bootstrap data Secret %s: %w", bootstrapKey, err)
	}
	req := &harvester.VMRequest{
		VMInput: harvester.VMInput{
			Machine:   hm,
			Namespace: s.hc.Spec.TargetNamespace,
			Role:      harvester.RoleWorker,
		},
		Bootstrap:       bootstrap.Data["value"],
		BootstrapFormat: string(bootstrap.Data["format"]),
		NetworkData:     []byte(hm.Spec.NetworkData),
	}
	if util.IsControlPlaneMachine(s.machine) {
		req.Role = harvester.RoleControlPlane
	}
	if usesIPPools(&hm.Spec) {
		// The webhook and the CRD refuse networkData together with IP pools.
		var err error
		if req.NetworkData, req.MACAddresses, err = staticNetworkData(hm); err != nil {
			setIPCondition(hm, metav1.ConditionFalse, infrav1.IPAddressClaimFailedReason, "rendering the network-data: "+err.Error())
			return ctrl.Result{}, nil
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

// failureDomain returns the machine's failure domain and the host label it stands for.
func failureDomain(s *machineScope) (string, string) {
	name := s.machine.Spec.FailureDomain
	if name == "" {
		return "", ""
	}
	for _, fd := range s.hc.Status.FailureDomains {
		if fd.Name == name {
			if key := fd.Attributes[harvester.FailureDomainTopologyKey]; key != "" {
				return name, key
			}
		}
	}
	return name, harvester.LabelZone
}

// observe reports the VM's state on the machine: providerID, addresses, host, and
// provisioned once the VMI runs with an address on the management network.
func (r *HarvesterMachineReconciler) observe(ctx context.Context, s *machineScope, vms *harvester.VMService, vm *kubevirtv1.VirtualMachine) (ctrl.Result, error) {
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
		host := &corev1.Node{}
		if st.Host != "" && vms.C.Cache.Get(ctx, client.ObjectKey{Name: st.Host}, host) == nil {
			hm.Status.FailureDomain = harvester.FailureDomainOf(host, s.hc.Status.FailureDomains)
		}
	}
	if st.VMI != nil && st.VMI.Status.Phase == kubevirtv1.Running {
		// The claimed addresses stay first, also before the guest agent reports them.
		hm.Status.Addresses = claimedMachineAddresses(hm)
		for _, a := range st.Addresses {
			ma := clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address}
			if !slices.Contains(hm.Status.Addresses, ma) {
				hm.Status.Addresses = append(hm.Status.Addresses, ma)
			}
		}
	}
	if !st.Ready {
		setVMCondition(hm, metav1.ConditionFalse, st.Reason, st.Message)
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil
	}
	if !ptr.Deref(hm.Status.Initialization.Provisioned, false) {
		// Once per machine, when it becomes provisioned (again only if writing the status fails).
		observeProvisioned(vm, st.VMI, time.Now())
	}
	hm.Status.Initialization.Provisioned = ptr.To(true)
	setVMCondition(hm, metav1.ConditionTrue, infrav1.ReadyReason, "")
	return ctrl.Result{}, nil
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
		if err := r.releaseIPAddresses(ctx, hm); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(hm, infrav1.MachineFinalizer)
		return ctrl.Result{}, nil
	}
	if err := r.connect(ctx, s); err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	gone, deleted, err := (&harvester.VMService{C: s.client, Guest: s.guest}).Delete(ctx, s.hc.Spec.TargetNamespace, hm)
	if deleted {
		r.Recorder.Eventf(hm, nil, corev1.EventTypeNormal, "VirtualMachineDeleted", "Delete", "Deleted VM %s/%s on Harvester", s.hc.Spec.TargetNamespace, harvester.VMName(hm.Name))
	}
	if err != nil {
		return r.harvesterResult(ctx, err, s.reportVM)
	}
	if !gone {
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil // the deletion events of the VM and its volumes bring us back
	}
	// The addresses go back to their pools only now that the VM using them is gone.
	if err := r.releaseIPAddresses(ctx, hm); err != nil {
		return ctrl.Result{}, err
	}
	r.Factory.Release(s.userKey())
	controllerutil.RemoveFinalizer(hm, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}

func setVMCondition(hm *infrav1.HarvesterMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hm, metav1.Condition{
		Type: infrav1.VirtualMachineReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: hm.Generation,
	})
}

// patch writes what the reconcile changed of hm (read as before) in at most two requests:
// metadata and spec first (a finalizer is on the server before anything is made, a providerID
// before the status says provisioned, also when the manager dies between the two writes), then
// the status, conditions included, in one patch locked to a version whose status is the one
// the reconcile read: a stale read gets a conflict and never overwrites newer conditions; when
// only the metadata or spec moved on (CAPI's Machine controller's writes, or this patch's own
// first request), the status is written over the newest version at once.
// CAPI's patch.Helper writes conditions, the rest of the status and the spec apart, so that
// controllers sharing an object's conditions merge them; the provider alone writes a
// HarvesterMachine's status, and on a busy management cluster every request waits its turn
// behind --kube-api-qps (docs/performance.md).
func (r *HarvesterMachineReconciler) patch(ctx context.Context, before, hm *infrav1.HarvesterMachine) error {
	if err := conditions.SetSummaryCondition(hm, hm, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{infrav1.VirtualMachineReadyCondition, infrav1.IPAddressesReadyCondition},
		// Machines made before IPAddressesReady existed lack it until their next reconcile.
		conditions.IgnoreTypesIfMissing{infrav1.IPAddressesReadyCondition},
	); err != nil {
		return err
	}
	// base is the version the status patch is locked to.
	base := before.DeepCopy()
	spec := hm.DeepCopy()
	spec.Status = before.Status
	// The server's versions this patch wrote over (its reads and its own intermediate writes),
	// and its last successful write.
	var over []string
	var written *infrav1.HarvesterMachine
	defer func() { r.wroteOver(client.ObjectKeyFromObject(hm), over, written) }()
	if !equality.Semantic.DeepEqual(before, spec) {
		if err := r.Client.Patch(ctx, spec, client.MergeFrom(before.DeepCopy())); err != nil {
			return ignoreGone(err, hm)
		}
		base = spec // the server's version after the patch
		over, written = append(over, before.ResourceVersion), spec
	}
	if equality.Semantic.DeepEqual(before.Status, hm.Status) {
		return nil
	}
	err := errStatusMovedOn
	if equality.Semantic.DeepEqual(base.Status, before.Status) {
		changed := base.DeepCopy()
		changed.Status = hm.Status
		if err = r.Client.Status().Patch(ctx, changed, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err == nil {
			over, written = append(over, before.ResourceVersion, base.ResourceVersion), changed
		}
	}
	if (apierrors.IsConflict(err) || errors.Is(err, errStatusMovedOn)) && r.APIReader != nil {
		latest := &infrav1.HarvesterMachine{}
		if getErr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(hm), latest); getErr == nil &&
			equality.Semantic.DeepEqual(latest.Status, before.Status) {
			changed := latest.DeepCopy()
			changed.Status = hm.Status
			if err = r.Client.Status().Patch(ctx, changed, client.MergeFromWithOptions(latest, client.MergeFromWithOptimisticLock{})); err == nil {
				over, written = append(over, before.ResourceVersion, latest.ResourceVersion), changed
			}
		}
	}
	if errors.Is(err, errStatusMovedOn) {
		return apierrors.NewConflict(infrav1.GroupVersion.WithResource("harvestermachines").GroupResource(), hm.Name, err)
	}
	return ignoreGone(err, hm)
}

// writeFinalizer adds the machine's finalizer to read, the version the reconcile read, and
// returns the server's version after that write (status included); the write is recorded as
// the reconcile's own, so that a later reconcile that reads read from a lagging cache works
// from it (see ownLastWrite).
func (r *HarvesterMachineReconciler) writeFinalizer(ctx context.Context, read *infrav1.HarvesterMachine) (*infrav1.HarvesterMachine, error) {
	written := read.DeepCopy()
	controllerutil.AddFinalizer(written, infrav1.MachineFinalizer)
	if err := r.Client.Patch(ctx, written, client.MergeFrom(read)); err != nil {
		return nil, fmt.Errorf("adding the finalizer: %w", err)
	}
	r.wroteOver(client.ObjectKeyFromObject(read), []string{read.ResourceVersion}, written)
	return written, nil
}

// harvesterResult is the package's harvesterResult, with the machine's reference rechecks after
// r.ReferenceRecheck when it is set.
func (r *HarvesterMachineReconciler) harvesterResult(ctx context.Context, err error, report func(reason, message string)) (ctrl.Result, error) {
	res, rerr := harvesterResult(ctx, err, report)
	if e, ok := harvester.AsError(err); ok && e.Kind == harvester.KindReference && res.RequeueAfter == referenceRecheck && r.ReferenceRecheck > 0 {
		res.RequeueAfter = r.ReferenceRecheck
	}
	return res, rerr
}

// ownLastWrite returns a copy of this reconciler's last write of hm when hm, as read from the
// cache, is a version its own writes have superseded (the cache has not caught up with its last
// write yet), and nil when hm is as new as that write or newer.
func (r *HarvesterMachineReconciler) ownLastWrite(hm *infrav1.HarvesterMachine) *infrav1.HarvesterMachine {
	key := client.ObjectKeyFromObject(hm)
	v, ok := r.superseded.Load(key)
	if !ok {
		return nil
	}
	if w := v.(*ownWrite); slices.Contains(w.over, hm.ResourceVersion) {
		return w.written.DeepCopy()
	}
	r.superseded.CompareAndDelete(key, v)
	return nil
}

// wroteOver records that the writes of a reconcile replaced the versions over with written, the
// version on the server after them; versions equal to written's (a write the server made nothing
// of) are not recorded, so that no reconcile takes an old copy for stale.
func (r *HarvesterMachineReconciler) wroteOver(key types.NamespacedName, over []string, written *infrav1.HarvesterMachine) {
	if written == nil || written.ResourceVersion == "" {
		return
	}
	// Writes that went on from an earlier own write (the finalizer's, then the status) also
	// replaced what that one had.
	over = slices.Clone(over)
	if v, ok := r.superseded.Load(key); ok {
		if prev := v.(*ownWrite); slices.Contains(over, prev.written.ResourceVersion) {
			over = append(over, prev.over...)
		}
	}
	slices.Sort(over)
	over = slices.DeleteFunc(slices.Compact(over), func(v string) bool { return v == "" || v == written.ResourceVersion })
	if len(over) > 0 {
		w := written.DeepCopy()
		w.ManagedFields = nil // as the cache holds it
		r.superseded.Store(key, &ownWrite{over: over, written: w})
	}
}

// forgetCaughtUp drops a machine's record of its own last write once the cache has it (or the
// machine is gone): the update that brings it is the reconciler's own status write, which
// ownStatusIgnored filters out, so no reconcile would come to drop it.
func (r *HarvesterMachineReconciler) forgetCaughtUp() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
			key := client.ObjectKeyFromObject(e.ObjectNew)
			if v, ok := r.superseded.Load(key); ok && !slices.Contains(v.(*ownWrite).over, e.ObjectNew.GetResourceVersion()) {
				r.superseded.CompareAndDelete(key, v)
			}
			return true
		},
		DeleteFunc: func(e event.TypedDeleteEvent[client.Object]) bool {
			r.superseded.Delete(client.ObjectKeyFromObject(e.Object))
			return true
		},
	}
}

// errStatusMovedOn: the status on the server is no longer the one the reconcile read.
var errStatusMovedOn = errors.New("the HarvesterMachine's status changed since it was read")

// sharedNamespaces are the Harvester namespaces, besides the target namespace, whose images, key
// pairs and networks the cluster's machines may name: a HarvesterClusterIdentity's
// sharedNamespaces (never nil for one); nil, any, for a Secret identity (the tenant's own
// credential reaches what it is bound to).
func (r *HarvesterMachineReconciler) sharedNamespaces(ctx context.Context, hc *infrav1.HarvesterCluster) ([]string, error) {
	ref := hc.Spec.Identity()
	if ref.Kind != infrav1.HarvesterClusterIdentityKind {
		return nil, nil
	}
	identity := &infrav1.HarvesterClusterIdentity{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, identity); err != nil {
		return nil, err
	}
	return append([]string{}, identity.Spec.SharedNamespaces...), nil
}
