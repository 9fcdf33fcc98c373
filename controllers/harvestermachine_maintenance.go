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

// Long file: host maintenance, one state machine read top to bottom (what a machine does when
// Harvester empties the host its VM runs on: maintenance mode, an upgrade, a drain, a cordon:
// the guest node's drain, the VM's stop and restart, the Machine's remediation hold).
// docs/decisions/0007-host-maintenance.md has the facts of Harvester and KubeVirt this follows,
// docs/operations.md the user's side.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine/drain"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedrainrules,verbs=list;watch

// MaintenanceAnnotation is on a Machine while the provider moves its VM off a host: its value
// lists what the provider did that it undoes once the guest node is back (`skip-remediation`:
// it set CAPI's skip-remediation annotation, so that a MachineHealthCheck leaves the machine
// alone while its node is down on purpose; `cordon`: it cordoned the guest node).
const MaintenanceAnnotation = "harvester.infrastructure.cluster.x-k8s.io/host-maintenance"

// Harvester's own records on hosts and VMs that the provider reads.
const (
	// annotationMaintainStatus is the host's maintenance state (running, completed).
	annotationMaintainStatus = "harvesterhci.io/maintain-status"
	// annotationDrainRequested is set when maintenance mode is asked for, until the drain ends.
	annotationDrainRequested = "harvesterhci.io/drain-requested"
	// annotationHarvesterRunStrategy is the VM's last run strategy other than Halted, which
	// Harvester keeps to restart a VM it halted.
	annotationHarvesterRunStrategy = naming.AnnotationHarvesterRunStrategy
)

// DefaultHostDrainTimeout is --host-maintenance-drain-timeout's default: a guest's
// PodDisruptionBudgets (the tenant's to write) hold its VM on a host Harvester empties at most
// this long, whatever its Machines' nodeDrainTimeoutSeconds.
const DefaultHostDrainTimeout = 30 * time.Minute

// maintenanceRecheck is how often a machine looks again while its guest node drains or comes
// back (the guest's pods and Node are not watched).
const maintenanceRecheck = 5 * time.Second

// hostEmptying says why Harvester empties host, "" when it does not.
func hostEmptying(host *corev1.Node) string {
	switch {
	case host == nil:
		return ""
	case host.Annotations[annotationDrainRequested] != "" || host.Annotations[annotationMaintainStatus] != "":
		return fmt.Sprintf("host %s enters maintenance mode", host.Name)
	case slices.ContainsFunc(host.Spec.Taints, func(t corev1.Taint) bool { return t.Key == transport.HostDrainTaint }):
		return fmt.Sprintf("host %s is being emptied for an upgrade (taint %s)", host.Name, transport.HostDrainTaint)
	case host.Spec.Unschedulable:
		return fmt.Sprintf("host %s is cordoned", host.Name)
	}
	return ""
}

