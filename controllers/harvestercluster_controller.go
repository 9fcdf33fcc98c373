// Package controllers holds the reconcilers of HarvesterClusters and HarvesterMachines. They stay
// thin: fetch objects, build a scope, call the services in pkg/harvester, patch status.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
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

const (
	// IdentityFinalizer protects an identity Secret while a HarvesterCluster uses it.
	IdentityFinalizer = "harvestercluster.infrastructure.cluster.x-k8s.io/identity-in-use"
	// MoveLabel makes clusterctl move take the identity Secret along.
	MoveLabel = "clusterctl.cluster.x-k8s.io/move"
	// dhcpPatience is how long a dhcp load balancer may wait for a lease before the condition
	// says so.
	dhcpPatience = 2 * time.Minute
)

// HarvesterClusterReconciler reconciles HarvesterClusters: the connection to Harvester, the
// failure domains, and the control-plane load balancer and endpoint.
type HarvesterClusterReconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Factory  *harvester.ClientFactory
	// WatchFilterValue limits reconciles to objects labelled
	// `cluster.x-k8s.io/watch-filter=<value>` (CAPI's --watch-filter).
	WatchFilterValue string
	// TokenLifetime of the guests' Harvester tokens (DefaultTokenLifetime when zero; the
	// TokenRequest API's minimum is 10 minutes) and the Clock that decides their renewal.
	TokenLifetime time.Duration
	Clock         clock.PassiveClock
	// CCMImage is the guest cloud controller manager's image (DefaultCCMImage when empty).
	CCMImage string
	// IdentityExpiryWarning is how long before the identity's credential expires the
	// IdentityExpiringSoon condition and a warning event say so (DefaultIdentityExpiryWarning
	// when zero).
	IdentityExpiryWarning time.Duration
}

func (r *HarvesterClusterReconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvesterclusters;harvesterclusters/status;harvesterclusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=addons.cluster.x-k8s.io,resources=clusterresourcesets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler, and its watches on the load balancers and hosts
// of every Harvester connection.
func (r *HarvesterClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.HarvesterCluster{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceNotPausedAndHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		WithEventFilter(predicates.ResourceIsNotExternallyManaged(mgr.GetScheme(), log)).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx,
				infrav1.GroupVersion.WithKind("HarvesterCluster"), mgr.GetClient(), &infrav1.HarvesterCluster{})),
			// Unpausing, and labels: the addons label selects the guest's addons.
			builder.WithPredicates(predicate.Or[client.Object](predicates.ClusterUnpaused(mgr.GetScheme(), log), predicate.LabelChangedPredicate{}))).
		// A rotated or fixed kubeconfig in an identity Secret is used at once (metadata only:
		// the provider does not cache Secrets' data).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToClusters), builder.OnlyMetadata).
		// A cluster being deleted waits for its machines: their deletions bring it back.
		Watches(&infrav1.HarvesterMachine{}, handler.EnqueueRequestsFromMapFunc(r.machineToCluster),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(event.UpdateEvent) bool { return false },
				DeleteFunc: func(event.DeleteEvent) bool { return true },
			})).
		Build(r)
	if err != nil {
		return err
	}
	cluster := func() client.Object { return &infrav1.HarvesterCluster{} }
	loadBalancerToCluster := watchFiltered(r.Client, r.WatchFilterValue, cluster, r.loadBalancerToCluster)
	allClusters := watchFiltered(r.Client, r.WatchFilterValue, cluster, r.allClusters)
	r.Factory.WatchCaches(c, func(hc cache.Cache) []source.Source {
		return []source.Source{
			source.Kind(hc, client.Object(&lbv1.LoadBalancer{}), handler.EnqueueRequestsFromMapFunc(loadBalancerToCluster)),
			source.Kind(hc, client.Object(&corev1.Node{}), handler.EnqueueRequestsFromMapFunc(allClusters)),
		}
	})
	return nil
}

