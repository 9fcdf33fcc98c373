package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// fallbackRequeue re-checks a machine that waits on Harvester in case an event was missed; the
// watches on VMs and VMIs are the main path.
const fallbackRequeue = 5 * time.Minute

// referenceRecheck is how soon a machine whose image, keypair or network is missing or not ready
// looks again.
const referenceRecheck = 15 * time.Second

// unreachableRecheck is how soon a machine whose Harvester did not answer tries again. Its
// return sends no event, and an error's exponential back-off would have grown to minutes by the
// end of a long outage; while Harvester stays silent the connection's guard fails the retries at
// once, without a request (harvester.requestGuard).
const unreachableRecheck = 5 * time.Second

// errUnreachable marks an error of a Harvester that did not answer.
var errUnreachable = errors.New("harvester unreachable")

// HarvesterMachineReconciler reconciles HarvesterMachines: a KubeVirt VM per machine on
// Harvester, its volumes and cloud-init, and the machine's providerID, addresses and status.
type HarvesterMachineReconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Factory  *harvester.ClientFactory
	// WatchFilterValue limits reconciles to objects labelled
	// `cluster.x-k8s.io/watch-filter=<value>` (CAPI's --watch-filter).
	WatchFilterValue string

	controller controller.Controller
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvestermachines;harvestermachines/status;harvestermachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch

// SetupWithManager registers the reconciler, its watches on management objects, and its watches
// on the VMs and VMIs of every Harvester connection the factory opens.
func (r *HarvesterMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.HarvesterMachine{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceNotPausedAndHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("HarvesterMachine")))).
		Watches(&infrav1.HarvesterCluster{}, handler.EnqueueRequestsFromMapFunc(r.harvesterClusterToMachines)).
		// Static addresses: a claim's binding, and its IPAddress appearing in the cache.
		Owns(&ipamv1.IPAddressClaim{}).
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.ipAddressToMachine)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log))).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	machine := func() client.Object { return &infrav1.HarvesterMachine{} }
	toMachine := watchFiltered(r.Client, r.WatchFilterValue, machine, harvesterObjectToMachine)
	volumeToMachine := watchFiltered(r.Client, r.WatchFilterValue, machine, r.volumeToMachine)
	r.Factory.WatchCaches(c, func(hc cache.Cache) []source.Source {
		return []source.Source{
			source.Kind(hc, client.Object(&kubevirtv1.VirtualMachine{}), handler.EnqueueRequestsFromMapFunc(toMachine)),
			source.Kind(hc, client.Object(&kubevirtv1.VirtualMachineInstance{}), handler.EnqueueRequestsFromMapFunc(toMachine)),
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
	// Deferred first, so it runs last: after the patch has recorded the condition.
	defer func() {
		if errors.Is(reterr, errUnreachable) {
			ctrl.LoggerFrom(ctx).Info("Harvester does not answer; trying again", "after", unreachableRecheck, "error", reterr.Error())
			res, reterr = ctrl.Result{RequeueAfter: unreachableRecheck}, nil
		}
	}()
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
	// The finalizer comes once the machine has an owner, that is, once it may make a VM.
	if hm.DeletionTimestamp.IsZero() {
		if finalizerAdded, err := finalizers.EnsureFinalizer(ctx, r.Client, hm, infrav1.MachineFinalizer); err != nil || finalizerAdded {
			return ctrl.Result{}, err
		}
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Cluster of HarvesterMachine %s: %w", req, err)
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, hm); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}

	patchHelper, err := patch.NewHelper(hm, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := r.patch(ctx, hm, patchHelper); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

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
	client  *harvester.Client
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
	return nil
}

// connect opens (or reuses) the connection to the cluster's Harvester; a failure is reported
// on the machine's condition.
func (r *HarvesterMachineReconciler) connect(ctx context.Context, s *machineScope) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.hc.Namespace, Name: s.hc.Spec.IdentitySecret.Name}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			setVMCondition(s.hm, metav1.ConditionFalse, infrav1.IdentitySecretNotFoundReason,
				fmt.Sprintf("identity Secret %s does not exist", key))
			return nil
		}
		return err
	}
	c, err := r.Factory.Get(ctx, s.userKey(), secret, s.hc.Spec.TargetNamespace)
	switch {
	case errors.Is(err, harvester.ErrInvalidKubeconfig):
		setVMCondition(s.hm, metav1.ConditionFalse, infrav1.InvalidKubeconfigReason, err.Error())
		return nil
	case errors.Is(err, harvester.ErrNotSynced):
		setVMCondition(s.hm, metav1.ConditionFalse, infrav1.HarvesterUnreachableReason, "waiting for Harvester to answer")
		return errNotSynced
	case err != nil:
		// Building a connection asks Harvester for its API groups: it may not answer.
		return r.harvesterError(s.hm, "connecting to Harvester", err)
	}
	s.client = c
	return nil
}