// reconcileHostMaintenance moves a machine's VM off a host Harvester empties, as the machine's
// host maintenance policy says, and reports it in the HostMaintenance condition. handled is true
// when the reconcile ends here (the VM is held down or on its way back).
func (r *HarvesterMachineReconciler) reconcileHostMaintenance(ctx context.Context, s *machineScope, vms vmService, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (handled bool, res ctrl.Result, err error) {
	hm := s.hm
	// A VM the provider stopped for its host starts again once its instance is gone.
	if host := vm.Annotations[naming.AnnotationStoppedForHost]; host != "" {
		if vmi != nil {
			setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.StoppedForHostReason,
				fmt.Sprintf("the guest node was drained; the VM stops to leave host %s", host))
			setVMCondition(hm, metav1.ConditionFalse, infrav1.StoppedForHostMaintenanceReason, "the VM stops to leave host "+host)
			return true, ctrl.Result{RequeueAfter: fallbackRequeue}, nil
		}
		strategy := kubevirtv1.VirtualMachineRunStrategy(vm.Annotations[naming.AnnotationRunStrategyBeforeStop])
		if strategy == "" || strategy == kubevirtv1.RunStrategyHalted {
			strategy = specRunStrategy(hm)
		}
		if err := vms.SetRunStrategy(ctx, vm, strategy, map[string]*string{
			naming.AnnotationStoppedForHost: nil, naming.AnnotationRunStrategyBeforeStop: nil,
		}); err != nil {
			return true, ctrl.Result{}, err
		}
		r.Recorder.Eventf(hm, nil, corev1.EventTypeNormal, "VirtualMachineRestarting", "HostMaintenance",
			"VM %s/%s stopped to leave host %s; starting it on another host", vm.Namespace, vm.Name, host)
		setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.RestartingReason, fmt.Sprintf("the VM starts again on a host other than %s", host))
		setVMCondition(hm, metav1.ConditionFalse, infrav1.StoppedForHostMaintenanceReason, "the VM starts again after leaving host "+host)
		return true, ctrl.Result{RequeueAfter: maintenanceRecheck}, nil
	}

	// Harvester halted the VM itself: forced maintenance stops at once every VM on the host it
	// cannot migrate, with no drain of the guest node. The provider starts it again elsewhere
	// (the host is cordoned by then) and keeps a MachineHealthCheck from replacing it meanwhile.
	if vmi == nil && vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted && hm.Status.VirtualMachine.Host != "" {
		host, err := vms.Host(ctx, hm.Status.VirtualMachine.Host)
		if err == nil && hostEmptying(host) != "" {
			if err := r.holdRemediation(ctx, s, false); err != nil {
				return true, ctrl.Result{}, err
			}
			strategy := kubevirtv1.VirtualMachineRunStrategy(vm.Annotations[annotationHarvesterRunStrategy])
			if strategy == "" || strategy == kubevirtv1.RunStrategyHalted {
				strategy = specRunStrategy(hm)
			}
			if err := vms.SetRunStrategy(ctx, vm, strategy, nil); err != nil {
				return true, ctrl.Result{}, err
			}
			r.Recorder.Eventf(hm, nil, corev1.EventTypeWarning, infrav1.HaltedByHarvesterReason, "HostMaintenance",
				"Harvester stopped VM %s/%s for %s without a drain of the guest node; starting it on another host", vm.Namespace, vm.Name, hostEmptying(host))
			setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.HaltedByHarvesterReason, fmt.Sprintf(
				"Harvester stopped the VM (%s) without a drain of the guest node: a forced maintenance stops every VM it cannot migrate; the VM starts again on another host", hostEmptying(host)))
			setVMCondition(hm, metav1.ConditionFalse, infrav1.StoppedForHostMaintenanceReason, "Harvester stopped the VM for its host's maintenance")
			return true, ctrl.Result{RequeueAfter: maintenanceRecheck}, nil
		}
	}

	if vmi != nil && vmi.Status.Phase == kubevirtv1.Running {
		why := ""
		if vmi.Status.EvacuationNodeName != "" && vmi.Status.EvacuationNodeName == vmi.Status.NodeName {
			why = fmt.Sprintf("an eviction from host %s asked KubeVirt to move the VM", vmi.Status.NodeName)
		} else if host, err := vms.Host(ctx, vmi.Status.NodeName); err == nil {
			why = hostEmptying(host)
		}
		migration := vmi.Status.MigrationState
		migrating := migration != nil && !migration.Completed && !migration.Failed
		migratable, notMigratable := harvester.LiveMigratable(vmi)
		switch {
		case migrating:
			setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.MigratingReason,
				fmt.Sprintf("the VM live-migrates from host %s to %s", migration.SourceNode, migration.TargetNode))
			return false, ctrl.Result{}, nil
		case why != "" && hm.Spec.EffectiveHostMaintenancePolicy() == infrav1.HostMaintenanceDrainAndRestart:
			// The VM runs (and the machine stays Ready) until its guest node is drained.
			stopped, res, err := r.drainAndStop(ctx, s, vms, vm, vmi.Status.NodeName, why)
			return stopped, res, err
		case why != "" && !migratable:
			setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.MigrationBlockedReason, fmt.Sprintf(
				"%s, but KubeVirt says the VM cannot live-migrate (%s): the host's drain waits for it; the machine's hostMaintenance.policy DrainAndRestart would drain the guest node and restart the VM elsewhere",
				why, notMigratable))
			return false, ctrl.Result{}, nil
		}
	}
	// Nothing moves: what the provider set for a move is undone once the guest node is back.
	if _, ok := s.machine.Annotations[MaintenanceAnnotation]; ok {
		back, poll, err := r.finishMaintenance(ctx, s, vmi)
		switch {
		case err != nil:
			return false, ctrl.Result{}, err
		case poll:
			return false, ctrl.Result{RequeueAfter: maintenanceRecheck}, nil
		case !back:
			return false, ctrl.Result{}, nil // the VMI's events bring the machine back
		}
	}
	setMaintenanceCondition(hm, metav1.ConditionFalse, infrav1.NoHostMaintenanceReason, "")
	return false, ctrl.Result{}, nil
}