// loadBalancerToCluster maps a control-plane load balancer to its HarvesterCluster, and one a
// guest's cloud controller manager made to its HarvesterCluster while that is being deleted
// (which waits for them to go; a live cluster has nothing to do on their changes).
func (r *HarvesterClusterReconciler) loadBalancerToCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	if guest := obj.GetLabels()[harvester.LabelLBCluster]; guest != "" {
		return r.guestLoadBalancerToCluster(ctx, obj, guest)
	}
	id := obj.GetLabels()[harvester.LabelCluster]
	if id == "" {
		return nil
	}
	var reqs []reconcile.Request
	for _, req := range r.allClusters(ctx, obj) {
		hc := &infrav1.HarvesterCluster{}
		if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil {
			continue
		}
		if name := hc.Labels[clusterv1.ClusterNameLabel]; name != "" && harvester.ClusterID(hc.Namespace, name) == id {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

func (r *HarvesterClusterReconciler) guestLoadBalancerToCluster(ctx context.Context, obj client.Object, guest string) []reconcile.Request {
	var reqs []reconcile.Request
	for _, req := range r.allClusters(ctx, obj) {
		hc := &infrav1.HarvesterCluster{}
		if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil || hc.DeletionTimestamp.IsZero() || hc.Spec.TargetNamespace != obj.GetNamespace() {
			continue
		}
		if name := hc.Labels[clusterv1.ClusterNameLabel]; name != "" && harvester.LabelValue(harvester.ClusterID(hc.Namespace, name)) == guest {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// machineToCluster maps a HarvesterMachine to its cluster's HarvesterCluster.
func (r *HarvesterClusterReconciler) machineToCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, cluster); err == nil && cluster.Spec.InfrastructureRef.Name != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: cluster.Spec.InfrastructureRef.Name}}}
	}
	// Without its Cluster, the HarvesterCluster carrying the same cluster label.
	list := &infrav1.HarvesterClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// secretToClusters maps an identity Secret to the HarvesterClusters that use it.
func (r *HarvesterClusterReconciler) secretToClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &infrav1.HarvesterClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.IdentitySecret.Name == obj.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (r *HarvesterClusterReconciler) allClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &infrav1.HarvesterClusterList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// clusterScope holds what one reconcile works with.
type clusterScope struct {
	cluster *clusterv1.Cluster
	hc      *infrav1.HarvesterCluster
	client  *harvester.Client
	// recheck, when set, is when a reconcile must come again for a reason no event will bring
	// (an identity's credential nearing its expiry).
	recheck time.Duration
}

// recheckAfter asks for a reconcile after d at the latest.
func (s *clusterScope) recheckAfter(d time.Duration) {
	if d > 0 && (s.recheck == 0 || d < s.recheck) {
		s.recheck = d
	}
}

// withRecheck makes a successful result come back by the scope's recheck at the latest.
func (s *clusterScope) withRecheck(result ctrl.Result, err error) (ctrl.Result, error) {
	if err != nil || s.recheck == 0 {
		return result, err
	}
	if result.RequeueAfter == 0 || s.recheck < result.RequeueAfter {
		result.RequeueAfter = s.recheck
	}
	return result, nil
}

func (s *clusterScope) userKey() string {
	return "HarvesterCluster/" + s.hc.Namespace + "/" + s.hc.Name
}

// Reconcile brings a HarvesterCluster's Harvester resources to the desired state.
func (r *HarvesterClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	hc := &infrav1.HarvesterCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Another system manages this cluster's infrastructure (CAPI's contract): hands off. The
	// event filter drops its own events; a Cluster's or Secret's can still map here.
	if annotations.IsExternallyManaged(hc) {
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, hc.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cluster == nil {
		if hc.DeletionTimestamp.IsZero() {
			ctrl.LoggerFrom(ctx).V(4).Info("waiting for the Cluster controller to set the owner reference")
			return ctrl.Result{}, nil
		}
		// Deleted before (or after) its Cluster owned it: its label still names the guest
		// whose objects may exist on Harvester; without it nothing was ever made.
		name := hc.Labels[clusterv1.ClusterNameLabel]
		if name == "" {
			return ctrl.Result{}, r.dropFinalizer(ctx, hc)
		}
		cluster = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: name, DeletionTimestamp: hc.DeletionTimestamp}}
	}
	if hc.DeletionTimestamp.IsZero() {
		if finalizerAdded, err := finalizers.EnsureFinalizer(ctx, r.Client, hc, infrav1.ClusterFinalizer); err != nil || finalizerAdded {
			return ctrl.Result{}, err
		}
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, hc); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	patchHelper, err := patch.NewHelper(hc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := r.patch(ctx, hc, patchHelper); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	s := &clusterScope{cluster: cluster, hc: hc}
	if !hc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return s.withRecheck(r.reconcileNormal(ctx, s))
}

