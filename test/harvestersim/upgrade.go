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
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TaintDrain is the taint a Harvester upgrade puts on the host it upgrades: KubeVirt's node
// drain taint, on which KubeVirt's evacuation controller migrates every VMI it can off the host.
const TaintDrain = "kubevirt.io/drain"

// UpgradeHost plays what a Harvester upgrade does to one host, in the order of Harvester's
// package/upgrade/upgrade_node.sh and Rancher's drain between its steps; the VMs' moves are
// KubeVirt's and Harvester's own controllers' (and the provider's) doing:
//  1. pre-drain: Harvester's live-migration detector stops the VMs that cannot leave the host:
//     those with a nodeSelector or host devices, or whose required node affinity no other
//     schedulable host meets (on a single host, every VM);
//  2. pre-drain: the host is tainted kubevirt.io/drain=draining:NoSchedule, and the script waits,
//     without a time limit (the caller's ctx is one), until no VMI but a Succeeded one is on it;
//  3. Rancher cordons and drains the host (what is left: nothing of the VMs);
//  4. post-drain and reboot: the host's kubelet stops reporting for a moment, then the host is
//     Ready again, untainted and uncordoned.
//
// Harvester's restore of the stopped VMs (upgrade-config's restoreVM, off by default) is not
// played: they stay stopped, as they do on Harvester.
func (h *Harvester) UpgradeHost(ctx context.Context, host string) error {
	c := h.Env.Client
	if err := h.stopVMsThatCannotLeave(ctx, host); err != nil {
		return fmt.Errorf("pre-drain of host %s: %w", host, err)
	}
	if err := h.updateHost(ctx, host, func(n *corev1.Node) {
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintDrain }) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintDrain, Value: "draining", Effect: corev1.TaintEffectNoSchedule})
		}
	}); err != nil {
		return err
	}
	// wait_vms_out_or_shutdown: every 5 s on Harvester; more often here.
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		if err := c.List(ctx, vmis); err != nil {
			return false, err
		}
		return !slices.ContainsFunc(vmis.Items, func(v kubevirtv1.VirtualMachineInstance) bool {
			return v.Status.NodeName == host && v.Status.Phase != kubevirtv1.Succeeded
		}), nil
	}); err != nil {
		return fmt.Errorf("waiting for the VMs to leave host %s: %w", host, err)
	}
	if err := h.updateHost(ctx, host, func(n *corev1.Node) { n.Spec.Unschedulable = true }); err != nil {
		return err
	}
	if err := h.setHostReady(ctx, host, corev1.ConditionUnknown); err != nil {
		return err
	}
	if err := h.setHostReady(ctx, host, corev1.ConditionTrue); err != nil {
		return err
	}
	return h.updateHost(ctx, host, func(n *corev1.Node) {
		n.Spec.Unschedulable = false
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintDrain })
	})
}

// stopVMsThatCannotLeave is Harvester's vm-live-migrate-detector with --shutdown: it stops (as
// virtctl stop does: runStrategy Halted) the VMs on host with a nodeSelector, with host devices,
// or with no other Ready, schedulable host that their required node affinity allows. It does not
// look at vGPUs, KubeVirt's LiveMigratable condition or the VM's maintenance strategy.
func (h *Harvester) stopVMsThatCannotLeave(ctx context.Context, host string) error {
	c := h.Env.Client
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := c.List(ctx, vmis); err != nil {
		return err
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return err
	}
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		if vmi.Status.NodeName != host || vmi.IsFinal() {
			continue
		}
		if len(vmi.Spec.NodeSelector) == 0 && len(vmi.Spec.Domain.Devices.HostDevices) == 0 && otherHostAllows(vmi, host, nodes.Items) {
			continue
		}
		vm := &kubevirtv1.VirtualMachine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vm); err != nil {
			return client.IgnoreNotFound(err)
		}
		base := vm.DeepCopy()
		vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
		if err := c.Patch(ctx, vm, client.MergeFrom(base)); err != nil {
			return err
		}
	}
	return nil
}

// otherHostAllows tells whether a Ready, schedulable host other than host meets the VMI's
// required node affinity (any of its terms).
func otherHostAllows(vmi *kubevirtv1.VirtualMachineInstance, host string, nodes []corev1.Node) bool {
	var terms []corev1.NodeSelectorTerm
	if a := vmi.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Name == host || n.Spec.Unschedulable || !hostReady(n) {
			continue
		}
		if len(terms) == 0 || slices.ContainsFunc(terms, func(t corev1.NodeSelectorTerm) bool { return matchesNodeSelectorTerm(n, t) }) {
			return true
		}
	}
	return false
}

func hostReady(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

// updateHost changes a host's Node, retrying on conflicts with Harvester's controllers.
func (h *Harvester) updateHost(ctx context.Context, host string, change func(*corev1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := h.Env.Client.Get(ctx, client.ObjectKey{Name: host}, node); err != nil {
			return err
		}
		change(node)
		return h.Env.Client.Update(ctx, node)
	})
}

// setHostReady sets the host's Ready condition as its kubelet (True) or the node lifecycle
// controller once the kubelet stopped reporting (Unknown) would.
func (h *Harvester) setHostReady(ctx context.Context, host string, status corev1.ConditionStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := h.Env.Client.Get(ctx, client.ObjectKey{Name: host}, node); err != nil {
			return err
		}
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == corev1.NodeReady {
				node.Status.Conditions[i].Status = status
				node.Status.Conditions[i].LastHeartbeatTime = metav1.Now()
				node.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		return h.Env.Client.Status().Update(ctx, node)
	})
}
