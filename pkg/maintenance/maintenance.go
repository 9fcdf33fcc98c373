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

// Package maintenance moves a machine's VM off a host Harvester empties (maintenance mode, an
// upgrade, a drain, a cordon): the guest node's drain with Cluster API's drain, the VM's stop and
// restart, the Machine's remediation hold, at most a pool's share of machines at once. It reads
// the machine and says what to report (the HostMaintenance condition, events); the reconciler
// sets them. docs/decisions/0007-host-maintenance.md has the facts of Harvester and KubeVirt it
// follows, docs/operations.md the user's side.
//
// Long file: one state machine read top to bottom.
package maintenance

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

// Annotation is on a Machine while the provider moves its VM off a host: its value lists what
// the provider did that it undoes once the guest node is back (`skip-remediation`: it set CAPI's
// skip-remediation annotation, so that a MachineHealthCheck leaves the machine alone while its
// node is down on purpose; `cordon`: it cordoned the guest node).
const Annotation = "harvester.infrastructure.cluster.x-k8s.io/host-maintenance"

// Harvester's own records on hosts and VMs that the provider reads.
const (
	// AnnotationMaintainStatus is the host's maintenance state (running, completed).
	AnnotationMaintainStatus = "harvesterhci.io/maintain-status"
	// annotationDrainRequested is set when maintenance mode is asked for, until the drain ends.
	annotationDrainRequested = "harvesterhci.io/drain-requested"
)

// DefaultDrainTimeout is --host-maintenance-drain-timeout's default: a guest's
// PodDisruptionBudgets (the tenant's to write) hold its VM on a host Harvester empties at most
// this long, whatever its Machines' nodeDrainTimeoutSeconds.
const DefaultDrainTimeout = 30 * time.Minute

// Recheck is how often a machine looks again while its guest node drains or comes back (the
// guest's pods and Node are not watched).
const Recheck = 5 * time.Second

// VMs is what a move asks of Harvester (VMService has it): the hosts, and the VM's run strategy.
type VMs interface {
	// Host reads a Harvester host (nil when there is none).
	Host(ctx context.Context, name string) (*corev1.Node, error)
	// SetRunStrategy sets the VM's run strategy and the named annotations (nil: removed),
	// locked to vm's version.
	SetRunStrategy(ctx context.Context, vm *kubevirtv1.VirtualMachine, strategy kubevirtv1.VirtualMachineRunStrategy, annotations map[string]*string) error
}

// Guests gives a client of a guest cluster's API (Cluster API's ClusterCache has it).
type Guests interface {
	GetUncachedClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
}

// Service moves machines off hosts Harvester empties.
type Service struct {
	// Client reads and patches Machines, reads MachineDeployments and MachineDrainRules, on the
	// management cluster.
	Client client.Client
	// Guests reaches the guest nodes to drain; nil: no guest is reached (nothing to drain).
	Guests Guests
	// DrainTimeout is the longest a guest node's drain holds a VM on a host Harvester empties,
	// whatever the Machine's nodeDrainTimeoutSeconds (0: the Machine's alone).
	DrainTimeout time.Duration
}

// Machine is the machine a move reads: its HarvesterMachine, Machine (which the move patches),
// Cluster, VM and VMI (nil when there is none).
type Machine struct {
	HM      *infrav1.HarvesterMachine
	Machine *clusterv1.Machine
	Cluster *clusterv1.Cluster
	VM      *kubevirtv1.VirtualMachine
	VMI     *kubevirtv1.VirtualMachineInstance
}

// Condition is a condition's status, reason and message.
type Condition struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// Event is an event the controller records on the machine.
type Event struct{ Type, Reason, Note string }

// Report is where a machine's move stands. Handled is true when the reconcile ends here (the VM
// is held down or on its way back); RequeueAfter is when to look again (0: the VM's and VMI's
// events bring the machine back). HostMaintenance is the condition to set (nil: leave it),
// VirtualMachine the VirtualMachineReady condition while the move holds the VM down (nil: the
// VM's own). Events are recorded whatever the error.
type Report struct {
	Handled         bool
	RequeueAfter    time.Duration
	HostMaintenance *Condition
	VirtualMachine  *Condition
	Events          []Event
}