func (r *HarvesterClusterReconciler) reconcileNormal(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	hc := s.hc
	if err := r.protectIdentity(ctx, hc); err != nil {
		return ctrl.Result{}, err
	}
	if ok, err := r.connect(ctx, s); err != nil || !ok {
		return connectResult(err)
	}
	if err := r.reconcileFailureDomains(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if res, err := r.reconcileLoadBalancer(ctx, s); err != nil || !res.IsZero() {
		return res, err
	}
	if hc.Spec.ControlPlaneEndpoint.Host != "" {
		hc.Status.Initialization.Provisioned = ptr.To(true)
	}
	res, err := r.reconcileCredentials(ctx, s)
	if err != nil {
		return res, err
	}
	return res, r.reconcileAddons(ctx, s)
}

// protectIdentity puts a finalizer (so that the Secret outlives the clusters that use it) and
// clusterctl's move label on the identity Secret.
func (r *HarvesterClusterReconciler) protectIdentity(ctx context.Context, hc *infrav1.HarvesterCluster) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: hc.Namespace, Name: hc.Spec.IdentitySecret.Name}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // connect reports it
		}
		return err
	}
	_, hasLabel := secret.Labels[MoveLabel]
	if controllerutil.ContainsFinalizer(secret, IdentityFinalizer) && hasLabel {
		return nil
	}
	base := secret.DeepCopy()
	controllerutil.AddFinalizer(secret, IdentityFinalizer)
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	if !hasLabel {
		secret.Labels[MoveLabel] = ""
	}
	return r.Client.Patch(ctx, secret, client.MergeFrom(base))
}

// connect opens the connection and checks it live; a failure is reported on the
// HarvesterAvailable condition and ends the reconcile (ok false).
func (r *HarvesterClusterReconciler) connect(ctx context.Context, s *clusterScope) (bool, error) {
	hc := s.hc
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: hc.Namespace, Name: hc.Spec.IdentitySecret.Name}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionFalse, infrav1.IdentitySecretNotFoundReason,
				fmt.Sprintf("identity Secret %s does not exist", key))
			return false, nil
		}
		return false, err
	}
	r.checkIdentityExpiry(s, secret)
	c, err := r.Factory.Get(ctx, s.userKey(), secret, hc.Spec.TargetNamespace)
	if errors.Is(err, harvester.ErrInvalidKubeconfig) {
		setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionFalse, infrav1.InvalidKubeconfigReason,
			fmt.Sprintf("identity Secret %s: %v", key, err))
		return false, nil
	}
	if err != nil && !errors.Is(err, harvester.ErrNotSynced) {
		// Building a connection asks Harvester for its API groups: it may not answer.
		var ce *harvester.ConnectionError
		if errors.As(harvester.ClassifyError(err, "connecting to Harvester"), &ce) {
			setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionFalse, ce.Reason, ce.Message)
		}
		return false, errConnection
	}
	// Live, whether or not the cache has synced: a precise reason for a failure.
	version, checkErr := harvester.CheckConnection(ctx, c.Client, hc.Spec.TargetNamespace)
	if checkErr != nil {
		var ce *harvester.ConnectionError
		if errors.As(checkErr, &ce) {
			setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionFalse, ce.Reason, ce.Message)
			return false, errConnection
		}
		return false, checkErr
	}
	hc.Status.HarvesterVersion = version
	if errors.Is(err, harvester.ErrNotSynced) {
		// Watches that do not sync while Harvester answers: most often an identity not bound
		// in the target namespace, which would otherwise look like a slow Harvester.
		var ce *harvester.ConnectionError
		if errors.As(harvester.CheckTargetNamespaceAccess(ctx, c.Client, hc.Spec.TargetNamespace), &ce) {
			setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionFalse, ce.Reason, ce.Message)
			return false, errConnection
		}
		setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionFalse, infrav1.HarvesterUnreachableReason,
			"Harvester answers but the provider's watches have not caught up yet")
		return false, errNotSynced
	}
	setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionTrue, infrav1.ReadyReason, "")
	s.client = c
	return true, nil
}