func (r *HarvesterMachineReconciler) reconcileNormal(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	hm := s.hm
	if s.hc == nil || !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
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
	if err := r.connect(ctx, s); err != nil || s.client == nil {
		return connectResult(err)
	}

	vm := &kubevirtv1.VirtualMachine{}
	vmKey := client.ObjectKey{Namespace: s.hc.Spec.TargetNamespace, Name: harvester.VMName(hm.Name)}
	err = s.client.Get(ctx, vmKey, vm) // live: a restart must never create a second VM
	switch {
	case apierrors.IsNotFound(err) && hm.Spec.ProviderID != "":
		// Provisioned once, gone now: never made again under the old name.
		if reason := conditions.GetReason(hm, infrav1.VirtualMachineReadyCondition); reason != infrav1.VMDeletedReason {
			r.Recorder.Eventf(hm, corev1.EventTypeWarning, "VirtualMachineDeleted",
				"VM %s was deleted outside the provider; the machine must be replaced", vmKey)
		}
		setVMCondition(hm, metav1.ConditionFalse, infrav1.VMDeletedReason, fmt.Sprintf(
			"VM %s was deleted outside the provider after the machine was provisioned; it is not made again (its providerID names the old VM): delete the Machine, or let a MachineHealthCheck on InfrastructureReady=False replace it", vmKey))
		return ctrl.Result{}, nil
	case apierrors.IsNotFound(err):
		return r.createVM(ctx, s)
	case err != nil:
		return ctrl.Result{}, r.harvesterError(hm, "reading VM "+vmKey.String(), err)
	}
	if !harvester.OwnedBy(vm.Labels, hm) {
		setVMCondition(hm, metav1.ConditionFalse, infrav1.NameTakenReason,
			fmt.Sprintf("a VM named %s already exists in Harvester namespace %s and was not made for this machine; it is left untouched", vm.Name, vm.Namespace))
		return ctrl.Result{}, nil
	}
	svc := &harvester.MachineService{C: s.client}
	if err := svc.AdoptCloudInit(ctx, vm); err != nil {
		return ctrl.Result{}, r.harvesterError(hm, "adopting the VM's cloud-init Secret", err)
	}
	return r.observe(ctx, s, vm)
}

