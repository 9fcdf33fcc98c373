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
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// schedule picks the host a VMI's virt-launcher pod would land on, as kube-scheduler does for
// the constraints guest-cluster VMs use: node selector, required and preferred node affinity,
// required and preferred pod anti-affinity against other VMIs (by label and topology key), and
// cordoned or NotReady hosts. Ties go to the least loaded host, then by name. exclude names a
// host that must not be chosen (the source of a migration).
func schedule(vmi *kubevirtv1.VirtualMachineInstance, nodes []corev1.Node, others []kubevirtv1.VirtualMachineInstance, exclude string) (string, error) {
	affinity := vmi.Spec.Affinity
	var best string
	bestScore, bestLoad := 0, 0
	var refused []string
	for i := range nodes {
		node := &nodes[i]
		if node.Name == exclude {
			continue
		}
		if reason := unfit(vmi, node, nodes, others); reason != "" {
			refused = append(refused, node.Name+": "+reason)
			continue
		}
		score := 0
		if affinity != nil && affinity.NodeAffinity != nil {
			for _, term := range affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if matchesNodeSelectorTerm(node, term.Preference) {
					score += int(term.Weight)
				}
			}
		}
		if affinity != nil && affinity.PodAntiAffinity != nil {
			for _, term := range affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if colocated(vmi, node, nodes, others, term.PodAffinityTerm) {
					score -= int(term.Weight)
				}
			}
		}
		load := 0
		for j := range others {
			if others[j].Status.NodeName == node.Name {
				load++
			}
		}
		if best == "" || score > bestScore || (score == bestScore && load < bestLoad) {
			best, bestScore, bestLoad = node.Name, score, load
		}
	}
	if best == "" {
		slices.Sort(refused)
		return "", fmt.Errorf("0/%d nodes are available: %s", len(nodes), strings.Join(refused, "; "))
	}
	return best, nil
}

// unfit says why a host cannot take the VMI, or "".
func unfit(vmi *kubevirtv1.VirtualMachineInstance, node *corev1.Node, nodes []corev1.Node, others []kubevirtv1.VirtualMachineInstance) string {
	if node.Spec.Unschedulable {
		return "node is cordoned"
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "node is not ready"
	}
	// A taint that keeps pods off (a host's drain: kubevirt.io/drain, for one) and that the VMI,
	// whose tolerations its launcher pod gets, does not tolerate.
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(vmi.Spec.Tolerations, func(t corev1.Toleration) bool { return tolerates(t, taint) }) {
			return fmt.Sprintf("node had untolerated taint {%s: %s}", taint.Key, taint.Value)
		}
	}
	for k, v := range vmi.Spec.NodeSelector {
		if node.Labels[k] != v {
			return "node selector does not match"
		}
	}
	// KubeVirt's virt-controller gives the launcher pod of a VMI with dedicated CPUs the node
	// selector cpumanager=true.
	if cpu := vmi.Spec.Domain.CPU; cpu != nil && cpu.DedicatedCPUPlacement && node.Labels[LabelCPUManager] != "true" {
		return "node selector does not match (cpumanager=true: dedicated CPUs need the host's CPU manager)"
	}
	if reason := missingDevices(vmi, node, others); reason != "" {
		return reason
	}
	affinity := vmi.Spec.Affinity
	if affinity == nil {
		return ""
	}
	if na := affinity.NodeAffinity; na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		matched := false
		for _, term := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if matchesNodeSelectorTerm(node, term) {
				matched = true
				break
			}
		}
		if !matched {
			return "node affinity does not match"
		}
	}
	if pa := affinity.PodAntiAffinity; pa != nil {
		for _, term := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			if colocated(vmi, node, nodes, others, term) {
				return "pod anti-affinity forbids it"
			}
		}
	}
	return ""
}