// drainAndStop drains the guest node of a machine whose host is emptied (CAPI's drain, as for a
// Machine's deletion: PodDisruptionBudgets and MachineDrainRules apply), then stops its VM, at
// most as many machines of one pool at once as the pool allows. stopped is true once it asked
// for the VM to stop.
func (r *HarvesterMachineReconciler) drainAndStop(ctx context.Context, s *machineScope, vms vmService, vm *kubevirtv1.VirtualMachine, host, why string) (stopped bool, res ctrl.Result, err error) {
	hm := s.hm
	if _, started := s.machine.Annotations[MaintenanceAnnotation]; !started {
		free, msg, err := r.maintenanceSlotFree(ctx, s)
		if err != nil {
			return false, ctrl.Result{}, err
		}
		if !free {
			setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.WaitingForDrainLimitReason, why+"; "+msg)
			return false, ctrl.Result{RequeueAfter: maintenanceRecheck}, nil
		}
		r.Recorder.Eventf(hm, nil, corev1.EventTypeNormal, "DrainingNode", "HostMaintenance",
			"%s: draining the guest node, then restarting the VM on another host", why)
	}
	if err := r.holdRemediation(ctx, s, true); err != nil {
		return false, ctrl.Result{}, err
	}
	drained, msg, err := r.drainGuestNode(ctx, s)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if !drained {
		// The Machine's nodeDrainTimeoutSeconds bounds this drain as it bounds CAPI's own at a
		// deletion, and the manager's limit bounds it whatever the Machine says (a tenant's
		// PodDisruptionBudgets must not keep a Harvester host from its maintenance): past it the
		// VM stops with what is left on the node.
		c := conditions.Get(hm, infrav1.HostMaintenanceCondition)
		timeout := time.Duration(ptr.Deref(s.machine.Spec.Deletion.NodeDrainTimeoutSeconds, 0)) * time.Second
		if r.HostDrainTimeout > 0 && (timeout <= 0 || timeout > r.HostDrainTimeout) {
			timeout = r.HostDrainTimeout
		}
		if timeout <= 0 || c == nil || c.Reason != infrav1.DrainingNodeReason || time.Since(c.LastTransitionTime.Time) < timeout {
			setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.DrainingNodeReason, why+"; draining the guest node: "+msg)
			return false, ctrl.Result{RequeueAfter: maintenanceRecheck}, nil
		}
		r.Recorder.Eventf(hm, nil, corev1.EventTypeWarning, "DrainTimeout", "HostMaintenance",
			"The guest node's drain took longer than its limit (%s: the Machine's nodeDrainTimeoutSeconds, at most the manager's --host-maintenance-drain-timeout); stopping the VM with what is left: %s", timeout, msg)
	}
	before := string(specRunStrategy(hm))
	if vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted {
		before = string(*vm.Spec.RunStrategy)
	}
	if err := vms.SetRunStrategy(ctx, vm, kubevirtv1.RunStrategyHalted, map[string]*string{
		naming.AnnotationStoppedForHost: ptr.To(host), naming.AnnotationRunStrategyBeforeStop: ptr.To(before),
	}); err != nil {
		return false, ctrl.Result{}, err
	}
	r.Recorder.Eventf(hm, nil, corev1.EventTypeNormal, "VirtualMachineStopping", "HostMaintenance",
		"Guest node drained; stopping VM %s/%s to leave host %s", vm.Namespace, vm.Name, host)
	setMaintenanceCondition(hm, metav1.ConditionTrue, infrav1.StoppedForHostReason, fmt.Sprintf("%s; the guest node was drained and the VM stops to leave the host", why))
	setVMCondition(hm, metav1.ConditionFalse, infrav1.StoppedForHostMaintenanceReason, "the VM stops to leave host "+host)
	return true, ctrl.Result{RequeueAfter: fallbackRequeue}, nil
}