func (r *HarvesterMachineReconciler) createVM(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	hm := s.hm
	svc := &harvester.MachineService{C: s.client}
	target := s.hc.Spec.TargetNamespace
	resolved, err := svc.ResolveReferences(ctx, &hm.Spec, target)
	if err != nil {
		return r.referenceError(hm, err)
	}
	bootstrap := &corev1.Secret{}
	bootstrapKey := client.ObjectKey{Namespace: s.machine.Namespace, Name: *s.machine.Spec.Bootstrap.DataSecretName}
	if err := r.Client.Get(ctx, bootstrapKey, bootstrap); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading bootstrap data Secret %s: %w", bootstrapKey, err)
	}
	userData, _, err := harvester.BuildUserData(harvester.UserDataInput{
		Bootstrap:       bootstrap.Data["value"],
		BootstrapFormat: string(bootstrap.Data["format"]),
		SSHPublicKeys:   resolved.SSHPublicKeys,
	})
	if err != nil {
		setVMCondition(hm, metav1.ConditionFalse, infrav1.UnsupportedBootstrapFormatReason, err.Error())
		return ctrl.Result{}, nil
	}

	in := &harvester.VMInput{
		Machine:          hm,
		Namespace:        target,
		ClusterNamespace: s.cluster.Namespace,
		ClusterName:      s.cluster.Name,
		Role:             harvester.RoleWorker,
		Images:           resolved.Images,
		KeyPairs:         resolved.KeyPairs,
		UserDataSecret:   harvester.CloudInitSecretName(hm.Name),
	}
	if util.IsControlPlaneMachine(s.machine) {
		in.Role = harvester.RoleControlPlane
	}
	networkData := []byte(hm.Spec.NetworkData)
	if usesIPPools(&hm.Spec) {
		// The webhook and the CRD refuse networkData together with IP pools.
		if networkData, in.MACAddresses, err = staticNetworkData(hm); err != nil {
			setIPCondition(hm, metav1.ConditionFalse, infrav1.IPAddressClaimFailedReason, "rendering the network-data: "+err.Error())
			return ctrl.Result{}, nil
		}
	}
	if len(networkData) > 0 {
		in.NetworkDataSecret = in.UserDataSecret
	}
	in.FailureDomain, in.FailureDomainKey = failureDomain(s)
	if err := svc.EnsureCloudInit(ctx, in, userData, networkData); err != nil {
		return r.referenceError(hm, err)
	}
	vm, err := harvester.BuildVM(in)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := s.client.Create(ctx, vm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return ctrl.Result{Requeue: true}, nil // created meanwhile: look at it again
		}
		return ctrl.Result{}, r.harvesterError(hm, fmt.Sprintf("creating VM %s/%s", vm.Namespace, vm.Name), err)
	}
	r.Recorder.Eventf(hm, corev1.EventTypeNormal, "VirtualMachineCreated", "Created VM %s/%s on Harvester", vm.Namespace, vm.Name)
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
func (r *HarvesterMachineReconciler) observe(ctx context.Context, s *machineScope, vm *kubevirtv1.VirtualMachine) (ctrl.Result, error) {
	hm := s.hm
	if hm.Spec.ProviderID == "" {
		hm.Spec.ProviderID = infrav1.ProviderIDPrefix + string(vm.UID)
	}
	hm.Status.VirtualMachine.Namespace = vm.Namespace
	hm.Status.VirtualMachine.Name = vm.Name
	hm.Status.VirtualMachine.UID = string(vm.UID)
	hm.Status.VirtualMachine.PrintableStatus = string(vm.Status.PrintableStatus)
	if s.machine.Spec.FailureDomain != "" {
		hm.Status.FailureDomain = s.machine.Spec.FailureDomain
	}

	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Cache.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.harvesterError(hm, "reading the VM's instance", err)
		}
		reason, msg := infrav1.VMStartingReason, "waiting for the VM to start"
		switch vm.Status.PrintableStatus {
		case kubevirtv1.VirtualMachineStatusStopped, kubevirtv1.VirtualMachineStatusStopping:
			reason, msg = infrav1.VMStoppedReason, "the VM is stopped"
		case kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding, kubevirtv1.VirtualMachineStatusProvisioning:
			reason, msg = infrav1.VMCreatingReason, "waiting for the VM's volumes"
		}
		setVMCondition(hm, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil
	}
	hm.Status.VirtualMachine.Host = vmi.Status.NodeName

	switch vmi.Status.Phase {
	case kubevirtv1.Running:
	case kubevirtv1.Failed:
		setVMCondition(hm, metav1.ConditionFalse, infrav1.VMFailedReason, "the VM failed on Harvester")
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil
	default:
		reason, msg := vmiWaitReason(vmi)
		setVMCondition(hm, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil
	}

	addresses := harvester.MachineAddresses(vmi, harvester.NetworkNames(&hm.Spec), harvester.VMName(hm.Name))
	// The claimed addresses stay first, also before the guest agent reports them.
	hm.Status.Addresses = claimedMachineAddresses(hm)
	for _, a := range addresses {
		ma := clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address}
		if !slices.Contains(hm.Status.Addresses, ma) {
			hm.Status.Addresses = append(hm.Status.Addresses, ma)
		}
	}
	if !harvester.HasInternalIP(addresses) {
		setVMCondition(hm, metav1.ConditionFalse, infrav1.WaitingForIPReason,
			"the VM runs but its management NIC reports no address yet; the image needs qemu-guest-agent")
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil
	}
	if !ptr.Deref(hm.Status.Initialization.Provisioned, false) {
		// Once per machine, when it becomes provisioned (again only if writing the status fails).
		observeProvisioned(vm, vmi, time.Now())
	}
	hm.Status.Initialization.Provisioned = ptr.To(true)
	setVMCondition(hm, metav1.ConditionTrue, infrav1.ReadyReason, "")
	return ctrl.Result{}, nil
}

// vmiWaitReason says why a VMI that is not running yet waits: unschedulable (KubeVirt copies
// the virt-launcher pod's PodScheduled=False condition to the VMI, with the scheduler's
// message), or on its way.
func vmiWaitReason(vmi *kubevirtv1.VirtualMachineInstance) (string, string) {
	for _, c := range vmi.Status.Conditions {
		if string(c.Type) == string(corev1.PodScheduled) && c.Status == corev1.ConditionFalse {
			return infrav1.VMUnschedulableReason, "the VM cannot be scheduled: " + c.Message
		}
	}
	return infrav1.VMStartingReason, fmt.Sprintf("the VM is %s", vmi.Status.Phase)
}