func (r *Report) maintenance(status metav1.ConditionStatus, reason, message string) {
	r.HostMaintenance = &Condition{Status: status, Reason: reason, Message: message}
}

func (r *Report) vmDown(message string) {
	r.VirtualMachine = &Condition{Status: metav1.ConditionFalse, Reason: infrav1.StoppedForHostMaintenanceReason, Message: message}
}

func (r *Report) eventf(eventType, reason, format string, args ...any) {
	r.Events = append(r.Events, Event{Type: eventType, Reason: reason, Note: fmt.Sprintf(format, args...)})
}

// HostEmptying says why Harvester empties host, "" when it does not.
func HostEmptying(host *corev1.Node) string {
	switch {
	case host == nil:
		return ""
	case host.Annotations[annotationDrainRequested] != "" || host.Annotations[AnnotationMaintainStatus] != "":
		return fmt.Sprintf("host %s enters maintenance mode", host.Name)
	case slices.ContainsFunc(host.Spec.Taints, func(t corev1.Taint) bool { return t.Key == transport.HostDrainTaint }):
		return fmt.Sprintf("host %s is being emptied for an upgrade (taint %s)", host.Name, transport.HostDrainTaint)
	case host.Spec.Unschedulable:
		return fmt.Sprintf("host %s is cordoned", host.Name)
	}
	return ""
}

// Reconcile moves a machine's VM off a host Harvester empties, as the machine's host
// maintenance policy says, and reports it. It patches the Machine's annotations, the VM's run
// strategy and the guest node's cordon; it reads m.HM and never changes it.
func (s *Service) Reconcile(ctx context.Context, vms VMs, m Machine) (Report, error) {
	var rep Report
	err := s.reconcile(ctx, &rep, vms, m)
	return rep, err
}