// errConnection marks a failed connection check, already reported on the condition.
var errConnection = errors.New("harvester connection check failed")

// errNotSynced marks a connection whose cache is still filling: a matter of seconds.
var errNotSynced = errors.New("harvester cache not synced")

const (
	// connectionRecheck is how soon a cluster whose Harvester connection failed tries again; a
	// change of the identity Secret retries at once.
	connectionRecheck = 30 * time.Second
	// syncRecheck is how soon a reconcile that found a new connection's cache still filling
	// tries again; no event would come for it.
	syncRecheck = 2 * time.Second
)

func connectResult(err error) (ctrl.Result, error) {
	switch {
	case errors.Is(err, errConnection):
		return ctrl.Result{RequeueAfter: connectionRecheck}, nil
	case errors.Is(err, errNotSynced):
		return ctrl.Result{RequeueAfter: syncRecheck}, nil
	}
	return ctrl.Result{}, err
}

// reconcileFailureDomains reports Harvester's zones (or hosts) as failure domains.
func (r *HarvesterClusterReconciler) reconcileFailureDomains(ctx context.Context, s *clusterScope) error {
	nodes := &corev1.NodeList{}
	if err := s.client.Cache.List(ctx, nodes); err != nil {
		return err
	}
	domains, byHost := harvester.FailureDomains(nodes.Items)
	s.hc.Status.FailureDomains = domains
	if byHost {
		setClusterCondition(s.hc, infrav1.FailureDomainsReadyCondition, metav1.ConditionTrue, infrav1.HostsReason,
			fmt.Sprintf("no Harvester host has a %s label: each of the %d hosts is a failure domain", harvester.LabelZone, len(domains)))
	} else {
		setClusterCondition(s.hc, infrav1.FailureDomainsReadyCondition, metav1.ConditionTrue, infrav1.ZonesReason,
			fmt.Sprintf("%d zones", len(domains)))
	}
	return nil
}

// reconcileLoadBalancer makes the control-plane load balancer and sets the endpoint from its
// address, once. A user-set endpoint means no load balancer.
func (r *HarvesterClusterReconciler) reconcileLoadBalancer(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	hc := s.hc
	want := harvester.BuildControlPlaneLoadBalancer(hc, s.cluster.Name)
	lb := &lbv1.LoadBalancer{}
	err := s.client.Cache.Get(ctx, client.ObjectKeyFromObject(want), lb)
	if apierrors.IsNotFound(err) {
		if hc.Spec.ControlPlaneEndpoint.Host != "" {
			setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionTrue, infrav1.UserProvidedEndpointReason,
				"the control-plane endpoint is set in the spec; no load balancer is made")
			return ctrl.Result{}, nil
		}
		if err := s.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, r.harvesterError(hc, infrav1.LoadBalancerReadyCondition, harvester.ClassifyError(err, "creating the control-plane load balancer"))
		}
		r.Recorder.Eventf(hc, corev1.EventTypeNormal, "LoadBalancerCreated", "Created load balancer %s/%s on Harvester", want.Namespace, want.Name)
		setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionFalse, infrav1.WaitingForAddressReason, "waiting for Harvester to allocate an address")
		return ctrl.Result{}, nil // the load balancer's status change brings us back
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if lb.Labels[harvester.LabelManagedBy] != harvester.ManagedByValue {
		setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionFalse, infrav1.NameTakenReason,
			fmt.Sprintf("a load balancer named %s already exists in Harvester namespace %s and was not made for this cluster; it is left untouched", lb.Name, lb.Namespace))
		return ctrl.Result{}, nil
	}
	hc.Status.LoadBalancer.Name = lb.Name
	address := harvester.LoadBalancerAddress(lb)
	if address == "" {
		return r.waitForAddress(hc, lb)
	}
	if hc.Status.LoadBalancer.Address == "" {
		// First seen: once per load balancer, also across restarts of the manager.
		loadBalancerAllocationSeconds.Observe(sinceNonNegative(lb.CreationTimestamp.Time, time.Now()))
	}
	hc.Status.LoadBalancer.Address = address
	if hc.Spec.ControlPlaneEndpoint.Host == "" {
		hc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: address, Port: harvester.APIServerPort}
	}
	setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason, "")
	return ctrl.Result{}, nil
}