// holdRemediation marks the Machine as being moved off its host (MaintenanceAnnotation) and sets
// CAPI's skip-remediation annotation unless it is there, recording that it did.
func (r *HarvesterMachineReconciler) holdRemediation(ctx context.Context, s *machineScope, drain bool) error {
	m := s.machine
	if _, ok := m.Annotations[MaintenanceAnnotation]; ok {
		return nil
	}
	var did []string
	base := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	if _, ok := m.Annotations[clusterv1.MachineSkipRemediationAnnotation]; !ok {
		m.Annotations[clusterv1.MachineSkipRemediationAnnotation] = ""
		did = append(did, "skip-remediation")
	}
	if drain {
		did = append(did, "drain")
	}
	m.Annotations[MaintenanceAnnotation] = strings.Join(did, ",")
	return r.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// maintenanceSlotFree tells whether the machine may start its drain now: at most the
// MachineDeployment's maxUnavailable machines (at least one) of a deployment, and one
// control-plane machine, are moved off their hosts at once.
func (r *HarvesterMachineReconciler) maintenanceSlotFree(ctx context.Context, s *machineScope) (bool, string, error) {
	m := s.machine
	pool, limit := map[string]string{}, 1
	switch {
	case m.Labels[clusterv1.MachineDeploymentNameLabel] != "":
		name := m.Labels[clusterv1.MachineDeploymentNameLabel]
		pool[clusterv1.MachineDeploymentNameLabel] = name
		md := &clusterv1.MachineDeployment{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, md); err == nil {
			if ru := md.Spec.Rollout.Strategy.RollingUpdate; ru.MaxUnavailable != nil {
				n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(ptr.Deref(md.Spec.Replicas, 1)), false)
				if err == nil && n > limit {
					limit = n
				}
			}
		} else if !apierrors.IsNotFound(err) {
			return false, "", err
		}
	case m.Labels[clusterv1.MachineControlPlaneNameLabel] != "":
		pool[clusterv1.MachineControlPlaneNameLabel] = m.Labels[clusterv1.MachineControlPlaneNameLabel]
	default:
		return true, "", nil
	}
	pool[clusterv1.ClusterNameLabel] = m.Spec.ClusterName
	siblings := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, siblings, client.InNamespace(m.Namespace), client.MatchingLabels(pool)); err != nil {
		return false, "", err
	}
	var busy []string
	for i := range siblings.Items {
		if _, ok := siblings.Items[i].Annotations[MaintenanceAnnotation]; ok && siblings.Items[i].Name != m.Name {
			busy = append(busy, siblings.Items[i].Name)
		}
	}
	if len(busy) < limit {
		return true, "", nil
	}
	slices.Sort(busy)
	return false, fmt.Sprintf("waiting for %s, moved off their hosts now (at most %d of the pool at once)", strings.Join(busy, ", "), limit), nil
}

// drainGuestNode drains the machine's guest Node with CAPI's drain (cordon, then evictions that
// PodDisruptionBudgets may refuse). drained is true once nothing is left to evict; msg says what
// is left otherwise.
func (r *HarvesterMachineReconciler) drainGuestNode(ctx context.Context, s *machineScope) (drained bool, msg string, err error) {
	nodeName := s.machine.Status.NodeRef.Name
	if nodeName == "" || r.ClusterCache == nil {
		return true, "", nil // no node joined: nothing to drain
	}
	guest, err := r.ClusterCache.GetUncachedClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		return false, "the guest cluster's API is not reachable", nil
	}
	if err != nil {
		return false, "", err
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Node", nodeName))
	node := &corev1.Node{}
	if err := guest.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "", fmt.Errorf("reading guest node %s: %w", nodeName, err)
	}
	drainer := &drain.Helper{Client: r.Client, RemoteClient: guest, GracePeriodSeconds: -1}
	if !node.Spec.Unschedulable {
		if err := r.recordMaintenanceStep(ctx, s, "cordon"); err != nil {
			return false, "", err
		}
		if err := drainer.CordonNode(ctx, node); err != nil {
			return false, "", err
		}
	}
	pods, err := drainer.GetPodsForEviction(ctx, s.cluster, s.machine, nodeName)
	if err != nil {
		return false, "", err
	}
	if len(pods.Pods()) == 0 {
		return true, "", nil
	}
	result := drainer.EvictPods(ctx, pods)
	if result.DrainCompleted() {
		return true, "", nil
	}
	start := metav1.Now()
	if c := conditions.Get(s.hm, infrav1.HostMaintenanceCondition); c != nil && c.Reason == infrav1.DrainingNodeReason {
		start = c.LastTransitionTime
	}
	return false, result.ConditionMessage(start), nil
}