// tolerates is a toleration's match of a taint: the same key (or none, with Exists), the same
// value (or Exists), the same effect (or none).
func tolerates(t corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	if t.Operator == corev1.TolerationOpExists {
		return true
	}
	return t.Key != "" && t.Value == taint.Value
}

// colocated tells whether a VMI matching the term runs in the same topology domain as node.
func colocated(vmi *kubevirtv1.VirtualMachineInstance, node *corev1.Node, nodes []corev1.Node, others []kubevirtv1.VirtualMachineInstance, term corev1.PodAffinityTerm) bool {
	domain, ok := node.Labels[term.TopologyKey]
	if !ok {
		return false
	}
	selector, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return false
	}
	namespaces := term.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{vmi.Namespace}
	}
	hostDomain := map[string]string{}
	for i := range nodes {
		if v, ok := nodes[i].Labels[term.TopologyKey]; ok {
			hostDomain[nodes[i].Name] = v
		}
	}
	for i := range others {
		o := &others[i]
		if o.UID == vmi.UID || o.Status.NodeName == "" || o.DeletionTimestamp != nil {
			continue
		}
		if !slices.Contains(namespaces, o.Namespace) || !selector.Matches(labels.Set(o.Labels)) {
			continue
		}
		if d, ok := hostDomain[o.Status.NodeName]; ok && d == domain {
			return true
		}
	}
	return false
}

func matchesNodeSelectorTerm(node *corev1.Node, term corev1.NodeSelectorTerm) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false // an empty term matches nothing, as in kube-scheduler
	}
	for _, req := range term.MatchExpressions {
		if !matchesRequirement(node.Labels, req) {
			return false
		}
	}
	for _, req := range term.MatchFields {
		if req.Key != "metadata.name" || !matchesRequirement(map[string]string{"metadata.name": node.Name}, req) {
			return false
		}
	}
	return true
}

func matchesRequirement(set map[string]string, req corev1.NodeSelectorRequirement) bool {
	value, exists := set[req.Key]
	switch req.Operator {
	case corev1.NodeSelectorOpIn:
		return exists && slices.Contains(req.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !exists || !slices.Contains(req.Values, value)
	case corev1.NodeSelectorOpExists:
		return exists
	case corev1.NodeSelectorOpDoesNotExist:
		return !exists
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !exists || len(req.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(req.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if req.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// missingDevices says which device resources a host lacks for the VMI, or "". KubeVirt asks for
// one of a hostDevice's or gpu's deviceName in the virt-launcher pod; kube-scheduler then places
// it only where the node's allocatable, less what the pods already there use, covers it.
func missingDevices(vmi *kubevirtv1.VirtualMachineInstance, node *corev1.Node, others []kubevirtv1.VirtualMachineInstance) string {
	wanted := deviceRequests(vmi)
	if len(wanted) == 0 {
		return ""
	}
	used := map[string]int64{}
	for i := range others {
		o := &others[i]
		if o.UID == vmi.UID || o.Status.NodeName != node.Name || o.DeletionTimestamp != nil {
			continue
		}
		for name, n := range deviceRequests(o) {
			used[name] += n
		}
	}
	names := make([]string, 0, len(wanted))
	for name := range wanted {
		names = append(names, name)
	}
	slices.Sort(names)
	var missing []string
	for _, name := range names {
		allocatable := node.Status.Allocatable[corev1.ResourceName(name)]
		if allocatable.Value()-used[name] < wanted[name] {
			missing = append(missing, "Insufficient "+name) // kube-scheduler's words
		}
	}
	return strings.Join(missing, ", ")
}

func deviceRequests(vmi *kubevirtv1.VirtualMachineInstance) map[string]int64 {
	out := map[string]int64{}
	for _, d := range vmi.Spec.Domain.Devices.HostDevices {
		out[d.DeviceName]++
	}
	for _, d := range vmi.Spec.Domain.Devices.GPUs {
		out[d.DeviceName]++
	}
	return out
}