func (s *Service) reconcile(ctx context.Context, rep *Report, vms VMs, m Machine) error {
	hm, vm, vmi := m.HM, m.VM, m.VMI
	// A VM the provider stopped for its host starts again once its instance is gone.
	if host := vm.Annotations[naming.AnnotationStoppedForHost]; host != "" {
		rep.Handled = true
		if vmi != nil {
			rep.maintenance(metav1.ConditionTrue, infrav1.StoppedForHostReason,
				fmt.Sprintf("the guest node was drained; the VM stops to leave host %s", host))
			rep.vmDown("the VM stops to leave host " + host)
			return nil
		}
		strategy := kubevirtv1.VirtualMachineRunStrategy(vm.Annotations[naming.AnnotationRunStrategyBeforeStop])
		if strategy == "" || strategy == kubevirtv1.RunStrategyHalted {
			strategy = SpecRunStrategy(hm)
		}
		if err := vms.SetRunStrategy(ctx, vm, strategy, map[string]*string{
			naming.AnnotationStoppedForHost: nil, naming.AnnotationRunStrategyBeforeStop: nil,
		}); err != nil {
			return err
		}
		rep.eventf(corev1.EventTypeNormal, "VirtualMachineRestarting",
			"VM %s/%s stopped to leave host %s; starting it on another host", vm.Namespace, vm.Name, host)
		rep.maintenance(metav1.ConditionTrue, infrav1.RestartingReason, fmt.Sprintf("the VM starts again on a host other than %s", host))
		rep.vmDown("the VM starts again after leaving host " + host)
		rep.RequeueAfter = Recheck
		return nil
	}

	// Harvester halted the VM itself: forced maintenance stops at once every VM on the host it
	// cannot migrate, with no drain of the guest node. The provider starts it again elsewhere
	// (the host is cordoned by then) and keeps a MachineHealthCheck from replacing it meanwhile.
	if vmi == nil && vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted && hm.Status.VirtualMachine.Host != "" {
		host, err := vms.Host(ctx, hm.Status.VirtualMachine.Host)
		if why := HostEmptying(host); err == nil && why != "" {
			rep.Handled = true
			if err := s.holdRemediation(ctx, m.Machine, false); err != nil {
				return err
			}
			strategy := kubevirtv1.VirtualMachineRunStrategy(vm.Annotations[naming.AnnotationHarvesterRunStrategy])
			if strategy == "" || strategy == kubevirtv1.RunStrategyHalted {
				strategy = SpecRunStrategy(hm)
			}
			if err := vms.SetRunStrategy(ctx, vm, strategy, nil); err != nil {
				return err
			}
			rep.eventf(corev1.EventTypeWarning, infrav1.HaltedByHarvesterReason,
				"Harvester stopped VM %s/%s for %s without a drain of the guest node; starting it on another host", vm.Namespace, vm.Name, why)
			rep.maintenance(metav1.ConditionTrue, infrav1.HaltedByHarvesterReason, fmt.Sprintf(
				"Harvester stopped the VM (%s) without a drain of the guest node: a forced maintenance stops every VM it cannot migrate; the VM starts again on another host", why))
			rep.vmDown("Harvester stopped the VM for its host's maintenance")
			rep.RequeueAfter = Recheck
			return nil
		}
	}

	if vmi != nil && vmi.Status.Phase == kubevirtv1.Running {
		why := ""
		if vmi.Status.EvacuationNodeName != "" && vmi.Status.EvacuationNodeName == vmi.Status.NodeName {
			why = fmt.Sprintf("an eviction from host %s asked KubeVirt to move the VM", vmi.Status.NodeName)
		} else if host, err := vms.Host(ctx, vmi.Status.NodeName); err == nil {
			why = HostEmptying(host)
		}
		migration := vmi.Status.MigrationState
		migrating := migration != nil && !migration.Completed && !migration.Failed
		migratable, notMigratable := harvester.LiveMigratable(vmi)
		switch {
		case migrating:
			rep.maintenance(metav1.ConditionTrue, infrav1.MigratingReason,
				fmt.Sprintf("the VM live-migrates from host %s to %s", migration.SourceNode, migration.TargetNode))
			return nil
		case why != "" && hm.Spec.EffectiveHostMaintenancePolicy() == infrav1.HostMaintenanceDrainAndRestart:
			// The VM runs (and the machine stays Ready) until its guest node is drained.
			return s.drainAndStop(ctx, rep, vms, m, vmi.Status.NodeName, why)
		case why != "" && !migratable:
			rep.maintenance(metav1.ConditionTrue, infrav1.MigrationBlockedReason, fmt.Sprintf(
				"%s, but KubeVirt says the VM cannot live-migrate (%s): the host's drain waits for it; the machine's hostMaintenance.policy DrainAndRestart would drain the guest node and restart the VM elsewhere",
				why, notMigratable))
			return nil
		}
	}
	// Nothing moves: what the provider set for a move is undone once the guest node is back.
	if _, ok := m.Machine.Annotations[Annotation]; ok {
		back, err := s.finish(ctx, rep, m)
		if err != nil || !back {
			return err
		}
	}
	rep.maintenance(metav1.ConditionFalse, infrav1.NoHostMaintenanceReason, "")
	return nil
}

