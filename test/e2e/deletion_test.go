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
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// provisionedMachines waits until n HarvesterMachines of the cluster are provisioned.
func (tc *testCluster) provisionedMachines(n int) []infrav1.HarvesterMachine {
	GinkgoHelper()
	hms := &infrav1.HarvesterMachineList{}
	waitProgressing(fmt.Sprintf("%d provisioned HarvesterMachines", n), tc.state, func(g Gomega) {
		g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: tc.Name})).To(Succeed())
		g.Expect(hms.Items).To(HaveLen(n), "HarvesterMachines")
		for _, hm := range hms.Items {
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%s: %v", hm.Name, hm.Status.Conditions)
		}
	})
	return hms.Items
}

var _ = Describe("Deletion in any order", func() {
	It("leaves nothing on Harvester when the whole manifest is deleted at once", func() {
		machines := chaosInt("CHAOS_DELETE_MACHINES", 2) // make chaos: 30
		tc := newTestCluster("delete-all", "delete-all")
		md := tc.machineDeployment("workers", "workers", int32(machines), machineSpec())
		tc.provisionedMachines(machines)
		dups := duplicateVMs(tc.Target)
		Expect(dups).To(BeZero())

		By("deleting every object of the manifest at the same moment, as kubectl delete -f or a GitOps prune does")
		objs := []client.Object{
			tc.Cluster, tc.HarvesterCluster, md, tc.Bootstrap,
			&infrav1.HarvesterMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: "workers"}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: tc.Name + "-identity"}},
		}
		deleted := time.Now()
		var wg sync.WaitGroup
		for _, obj := range objs {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				Expect(client.IgnoreNotFound(mgmt().Delete(ctx, obj))).To(Succeed())
			}()
		}
		wg.Wait()
		waitProgressing("every object of the manifest deleted", tc.state, func(g Gomega) {
			for _, obj := range objs {
				err := mgmt().Get(ctx, client.ObjectKeyFromObject(obj), obj)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s is still there", obj, obj.GetName())
			}
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(hms.Items).To(BeEmpty())
		})
		leakFree(tc.Target)
		recordChaos(chaosRow{scenario: "whole manifest deleted at once", runs: 1, machines: machines, duplicates: dups,
			recovery: time.Since(deleted), recoveryMeasuredFrom: "delete -> nothing left on Harvester"})
	})

	It("holds a HarvesterCluster deleted alone while its Cluster and machines live, and finishes once the Cluster is deleted", func() {
		tc := newTestCluster("delete-hc-first", "delete-hc-first")
		tc.machineDeployment("workers", "workers", 1, machineSpec())
		hm := tc.provisionedMachines(1)[0]

		Expect(mgmt().Delete(ctx, tc.HarvesterCluster)).To(Succeed())
		hc := tc.HarvesterCluster
		Eventually(func(g Gomega) {
			c := conditionOf(g, hc, clusterv1.DeletingCondition)
			g.Expect(c.Reason).To(Equal(infrav1.WaitingForMachinesDeletionReason))
			g.Expect(c.Message).To(ContainSubstring(hm.Name))
			g.Expect(c.Message).To(ContainSubstring("delete the Cluster"))
		}).Should(Succeed())
		By("deleting no VM behind CAPI's back")
		Consistently(func() error {
			return harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Name}, &kubevirtv1.VirtualMachine{})
		}, 3*time.Second).Should(Succeed())

		deleteCluster(tc)
		Expect(apierrors.IsNotFound(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc))).To(BeTrue())
		leakFree(tc.Target)
	})
})