func (r *HarvesterClusterReconciler) waitForAddress(hc *infrav1.HarvesterCluster, lb *lbv1.LoadBalancer) (ctrl.Result, error) {
	problem := harvester.LoadBalancerProblem(lb)
	switch {
	case problem == "" || problem == "no running backend servers":
		msg := "waiting for Harvester to allocate an address"
		if lb.Spec.IPAM == lbv1.DHCP {
			if age := time.Since(lb.CreationTimestamp.Time); age > dhcpPatience {
				msg = fmt.Sprintf("no DHCP lease after %s: does the load balancer's network have a DHCP server?", age.Round(time.Second))
			} else {
				setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionFalse, infrav1.WaitingForAddressReason, "waiting for a DHCP lease")
				return ctrl.Result{RequeueAfter: dhcpPatience - age}, nil
			}
		}
		setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionFalse, infrav1.WaitingForAddressReason, msg)
	case isPoolExhausted(problem):
		setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionFalse, infrav1.IPPoolExhaustedReason,
			"Harvester's IP pool is exhausted: "+problem)
	default:
		setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionFalse, infrav1.LoadBalancerFailedReason,
			"Harvester reports: "+problem)
	}
	return ctrl.Result{}, nil
}

// isPoolExhausted recognises host-local IPAM's message, which Harvester passes on.
func isPoolExhausted(msg string) bool { return strings.HasPrefix(msg, "no IP addresses available") }

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
		r.Recorder.Eventf(hc, corev1.EventTypeWarning, "CleanupSkipped", "Skipped cleanup on Harvester as the %s annotation asks; remove what is left there by hand", infrav1.SkipHarvesterCleanupAnnotation)
		return ctrl.Result{}, r.finishDelete(ctx, s)
	}
	if ok, err := r.connect(ctx, s); err != nil || !ok {
		return connectResult(err)
	}
	if err := r.deleteCredentials(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if gone, err := r.deleteGuestLoadBalancers(ctx, s); err != nil || !gone {
		return ctrl.Result{}, err // each one's deletion event brings us back
	}
	if err := r.deleteGuestVolumes(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	lb := &lbv1.LoadBalancer{}
	name := harvester.LoadBalancerName(hc.Namespace, s.cluster.Name)
	err = s.client.Get(ctx, client.ObjectKey{Namespace: hc.Spec.TargetNamespace, Name: name}, lb)
	switch {
	case err == nil && lb.Labels[harvester.LabelManagedBy] == harvester.ManagedByValue:
		if lb.DeletionTimestamp.IsZero() {
			if err := s.client.Delete(ctx, lb); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, r.harvesterError(hc, infrav1.LoadBalancerReadyCondition, harvester.ClassifyError(err, "deleting the control-plane load balancer"))
			}
			r.Recorder.Eventf(hc, corev1.EventTypeNormal, "LoadBalancerDeleted", "Deleted load balancer %s/%s on Harvester", lb.Namespace, lb.Name)
		}
		return ctrl.Result{}, nil // its deletion event brings us back
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, r.harvesterError(hc, infrav1.LoadBalancerReadyCondition, harvester.ClassifyError(err, "reading the control-plane load balancer"))
	}
	return ctrl.Result{}, r.finishDelete(ctx, s)
}

