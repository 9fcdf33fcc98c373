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
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
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
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

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
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.HarvesterMachine{}, machineHostIndex, func(o client.Object) []string {
		if hm, ok := o.(*infrav1.HarvesterMachine); ok && hm.Status.VirtualMachine.Host != "" {
			return []string{hm.Status.VirtualMachine.Host}
		}
		return nil
	}); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		// Paused ones too: the reconcile writes their Paused condition.
		For(&infrav1.HarvesterMachine{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue), ownStatusIgnored)).
		WithOptions(options).
		Watches(&clusterv1.Machine{}, filtered(
			util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("HarvesterMachine"))),
			builder.WithPredicates(machineChangedForInfrastructure)).
		Watches(&infrav1.HarvesterCluster{}, filtered(r.harvesterClusterToMachines),
			builder.WithPredicates(clusterChangedForMachines)).
		// Static addresses: a claim's binding, and its IPAddress appearing in the cache.
		Watches(&ipamv1.IPAddressClaim{}, filtered(controllerOwner("HarvesterMachine"))).
		Watches(&ipamv1.IPAddress{}, filtered(r.ipam().MachineOf)).
		Watches(&clusterv1.Cluster{}, filtered(r.clusterToMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log))).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	toMachine := watchFiltered(r.Client, r.WatchFilterValue, machine, harvesterObjectToMachine)
	hostToMachines := watchFiltered(r.Client, r.WatchFilterValue, machine, r.hostToMachines)
	volumeToMachine := watchFiltered(r.Client, r.WatchFilterValue, machine, r.volumeToMachine)
	r.Factory.WatchCaches(c, func(hc cache.Cache) []source.Source {
		return []source.Source{
			source.Kind(hc, client.Object(&kubevirtv1.VirtualMachine{}), handler.EnqueueRequestsFromMapFunc(toMachine), observedChange),
			source.Kind(hc, client.Object(&kubevirtv1.VirtualMachineInstance{}), readyFirst(toMachine), observedChange),
			// A host being emptied (maintenance mode, an upgrade's taint, a cordon) moves its
			// machines' VMs.
			source.Kind(hc, client.Object(&corev1.Node{}), handler.EnqueueRequestsFromMapFunc(hostToMachines), hostEmptyingChanged),
			// A deleting machine waits for its volumes to go, a machine whose disk grows for its
			// volume to grow.
			source.Kind(hc, client.Object(&corev1.PersistentVolumeClaim{}), handler.EnqueueRequestsFromMapFunc(volumeToMachine), volumeChanged),
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
// UID, deletion, the VM's printable status and RestartRequired; the VMI's phase, host, NICs,
// conditions, CPU topology and memory).
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
		return !ok || o.Status.PrintableStatus != n.Status.PrintableStatus || restartRequired(o) != restartRequired(n)
	case *kubevirtv1.VirtualMachineInstance:
		o, ok := o.(*kubevirtv1.VirtualMachineInstance)
		return !ok || o.Status.Phase != n.Status.Phase || o.Status.NodeName != n.Status.NodeName ||
			!equality.Semantic.DeepEqual(o.Status.CurrentCPUTopology, n.Status.CurrentCPUTopology) ||
			!equality.Semantic.DeepEqual(o.Status.Memory, n.Status.Memory) ||
			o.Status.EvacuationNodeName != n.Status.EvacuationNodeName ||
			!equality.Semantic.DeepEqual(o.Status.MigrationState, n.Status.MigrationState) ||
			!equality.Semantic.DeepEqual(o.Status.Interfaces, n.Status.Interfaces) ||
			!equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions)
	}
	return true
}}

// volumeChanged passes the volume updates a machine waits on: its deletion, and a change of its
// requested size or capacity (a disk grown in place).
var volumeChanged = predicate.Funcs{
	CreateFunc: func(event.TypedCreateEvent[client.Object]) bool { return false },
	DeleteFunc: func(event.TypedDeleteEvent[client.Object]) bool { return true },
	UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
		if !e.ObjectNew.GetDeletionTimestamp().IsZero() {
			return true
		}
		o, ok1 := e.ObjectOld.(*corev1.PersistentVolumeClaim)
		n, ok2 := e.ObjectNew.(*corev1.PersistentVolumeClaim)
		return ok1 && ok2 && (!o.Spec.Resources.Requests.Storage().Equal(*n.Spec.Resources.Requests.Storage()) ||
			!o.Status.Capacity.Storage().Equal(*n.Status.Capacity.Storage()))
	},
}

// restartRequired is KubeVirt's RestartRequired condition of a VM, "" without one: a resize
// that KubeVirt cannot make live shows there.
func restartRequired(vm *kubevirtv1.VirtualMachine) string {
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineRestartRequired {
			return string(c.Status) + ":" + c.Message
		}
	}
	return ""
}

// machineHostIndex indexes HarvesterMachines by the Harvester host their VM runs on.
const machineHostIndex = "status.virtualMachine.host"

// hostEmptyingChanged passes the host updates that change whether Harvester empties it: a
// cordon, the drain taint, the maintenance annotations (the cache keeps nothing else that moves
// of a host but its labels, which the machines do not read).
var hostEmptyingChanged = predicate.Funcs{
	CreateFunc: func(event.TypedCreateEvent[client.Object]) bool { return false },
	DeleteFunc: func(event.TypedDeleteEvent[client.Object]) bool { return false },
	UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return ok1 && ok2 && (o.Spec.Unschedulable != n.Spec.Unschedulable ||
			!maps.Equal(o.Annotations, n.Annotations) || !equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints))
	},
}

// hostToMachines maps a Harvester host to the machines whose VM runs on it (machines of every
// connection whose hosts share the name: a reconcile of another Harvester's machine finds its
// own host unchanged).
func (r *HarvesterMachineReconciler) hostToMachines(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &infrav1.HarvesterMachineList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{machineHostIndex: obj.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

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
// patches a Machine's status many times while it provisions, and without this each update
// would reconcile the HarvesterMachine for nothing.
var machineChangedForInfrastructure = predicate.Funcs{UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
	return metadataOrGenerationChanged(e.ObjectOld, e.ObjectNew)
}}

// clusterChangedForMachines passes the HarvesterCluster updates that change what its machines'
// reconciles read of it: metadata, spec (generation), failure domains, provisioning, and whether
// Harvester is available (a fixed identity or a Harvester back wakes the machines waiting on
// it). A cluster's other status updates (its conditions while it provisions, token renewals)
// would reconcile every machine of the cluster: at 1,000 machines in 50 clusters, most of the
// HarvesterMachine reconciles of a creation.
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
	namespace, value, ok := naming.MachineOf(obj)
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
		if naming.MachineLabelValue(list.Items[i].Name) == value {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}}
		}
	}
	return nil
}

// harvesterObjectToMachine maps a VM or VMI on Harvester to its HarvesterMachine by the name it
// carries (not by its own name, which may be a hash of the machine's).
func harvesterObjectToMachine(_ context.Context, obj client.Object) []reconcile.Request {
	namespace, name, ok := naming.MachineOf(obj)
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
