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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

const (
	// IdentityFinalizer protects an identity Secret while a HarvesterCluster uses it.
	IdentityFinalizer = "harvestercluster.infrastructure.cluster.x-k8s.io/identity-in-use"
	// MoveLabel makes clusterctl move take the identity Secret along.
	MoveLabel = "clusterctl.cluster.x-k8s.io/move"
)

// HarvesterClusterReconciler reconciles HarvesterClusters: the connection to Harvester, the
// failure domains, and the control-plane load balancer and endpoint.
type HarvesterClusterReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Factory  *transport.ClientFactory
	// ProviderNamespace is the manager's namespace, where HarvesterClusterIdentities' Secrets
	// live.
	ProviderNamespace string
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

	// checked records, by HarvesterCluster UID, the connection and identity Secret version of
	// its last good live connection check (see connect).
	checked sync.Map
}

// liveCheck is what a cluster's last good live connection check ran with.
type liveCheck struct {
	client        *transport.Client
	secretVersion string
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

// clusterScope holds what one reconcile works with.
type clusterScope struct {
	// objectPatch writes what the reconcile changed of hc when the scope closes.
	*objectPatch
	cluster *clusterv1.Cluster
	hc      *infrav1.HarvesterCluster
	// guest names the cluster on Harvester (with its owner mark).
	guest  naming.Guest
	client *transport.Client
	// recheck, when set, is when a reconcile must come again for a reason no event will bring
	// (an identity's credential nearing its expiry).
	recheck time.Duration
	// connectionFailed tells that a request of this reconcile found Harvester refusing the
	// identity (401, 403) or not answering.
	connectionFailed bool
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

// report sets conditionType from a failed step's reason and message: False, or, for Deleting,
// True (the deletion goes on, and says what holds it).
func (s *clusterScope) report(conditionType string) func(reason, message string) {
	return func(reason, message string) {
		status := metav1.ConditionFalse
		if conditionType == clusterv1.DeletingCondition {
			status = metav1.ConditionTrue
		}
		setClusterCondition(s.hc, conditionType, status, reason, message)
		switch reason {
		case infrav1.UnauthorizedReason, infrav1.ForbiddenReason, infrav1.HarvesterUnreachableReason:
			s.connectionFailed = true
		}
	}
}

// clusterUserPrefix begins a HarvesterCluster's user key in the client factory.
const clusterUserPrefix = "HarvesterCluster/"

func (s *clusterScope) userKey() string {
	return clusterUserPrefix + s.hc.Namespace + "/" + s.hc.Name
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
	// clusterctl move is deleting the source's copy (the target has the cluster): hands off,
	// also of the owner mark, whose annotation clusterctl has just replaced.
	if _, moving := hc.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving {
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
		if changed, err := r.ensureFinalizerAndMark(ctx, hc); err != nil || changed {
			return ctrl.Result{}, err
		}
	}
	guest, ok := naming.GuestOf(hc, cluster.Name)
	if !ok {
		return ctrl.Result{}, nil // deleted before its first reconcile: nothing on Harvester
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster)))
	ctx = withFailureKey(ctx, "HarvesterCluster", req.String())
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, hc); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	p, err := newObjectPatch(r.Client, hc, hc, clusterConditions)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &clusterScope{objectPatch: p, cluster: cluster, hc: hc, guest: guest}
	defer func() {
		if err := s.Close(ctx); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
		if conditions.IsTrue(hc, clusterv1.ReadyCondition) {
			failures.forget(ctx)
		}
	}()
	defer func() {
		if s.connectionFailed {
			r.checked.Delete(hc.UID) // the next reconcile checks live, and says why on HarvesterAvailable
		}
	}()
	if !hc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return s.withRecheck(r.reconcileNormal(ctx, s))
}