// deleteGuestLoadBalancers deletes the load balancers the guest's cloud controller manager made
// for its Services (labelled with the guest's cluster name, the CCM's --cluster-name), which
// would otherwise hold their IPs after the guest is gone. It tells whether none is left. They are
// in the connection's cache, whose events of them bring the deletion back (guestLoadBalancerToCluster).
func (r *HarvesterClusterReconciler) deleteGuestLoadBalancers(ctx context.Context, s *clusterScope) (bool, error) {
	hc := s.hc
	lbs := &lbv1.LoadBalancerList{}
	if err := s.client.Cache.List(ctx, lbs, client.InNamespace(hc.Spec.TargetNamespace), client.MatchingLabels{
		harvester.LabelLBCluster: harvester.LabelValue(harvester.ClusterID(hc.Namespace, s.cluster.Name)),
	}); err != nil {
		return false, r.harvesterError(hc, infrav1.LoadBalancerReadyCondition, harvester.ClassifyError(err, "listing the guest's load balancers"))
	}
	for i := range lbs.Items {
		lb := &lbs.Items[i]
		if !lb.DeletionTimestamp.IsZero() {
			continue
		}
		if err := s.client.Delete(ctx, lb); client.IgnoreNotFound(err) != nil {
			return false, r.harvesterError(hc, infrav1.LoadBalancerReadyCondition, harvester.ClassifyError(err, "deleting a load balancer of the guest"))
		}
		r.Recorder.Eventf(hc, corev1.EventTypeNormal, "GuestLoadBalancerDeleted", "Deleted load balancer %s/%s that the guest's cloud controller manager made for Service %s/%s",
			lb.Namespace, lb.Name, lb.Labels[harvester.LabelLBServiceNamespace], lb.Labels[harvester.LabelLBServiceName])
	}
	return len(lbs.Items) == 0, nil
}

// finishDelete lets go of the addons, the connection and the identity Secret, then of the
// HarvesterCluster.
func (r *HarvesterClusterReconciler) finishDelete(ctx context.Context, s *clusterScope) error {
	if err := r.deleteAddons(ctx, s.hc, s.cluster.Name); err != nil {
		return err
	}
	r.Factory.Release(s.userKey())
	if err := r.releaseIdentity(ctx, s.hc); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(s.hc, infrav1.ClusterFinalizer)
	return nil
}

// releaseIdentity removes the identity Secret's finalizer once no other HarvesterCluster uses it.
func (r *HarvesterClusterReconciler) releaseIdentity(ctx context.Context, hc *infrav1.HarvesterCluster) error {
	list := &infrav1.HarvesterClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(hc.Namespace)); err != nil {
		return err
	}
	for _, other := range list.Items {
		if other.UID != hc.UID && other.Spec.IdentitySecret.Name == hc.Spec.IdentitySecret.Name {
			return nil
		}
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: hc.Spec.IdentitySecret.Name}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(secret, IdentityFinalizer) {
		return nil
	}
	base := secret.DeepCopy()
	controllerutil.RemoveFinalizer(secret, IdentityFinalizer)
	return r.Client.Patch(ctx, secret, client.MergeFrom(base))
}

// harvesterError reports a failed Harvester request on a condition and returns it for a retry.
func (r *HarvesterClusterReconciler) harvesterError(hc *infrav1.HarvesterCluster, conditionType string, err error) error {
	var ce *harvester.ConnectionError
	if errors.As(err, &ce) {
		setClusterCondition(hc, conditionType, metav1.ConditionFalse, ce.Reason, ce.Message)
	}
	return err
}

func setClusterCondition(hc *infrav1.HarvesterCluster, conditionType string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hc, metav1.Condition{
		Type: conditionType, Status: status, Reason: reason, Message: message, ObservedGeneration: hc.Generation,
	})
}

func (r *HarvesterClusterReconciler) patch(ctx context.Context, hc *infrav1.HarvesterCluster, h *patch.Helper) error {
	if err := conditions.SetSummaryCondition(hc, hc, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{
			infrav1.HarvesterAvailableCondition, infrav1.FailureDomainsReadyCondition, infrav1.LoadBalancerReadyCondition,
			infrav1.GuestCredentialsReadyCondition, infrav1.AddonsReadyCondition,
		},
		conditions.IgnoreTypesIfMissing{infrav1.FailureDomainsReadyCondition, infrav1.LoadBalancerReadyCondition,
			infrav1.GuestCredentialsReadyCondition, infrav1.AddonsReadyCondition},
	); err != nil {
		return err
	}
	return ignoreGone(h.Patch(ctx, hc, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.PausedCondition, clusterv1.ReadyCondition, clusterv1.DeletingCondition, infrav1.HarvesterAvailableCondition,
		infrav1.FailureDomainsReadyCondition, infrav1.LoadBalancerReadyCondition, infrav1.GuestCredentialsReadyCondition,
		infrav1.AddonsReadyCondition, infrav1.IdentityExpiringSoonCondition,
	}}), hc)
}