// recordMaintenanceStep adds step to what the Machine's MaintenanceAnnotation says the provider
// did, before it does it.
func (r *HarvesterMachineReconciler) recordMaintenanceStep(ctx context.Context, s *machineScope, step string) error {
	m := s.machine
	steps := strings.Split(m.Annotations[MaintenanceAnnotation], ",")
	if slices.Contains(steps, step) {
		return nil
	}
	base := m.DeepCopy()
	m.Annotations[MaintenanceAnnotation] = strings.Trim(strings.Join(append(steps, step), ","), ",")
	return r.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// finishMaintenance undoes what the provider set for a move once the VM runs and the guest node
// is Ready: it uncordons the node (if it cordoned it) and removes skip-remediation (if it set
// it). back is false while it waits; poll is true when it waits on the guest, whose Node is not
// watched (a VMI that is not running yet is: its events bring the machine back).
func (r *HarvesterMachineReconciler) finishMaintenance(ctx context.Context, s *machineScope, vmi *kubevirtv1.VirtualMachineInstance) (back, poll bool, err error) {
	m := s.machine
	steps := strings.Split(m.Annotations[MaintenanceAnnotation], ",")
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Running {
		setMaintenanceCondition(s.hm, metav1.ConditionTrue, infrav1.RestartingReason, "waiting for the VM to run again")
		return false, false, nil
	}
	if nodeName := m.Status.NodeRef.Name; nodeName != "" && r.ClusterCache != nil {
		guest, err := r.ClusterCache.GetUncachedClient(ctx, client.ObjectKeyFromObject(s.cluster))
		if errors.Is(err, clustercache.ErrClusterNotConnected) {
			setMaintenanceCondition(s.hm, metav1.ConditionTrue, infrav1.RestartingReason, "the VM runs; waiting for the guest cluster's API")
			return false, true, nil
		}
		if err != nil {
			return false, false, err
		}
		node := &corev1.Node{}
		if err := guest.Get(ctx, client.ObjectKey{Name: nodeName}, node); client.IgnoreNotFound(err) != nil {
			return false, false, err
		} else if err == nil {
			if !nodeIsReady(node) {
				setMaintenanceCondition(s.hm, metav1.ConditionTrue, infrav1.RestartingReason, fmt.Sprintf("the VM runs on host %s; waiting for guest node %s to be Ready", vmi.Status.NodeName, nodeName))
				return false, true, nil
			}
			if slices.Contains(steps, "cordon") && node.Spec.Unschedulable {
				base := node.DeepCopy()
				node.Spec.Unschedulable = false
				if err := guest.Patch(ctx, node, client.MergeFrom(base)); err != nil {
					return false, false, fmt.Errorf("uncordoning guest node %s: %w", nodeName, err)
				}
			}
		}
	}
	base := m.DeepCopy()
	delete(m.Annotations, MaintenanceAnnotation)
	if slices.Contains(steps, "skip-remediation") {
		delete(m.Annotations, clusterv1.MachineSkipRemediationAnnotation)
	}
	if err := r.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, false, err
	}
	r.Recorder.Eventf(s.hm, nil, corev1.EventTypeNormal, "HostMaintenanceDone", "HostMaintenance",
		"The VM runs on host %s and the guest node is Ready again", vmi.Status.NodeName)
	return true, false, nil
}

func nodeIsReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// specRunStrategy is the run strategy the machine's VM is made with.
func specRunStrategy(hm *infrav1.HarvesterMachine) kubevirtv1.VirtualMachineRunStrategy {
	if hm.Spec.RunStrategy == "" {
		return kubevirtv1.RunStrategyRerunOnFailure
	}
	return kubevirtv1.VirtualMachineRunStrategy(hm.Spec.RunStrategy)
}

func setMaintenanceCondition(hm *infrav1.HarvesterMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hm, metav1.Condition{
		Type: infrav1.HostMaintenanceCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: hm.Generation,
	})
}