// ensureFinalizerAndMark adds the provider's finalizer and records the owner mark, in one
// request, before anything is made on Harvester. A HarvesterCluster that has the finalizer but
// no mark was first reconciled by a version without marks: it records the empty mark, so that
// its objects on Harvester keep their names. changed tells that it wrote (the update's event
// brings the next reconcile).
func (r *HarvesterClusterReconciler) ensureFinalizerAndMark(ctx context.Context, hc *infrav1.HarvesterCluster) (changed bool, err error) {
	_, marked := hc.Annotations[infrav1.OwnerMarkAnnotation]
	finalized := controllerutil.ContainsFinalizer(hc, infrav1.ClusterFinalizer)
	if marked && finalized {
		return false, nil
	}
	base := hc.DeepCopy()
	if !marked {
		mark := naming.NewOwnerMark(hc.UID)
		if finalized {
			mark = ""
		}
		annotations.AddAnnotations(hc, map[string]string{infrav1.OwnerMarkAnnotation: mark})
	}
	controllerutil.AddFinalizer(hc, infrav1.ClusterFinalizer)
	return true, r.Client.Patch(ctx, hc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func (r *HarvesterClusterReconciler) reconcileNormal(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	hc := s.hc
	if err := r.protectIdentity(ctx, hc); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.connect(ctx, s); err != nil {
		return harvesterResult(ctx, err, s.report(infrav1.HarvesterAvailableCondition))
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

// connect opens the connection and checks it live; a failure is an Error for the
// HarvesterAvailable condition.
func (r *HarvesterClusterReconciler) connect(ctx context.Context, s *clusterScope) error {
	hc := s.hc
	// Its identity Secret is read every time: the expiry check needs the kubeconfig.
	c, secret, err := connect(ctx, r.Client, nil, r.Factory, hc, s.userKey(), r.ProviderNamespace)
	if secret != nil {
		r.checkIdentityExpiry(s, secret)
		if err := ensureIdentityOwnsSecret(ctx, r.Client, hc, secret); err != nil {
			return err
		}
	}
	if c == nil {
		return err
	}
	// Live, for a precise reason, unless this connection passed the check already with this
	// version of the identity Secret and its cache has synced: its watches then say Harvester
	// answers, and a request that Harvester refuses (401, 403) or does not answer clears the
	// record, so that the next reconcile checks again. A changed identity Secret (even its metadata: touching it is the
	// way to ask for a check) checks again.
	if last, ok := r.checked.Load(hc.UID); ok && err == nil && hc.Status.HarvesterVersion != "" &&
		conditions.IsTrue(hc, infrav1.HarvesterAvailableCondition) &&
		last.(liveCheck).client == c && last.(liveCheck).secretVersion == secret.ResourceVersion {
		s.client = c
		return nil
	}
	version, checkErr := harvester.CheckConnection(ctx, c.Client, hc.Spec.TargetNamespace)
	if checkErr != nil {
		return checkErr
	}
	hc.Status.HarvesterVersion = version
	if err != nil {
		// Watches that do not sync while Harvester answers: most often an identity not bound
		// in the target namespace, which would otherwise look like a slow Harvester.
		if accessErr := harvester.CheckTargetNamespaceAccess(ctx, c.Client, hc.Spec.TargetNamespace); accessErr != nil {
			return accessErr
		}
		return &transport.Error{Kind: transport.KindUnreachable, Reason: infrav1.HarvesterUnreachableReason,
			Message: "Harvester answers but the provider's watches have not caught up yet", Err: err}
	}
	setClusterCondition(hc, infrav1.HarvesterAvailableCondition, metav1.ConditionTrue, infrav1.ReadyReason, "")
	r.checked.Store(hc.UID, liveCheck{client: c, secretVersion: secret.ResourceVersion})
	s.client = c
	return nil
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
			fmt.Sprintf("no Harvester host has a %s label: each of the %d hosts is a failure domain for worker pools that name one (a machine placed there is pinned to its host); the control plane is spread over hosts by anti-affinity", build.LabelZone, len(domains)))
	} else {
		setClusterCondition(s.hc, infrav1.FailureDomainsReadyCondition, metav1.ConditionTrue, infrav1.ZonesReason,
			fmt.Sprintf("%d zones", len(domains)))
	}
	return nil
}

// reconcileLoadBalancer makes the control-plane load balancer and sets the endpoint from its
// address, once. A user-set endpoint means no load balancer; a load balancer the provider made
// that is deleted on Harvester is made again, and the cluster is not Ready until it serves the
// endpoint again.
func (r *HarvesterClusterReconciler) reconcileLoadBalancer(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	hc := s.hc
	shared, err := sharedNamespaces(ctx, r.Client, hc)
	if err != nil {
		return ctrl.Result{}, err
	}
	st, err := (&harvester.LoadBalancerService{C: s.client, SharedNamespaces: shared}).EnsureControlPlane(ctx, hc, s.guest, s.cluster.Spec.ControlPlaneRef.Kind, r.clock().Now())
	if err != nil {
		return harvesterResult(ctx, err, s.report(infrav1.LoadBalancerReadyCondition))
	}
	switch {
	case st.Recreated:
		r.Recorder.Eventf(hc, nil, corev1.EventTypeWarning, "LoadBalancerRecreated", "Create", "Load balancer %s/%s was deleted on Harvester; created it again", hc.Spec.TargetNamespace, st.Name)
	case st.Created:
		r.Recorder.Eventf(hc, nil, corev1.EventTypeNormal, "LoadBalancerCreated", "Create", "Created load balancer %s/%s on Harvester", hc.Spec.TargetNamespace, st.Name)
	}
	if st.Name != "" {
		hc.Status.LoadBalancer.Name = st.Name
		annotations.AddAnnotations(hc, map[string]string{infrav1.LoadBalancerAnnotation: st.Name})
	}
	if !st.Ready || st.Address == "" {
		status := metav1.ConditionFalse
		if st.Ready {
			status = metav1.ConditionTrue // the user's endpoint
		}
		if st.Address != "" {
			hc.Status.LoadBalancer.Address = st.Address
		}
		setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, status, st.Reason, st.Message)
		return ctrl.Result{RequeueAfter: st.RecheckAfter}, nil // else its status change brings us back
	}
	if hc.Status.LoadBalancer.Address == "" {
		// First seen: once per load balancer, also across restarts of the manager.
		loadBalancerAllocationSeconds.Observe(sinceNonNegative(st.CreatedAt, time.Now()))
	}
	hc.Status.LoadBalancer.Address = st.Address
	if hc.Spec.ControlPlaneEndpoint.Host == "" {
		hc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: st.Address, Port: harvester.APIServerPort}
	}
	setClusterCondition(hc, infrav1.LoadBalancerReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason, "")
	return ctrl.Result{}, nil
}

func setClusterCondition(hc *infrav1.HarvesterCluster, conditionType string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hc, metav1.Condition{
		Type: conditionType, Status: status, Reason: reason, Message: message, ObservedGeneration: hc.Generation,
	})
}