// drainAndStop drains the guest node of a machine whose host is emptied (CAPI's drain, as for a
// Machine's deletion: PodDisruptionBudgets and MachineDrainRules apply), then stops its VM, at
// most as many machines of one pool at once as the pool allows. The report is Handled once it
// asked for the VM to stop.
func (s *Service) drainAndStop(ctx context.Context, rep *Report, vms VMs, m Machine, host, why string) error {
	hm, vm := m.HM, m.VM
	if _, started := m.Machine.Annotations[Annotation]; !started {
		free, msg, err := s.slotFree(ctx, m.Machine)
		if err != nil {
			return err
		}
		if !free {
			rep.maintenance(metav1.ConditionTrue, infrav1.WaitingForDrainLimitReason, why+"; "+msg)
			rep.RequeueAfter = Recheck
			return nil
		}
		rep.eventf(corev1.EventTypeNormal, "DrainingNode", "%s: draining the guest node, then restarting the VM on another host", why)
	}
	if err := s.holdRemediation(ctx, m.Machine, true); err != nil {
		return err
	}
	drained, msg, err := s.drainGuestNode(ctx, m)
	if err != nil {
		return err
	}
	if !drained {
		// The Machine's nodeDrainTimeoutSeconds bounds this drain as it bounds CAPI's own at a
		// deletion, and the manager's limit bounds it whatever the Machine says (a tenant's
		// PodDisruptionBudgets must not keep a Harvester host from its maintenance): past it the
		// VM stops with what is left on the node.
		c := conditions.Get(hm, infrav1.HostMaintenanceCondition)
		timeout := time.Duration(ptr.Deref(m.Machine.Spec.Deletion.NodeDrainTimeoutSeconds, 0)) * time.Second
		if s.DrainTimeout > 0 && (timeout <= 0 || timeout > s.DrainTimeout) {
			timeout = s.DrainTimeout
		}
		if timeout <= 0 || c == nil || c.Reason != infrav1.DrainingNodeReason || time.Since(c.LastTransitionTime.Time) < timeout {
			rep.maintenance(metav1.ConditionTrue, infrav1.DrainingNodeReason, why+"; draining the guest node: "+msg)
			rep.RequeueAfter = Recheck
			return nil
		}
		rep.eventf(corev1.EventTypeWarning, "DrainTimeout",
			"The guest node's drain took longer than its limit (%s: the Machine's nodeDrainTimeoutSeconds, at most the manager's --host-maintenance-drain-timeout); stopping the VM with what is left: %s", timeout, msg)
	}
	before := string(SpecRunStrategy(hm))
	if vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted {
		before = string(*vm.Spec.RunStrategy)
	}
	if err := vms.SetRunStrategy(ctx, vm, kubevirtv1.RunStrategyHalted, map[string]*string{
		naming.AnnotationStoppedForHost: ptr.To(host), naming.AnnotationRunStrategyBeforeStop: ptr.To(before),
	}); err != nil {
		return err
	}
	rep.eventf(corev1.EventTypeNormal, "VirtualMachineStopping", "Guest node drained; stopping VM %s/%s to leave host %s", vm.Namespace, vm.Name, host)
	rep.maintenance(metav1.ConditionTrue, infrav1.StoppedForHostReason, fmt.Sprintf("%s; the guest node was drained and the VM stops to leave the host", why))
	rep.vmDown("the VM stops to leave host " + host)
	rep.Handled = true
	return nil
}