var _ = Describe("Deletion while Harvester is unreachable", func() {
	It("waits, says why, and finishes cleanly once Harvester is back", func() {
		tc := newTestCluster("delete-offline", "delete-offline")
		tc.machineDeployment("workers", "workers", 1, machineSpec())
		tc.provisionedMachines(1)

		Expect(testBed.Harvester.StopAPI()).To(Succeed())
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				Expect(testBed.Harvester.StartAPI(ctx)).To(Succeed())
			}
		})
		Expect(mgmt().Delete(ctx, tc.Cluster)).To(Succeed())
		By("holding the cluster, with a condition that says Harvester does not answer")
		Eventually(func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(1))
			c := conditions.Get(&hms.Items[0], infrav1.VirtualMachineReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.HarvesterUnreachableReason))
		}).Should(Succeed())
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed(), "nothing is dropped while Harvester is away")

		By("finishing once Harvester answers again")
		Expect(testBed.Harvester.StartAPI(ctx)).To(Succeed())
		restarted = true
		back := time.Now()
		clusterGone(mgmt(), tc.Namespace, tc.Name)
		leakFree(tc.Target)
		recordChaos(chaosRow{scenario: "Harvester unreachable during deletion", runs: 1, machines: 1,
			recovery: time.Since(back), recoveryMeasuredFrom: "Harvester back -> nothing left"})
	})
})

var _ = Describe("A provisioned machine's VM deleted outside the provider", func() {
	It("is a terminal failure that a MachineHealthCheck remediates with a new machine, never a VM re-made under the old name", func() {
		tc := newTestCluster("vm-gone", "vm-gone")
		tc.controlPlaneMachine("vm-gone-cp-0")
		tc.machineDeployment("workers", "workers", 1, machineSpec())
		var old infrav1.HarvesterMachine
		waitProgressing("the worker provisioned", tc.state, func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace), client.MatchingLabels{"pool": "workers"})).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(1))
			g.Expect(hms.Items[0].Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
			old = hms.Items[0]
		})

		By("deleting its VM on Harvester behind the provider's back")
		vmKey := client.ObjectKey{Namespace: tc.Target, Name: old.Status.VirtualMachine.Name}
		Expect(harvesterClient().Delete(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: vmKey.Namespace, Name: vmKey.Name}})).To(Succeed())

		By("reporting it as terminal: a condition and a warning event")
		// The MachineHealthCheck comes after: with it in place, the instance's end (which KubeVirt
		// brings before the VM's) can make the machine unhealthy, and remediated, before the
		// provider sees the VM gone, as a loaded machine showed.
		Eventually(func(g Gomega) {
			hm := &infrav1.HarvesterMachine{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(&old), hm)).To(Succeed())
			g.Expect(conditions.GetReason(hm, infrav1.VirtualMachineReadyCondition)).To(Equal(infrav1.VMDeletedReason))
			events := &corev1.EventList{}
			g.Expect(mgmt().List(ctx, events, client.InNamespace(tc.Namespace))).To(Succeed())
			// What was said of the old machine, one line each, so that a failure reads.
			var said []string
			for _, e := range events.Items {
				if e.InvolvedObject.Name == old.Name {
					said = append(said, fmt.Sprintf("%s %s %s: %s", e.InvolvedObject.Kind, e.Type, e.Reason, e.Message))
				}
			}
			g.Expect(said).To(ContainElement(HavePrefix("HarvesterMachine Warning VirtualMachineDeleted: ")))
		}).Should(Succeed())

		By("getting a new machine from a MachineHealthCheck on InfrastructureReady=False")
		Expect(mgmt().Create(ctx, &clusterv1.MachineHealthCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: "workers"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: tc.Name,
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers"}},
				Checks: clusterv1.MachineHealthCheckChecks{UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{{
					Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1),
				}}},
			},
		})).To(Succeed())
		waitProgressing("a new worker provisioned in place of the one whose VM was deleted", tc.state, func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace), client.MatchingLabels{"pool": "workers"})).To(Succeed())
			var replaced bool
			for _, hm := range hms.Items {
				if hm.Name != old.Name && ptr.Deref(hm.Status.Initialization.Provisioned, false) {
					replaced = true
				}
			}
			g.Expect(replaced).To(BeTrue())
		})
		Expect(apierrors.IsNotFound(harvesterClient().Get(ctx, vmKey, &kubevirtv1.VirtualMachine{}))).To(BeTrue(), "no VM under the old name")

		deleteCluster(tc)
		leakFree(tc.Target)
	})
})