func (r *HarvesterMachineReconciler) reconcileDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	hm := s.hm
	setVMCondition(hm, metav1.ConditionFalse, infrav1.DeletingReason, "deleting the VM and its volumes")
	if s.hc == nil || s.hc.Annotations[infrav1.SkipHarvesterCleanupAnnotation] == "true" {
		// Without its HarvesterCluster the machine cannot reach Harvester (the cluster's deletion
		// runs after its machines, so that happens only when it was removed by force); with the
		// skip annotation the user asked for no cleanup.
		ctrl.LoggerFrom(ctx).Info("removing the finalizer without cleanup on Harvester")
		if err := r.releaseIPAddresses(ctx, hm); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(hm, infrav1.MachineFinalizer)
		return ctrl.Result{}, nil
	}
	if err := r.connect(ctx, s); err != nil || s.client == nil {
		return connectResult(err)
	}
	target := s.hc.Spec.TargetNamespace
	vm := &kubevirtv1.VirtualMachine{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: target, Name: harvester.VMName(hm.Name)}, vm)
	switch {
	case err == nil && harvester.OwnedBy(vm.Labels, hm):
		if vm.DeletionTimestamp.IsZero() {
			if err := s.client.Delete(ctx, vm); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, r.harvesterError(hm, fmt.Sprintf("deleting VM %s/%s", target, vm.Name), err)
			}
			r.Recorder.Eventf(hm, corev1.EventTypeNormal, "VirtualMachineDeleted", "Deleted VM %s/%s on Harvester", target, vm.Name)
		}
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil // the VM's deletion event brings us back
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, r.harvesterError(hm, "reading the VM", err)
	}
	svc := &harvester.MachineService{C: s.client}
	clean, err := svc.Cleanup(ctx, hm, target)
	if err != nil {
		return ctrl.Result{}, r.harvesterError(hm, "cleaning up the machine's volumes and cloud-init", err)
	}
	if !clean {
		return ctrl.Result{RequeueAfter: fallbackRequeue}, nil // each volume's deletion brings us back
	}
	// The addresses go back to their pools only now that the VM using them is gone.
	if err := r.releaseIPAddresses(ctx, hm); err != nil {
		return ctrl.Result{}, err
	}
	r.Factory.Release(s.userKey())
	controllerutil.RemoveFinalizer(hm, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}

// harvesterError reports an API error of Harvester on the machine with a reason a user can act
// on, and returns it for a retry with back-off.
func (r *HarvesterMachineReconciler) harvesterError(hm *infrav1.HarvesterMachine, doing string, err error) error {
	var ce *harvester.ConnectionError
	if errors.As(harvester.ClassifyError(err, doing), &ce) {
		setVMCondition(hm, metav1.ConditionFalse, ce.Reason, ce.Message)
		if ce.Reason == infrav1.HarvesterUnreachableReason {
			return fmt.Errorf("%s: %w: %w", doing, errUnreachable, err)
		}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// referenceError reports a bad reference on the machine. Images, keypairs and networks are not
// the provider's objects, so no watch tells when they are fixed: the machine looks again after
// referenceRecheck.
func (r *HarvesterMachineReconciler) referenceError(hm *infrav1.HarvesterMachine, err error) (ctrl.Result, error) {
	var ref *harvester.ReferenceError
	if errors.As(err, &ref) {
		setVMCondition(hm, metav1.ConditionFalse, ref.Reason, ref.Message)
		return ctrl.Result{RequeueAfter: referenceRecheck}, nil
	}
	return ctrl.Result{}, r.harvesterError(hm, "checking the machine's references", err)
}

func setVMCondition(hm *infrav1.HarvesterMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hm, metav1.Condition{
		Type: infrav1.VirtualMachineReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: hm.Generation,
	})
}

func (r *HarvesterMachineReconciler) patch(ctx context.Context, hm *infrav1.HarvesterMachine, h *patch.Helper) error {
	if err := conditions.SetSummaryCondition(hm, hm, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{infrav1.VirtualMachineReadyCondition, infrav1.IPAddressesReadyCondition},
		// Machines made before IPAddressesReady existed lack it until their next reconcile.
		conditions.IgnoreTypesIfMissing{infrav1.IPAddressesReadyCondition},
	); err != nil {
		return err
	}
	return ignoreGone(h.Patch(ctx, hm, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.PausedCondition, clusterv1.ReadyCondition, infrav1.VirtualMachineReadyCondition, infrav1.IPAddressesReadyCondition,
	}}), hm)
}