// holdRemediation marks the Machine as being moved off its host (Annotation) and sets CAPI's
// skip-remediation annotation unless it is there, recording that it did.
func (s *Service) holdRemediation(ctx context.Context, m *clusterv1.Machine, drain bool) error {
	if _, ok := m.Annotations[Annotation]; ok {
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
	m.Annotations[Annotation] = strings.Join(did, ",")
	return s.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// slotFree tells whether the machine may start its drain now: at most the MachineDeployment's
// maxUnavailable machines (at least one) of a deployment, and one control-plane machine, are
// moved off their hosts at once.
func (s *Service) slotFree(ctx context.Context, m *clusterv1.Machine) (bool, string, error) {
	pool, limit := map[string]string{}, 1
	switch {
	case m.Labels[clusterv1.MachineDeploymentNameLabel] != "":
		name := m.Labels[clusterv1.MachineDeploymentNameLabel]
		pool[clusterv1.MachineDeploymentNameLabel] = name
		md := &clusterv1.MachineDeployment{}
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, md); err == nil {
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
	if err := s.Client.List(ctx, siblings, client.InNamespace(m.Namespace), client.MatchingLabels(pool)); err != nil {
		return false, "", err
	}
	var busy []string
	for i := range siblings.Items {
		if _, ok := siblings.Items[i].Annotations[Annotation]; ok && siblings.Items[i].Name != m.Name {
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
func (s *Service) drainGuestNode(ctx context.Context, m Machine) (drained bool, msg string, err error) {
	nodeName := m.Machine.Status.NodeRef.Name
	if nodeName == "" || s.Guests == nil {
		return true, "", nil // no node joined: nothing to drain
	}
	guest, err := s.Guests.GetUncachedClient(ctx, client.ObjectKeyFromObject(m.Cluster))
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
	drainer := &drain.Helper{Client: s.Client, RemoteClient: guest, GracePeriodSeconds: -1}
	if !node.Spec.Unschedulable {
		if err := s.recordStep(ctx, m.Machine, "cordon"); err != nil {
			return false, "", err
		}
		if err := drainer.CordonNode(ctx, node); err != nil {
			return false, "", err
		}
	}
	pods, err := drainer.GetPodsForEviction(ctx, m.Cluster, m.Machine, nodeName)
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
	if c := conditions.Get(m.HM, infrav1.HostMaintenanceCondition); c != nil && c.Reason == infrav1.DrainingNodeReason {
		start = c.LastTransitionTime
	}
	return false, result.ConditionMessage(start), nil
}

// recordStep adds step to what the Machine's Annotation says the provider did, before it does
// it.
func (s *Service) recordStep(ctx context.Context, m *clusterv1.Machine, step string) error {
	steps := strings.Split(m.Annotations[Annotation], ",")
	if slices.Contains(steps, step) {
		return nil
	}
	base := m.DeepCopy()
	m.Annotations[Annotation] = strings.Trim(strings.Join(append(steps, step), ","), ",")
	return s.Client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// finish undoes what the provider set for a move once the VM runs and the guest node is Ready:
// it uncordons the node (if it cordoned it) and removes skip-remediation (if it set it). back is
// false while it waits, with the report saying on what (and a recheck when it waits on the
// guest, whose Node is not watched; a VMI that is not running yet is: its events bring the
// machine back).
func (s *Service) finish(ctx context.Context, rep *Report, m Machine) (back bool, err error) {
	machine, vmi := m.Machine, m.VMI
	steps := strings.Split(machine.Annotations[Annotation], ",")
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Running {
		rep.maintenance(metav1.ConditionTrue, infrav1.RestartingReason, "waiting for the VM to run again")
		return false, nil
	}
	if nodeName := machine.Status.NodeRef.Name; nodeName != "" && s.Guests != nil {
		guest, err := s.Guests.GetUncachedClient(ctx, client.ObjectKeyFromObject(m.Cluster))
		if errors.Is(err, clustercache.ErrClusterNotConnected) {
			rep.maintenance(metav1.ConditionTrue, infrav1.RestartingReason, "the VM runs; waiting for the guest cluster's API")
			rep.RequeueAfter = Recheck
			return false, nil
		}
		if err != nil {
			return false, err
		}
		node := &corev1.Node{}
		if err := guest.Get(ctx, client.ObjectKey{Name: nodeName}, node); client.IgnoreNotFound(err) != nil {
			return false, err
		} else if err == nil {
			if !nodeIsReady(node) {
				rep.maintenance(metav1.ConditionTrue, infrav1.RestartingReason, fmt.Sprintf("the VM runs on host %s; waiting for guest node %s to be Ready", vmi.Status.NodeName, nodeName))
				rep.RequeueAfter = Recheck
				return false, nil
			}
			if slices.Contains(steps, "cordon") && node.Spec.Unschedulable {
				base := node.DeepCopy()
				node.Spec.Unschedulable = false
				if err := guest.Patch(ctx, node, client.MergeFrom(base)); err != nil {
					return false, fmt.Errorf("uncordoning guest node %s: %w", nodeName, err)
				}
			}
		}
	}
	base := machine.DeepCopy()
	delete(machine.Annotations, Annotation)
	if slices.Contains(steps, "skip-remediation") {
		delete(machine.Annotations, clusterv1.MachineSkipRemediationAnnotation)
	}
	if err := s.Client.Patch(ctx, machine, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, err
	}
	rep.eventf(corev1.EventTypeNormal, "HostMaintenanceDone", "The VM runs on host %s and the guest node is Ready again", vmi.Status.NodeName)
	return true, nil
}

func nodeIsReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SpecRunStrategy is the run strategy the machine's VM is made with.
func SpecRunStrategy(hm *infrav1.HarvesterMachine) kubevirtv1.VirtualMachineRunStrategy {
	if hm.Spec.RunStrategy == "" {
		return kubevirtv1.RunStrategyRerunOnFailure
	}
	return kubevirtv1.VirtualMachineRunStrategy(hm.Spec.RunStrategy)
}
