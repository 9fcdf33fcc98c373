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

package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Long steps (a control plane coming up, machines provisioned with their Nodes, a rollout or an
// upgrade, a deletion) take as long as the machine's load makes them: on a busy 2-core machine
// several times what they take alone. waitProgressing bounds them by their progress rather than
// by a time that holds on an idle machine only.
const (
	// progressStall is how long a step may show no change before its wait fails. Some steps wait
	// on a controller's retry rather than on an event: Cluster API's controllers retry a failed
	// reconcile with a per-object backoff that doubles with each failure (from 5 ms: after
	// sixteen failures while its guest came up, a ClusterResourceSet waits almost three minutes
	// for its next try unless an event comes first), and a loaded machine makes more of them fail. 4 minutes covers such a retry, not a stuck step.
	progressStall = 4 * time.Minute
	// progressCap bounds a step that keeps changing but never gets there.
	progressCap = 15 * time.Minute
)

// waitProgressing waits for what: it polls check every 100 ms, as Eventually does, until it
// passes, and looks every second at state, a short description of where the step stands (the
// objects' phases, conditions and counts). It fails when state has not changed for
// progressStall, or after progressCap, with check's last failure and the last state it saw.
func waitProgressing(what string, state func() string, check func(g Gomega)) {
	GinkgoHelper()
	start := time.Now()
	mark := testenv.InProcessErrorsMark()
	var seen string
	var changed, looked time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		failure, passed := attempt(check)
		if passed {
			return
		}
		if time.Since(looked) >= time.Second {
			looked = time.Now()
			if now := state(); now != seen || changed.IsZero() {
				seen, changed = now, looked
			}
		}
		why := ""
		if time.Since(changed) >= progressStall {
			why = fmt.Sprintf("nothing changed for %s", progressStall)
		} else if time.Since(start) >= progressCap {
			why = fmt.Sprintf("still not there after %s", progressCap)
		}
		if why != "" {
			Fail(fmt.Sprintf("Waiting for %s: %s (%s in all).\nThe last check failed with:\n%s\nWhere it stood:\n%s\nErrors the in-process Cluster API controllers logged meanwhile (the last 20):\n%s",
				what, why, time.Since(start).Round(time.Second), failure, seen, strings.Join(testenv.InProcessErrorsSince(mark, 20), "\n")))
		}
		<-tick.C
	}
}

// checkFailure stops a check at its first failed assertion, as Eventually's Gomega does.
type checkFailure struct{ message string }

// attempt runs check once and returns the message of its first failed assertion.
func attempt(check func(g Gomega)) (failure string, passed bool) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(checkFailure)
			if !ok {
				panic(r)
			}
			failure = f.message
		}
	}()
	check(NewGomega(func(message string, _ ...int) { panic(checkFailure{message}) }))
	return "", true
}

// clusterState says where a cluster of management cluster c stands, for waitProgressing: its
// Cluster, HarvesterCluster, Machines and HarvesterMachines (their conditions that are not true),
// and its guest's Nodes.
func clusterState(c client.Client, namespace, name string) func() string {
	return func() string {
		return describeClusterIn(c, namespace, name) + describeMachinesIn(c, namespace, name) +
			describeHarvesterMachinesIn(c, namespace, name) + describeAddonsIn(c, namespace, name) + describeGuest(namespace, name)
	}
}

// state is clusterState of a test cluster.
func (tc *testCluster) state() string { return clusterState(mgmt(), tc.Namespace, tc.Name)() }

// describeHarvesterMachinesIn says, a line each, where a cluster's HarvesterMachines stand.
func describeHarvesterMachinesIn(c client.Client, namespace, name string) string {
	hms := &infrav1.HarvesterMachineList{}
	if err := c.List(ctx, hms, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return err.Error() + "\n"
	}
	out := ""
	for _, hm := range hms.Items {
		out += fmt.Sprintf("harvestermachine %s provisioned %v deleting %v vm %q on %q", hm.Name,
			ptr.Deref(hm.Status.Initialization.Provisioned, false), hm.DeletionTimestamp != nil, hm.Status.VirtualMachine.Name, hm.Status.VirtualMachine.Host)
		for _, c := range hm.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				out += fmt.Sprintf("; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		out += "\n"
	}
	return out
}

// describeGuest says which Nodes the guest of the Cluster namespace/name has.
func describeGuest(namespace, name string) string {
	gc := testBed.Guest(namespace, name)
	if gc == nil {
		return "no guest control plane\n"
	}
	nodes := &corev1.NodeList{}
	if err := gc.Env.Client.List(ctx, nodes); err != nil {
		return "guest: " + err.Error() + "\n"
	}
	out := fmt.Sprintf("guest: %d nodes", len(nodes.Items))
	for _, n := range nodes.Items {
		var taints []string
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.Key)
		}
		out += fmt.Sprintf("; %s providerID %q taints %v", n.Name, n.Spec.ProviderID, taints)
	}
	// What the guest's own controllers have got to: the addons' workloads and their pods (the
	// CCM initialises the Nodes once its pod is scheduled and runs).
	out += fmt.Sprintf("\nguest: our CCM running %v", gc.CCMRunning())
	if err := gc.CCMErr(); err != nil {
		out += fmt.Sprintf(" (%v)", err)
	}
	deployments := &appsv1.DeploymentList{}
	if err := gc.Env.Client.List(ctx, deployments, client.InNamespace(metav1.NamespaceSystem)); err == nil {
		for _, d := range deployments.Items {
			out += fmt.Sprintf("; deployment %s %d/%d ready", d.Name, d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 1))
		}
	}
	pods := &corev1.PodList{}
	if err := gc.Env.Client.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem)); err == nil {
		for _, p := range pods.Items {
			out += fmt.Sprintf("; pod %s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
	return out + "\n"
}

// describeAddonsIn says which ClusterResourceSets CAPI has applied to the Cluster namespace/name
// (its ClusterResourceSetBinding, named after the Cluster), resource by resource: the guest's
// addons, our CCM among them, come that way.
func describeAddonsIn(c client.Client, namespace, name string) string {
	binding := &addonsv1.ClusterResourceSetBinding{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, binding); err != nil {
		return "addons: " + err.Error() + "\n"
	}
	out := "addons:"
	for _, b := range binding.Spec.Bindings {
		out += " " + b.ClusterResourceSetName + "["
		for _, r := range b.Resources {
			out += fmt.Sprintf(" %s/%s applied %v", r.Kind, r.Name, ptr.Deref(r.Applied, false))
		}
		out += " ]"
	}
	return out + "\n"
}
