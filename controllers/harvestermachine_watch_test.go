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
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// Only the VM and VMI updates that change what a machine's reconcile reads wake it.
func TestObservedChangePassesWhatTheReconcileReads(t *testing.T) {
	g := NewWithT(t)
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: map[string]string{"a": "b"}, ResourceVersion: "1"},
		Status: kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStarting}}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "m", ResourceVersion: "1"},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduled}}
	passes := func(old, changed client.Object) bool {
		return observedChange.Update(event.TypedUpdateEvent[client.Object]{ObjectOld: old, ObjectNew: changed})
	}

	for name, change := range map[string]func(*kubevirtv1.VirtualMachine){
		"annotations": func(v *kubevirtv1.VirtualMachine) { v.Annotations = map[string]string{"x": "y"} },
		"finalizers":  func(v *kubevirtv1.VirtualMachine) { v.Finalizers = []string{"kubevirt.io/x"} },
		"volume requests": func(v *kubevirtv1.VirtualMachine) {
			v.Status.VolumeRequests = []kubevirtv1.VirtualMachineVolumeRequest{{}}
		},
	} {
		changed := vm.DeepCopy()
		changed.ResourceVersion = "2"
		change(changed)
		g.Expect(passes(vm, changed)).To(BeFalse(), "VM %s", name)
	}
	for name, change := range map[string]func(*kubevirtv1.VirtualMachine){
		"printable status": func(v *kubevirtv1.VirtualMachine) { v.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning },
		"labels":           func(v *kubevirtv1.VirtualMachine) { v.Labels = nil },
		"deletion":         func(v *kubevirtv1.VirtualMachine) { v.DeletionTimestamp = &metav1.Time{} },
		"restart required": func(v *kubevirtv1.VirtualMachine) {
			v.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineRestartRequired, Status: "True"}}
		},
	} {
		changed := vm.DeepCopy()
		change(changed)
		g.Expect(passes(vm, changed)).To(BeTrue(), "VM %s", name)
	}

	same := vmi.DeepCopy()
	same.ResourceVersion = "2"
	same.Annotations = map[string]string{"x": "y"}
	g.Expect(passes(vmi, same)).To(BeFalse(), "VMI metadata only")
	for name, change := range map[string]func(*kubevirtv1.VirtualMachineInstance){
		"phase": func(v *kubevirtv1.VirtualMachineInstance) { v.Status.Phase = kubevirtv1.Running },
		"host":  func(v *kubevirtv1.VirtualMachineInstance) { v.Status.NodeName = "host-2" },
		"addresses": func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.0.0.5"}}
		},
		"conditions": func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: "PodScheduled"}}
		},
		"CPU topology": func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.CurrentCPUTopology = &kubevirtv1.CPUTopology{Sockets: 3}
		},
		"memory": func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.Memory = &kubevirtv1.MemoryStatus{GuestRequested: ptr.To(resource.MustParse("6Gi"))}
		},
	} {
		changed := vmi.DeepCopy()
		change(changed)
		g.Expect(passes(vmi, changed)).To(BeTrue(), "VMI %s", name)
	}
}

// A HarvesterMachine's own status updates do not wake it; a Machine's or HarvesterCluster's wake the machines only when they change what
// the machines' reconciles read.
func TestMachineAndClusterUpdatesWakeMachinesOnlyForWhatTheyRead(t *testing.T) {
	g := NewWithT(t)
	update := func(p predicate.Funcs, old, changed client.Object) bool {
		return p.Update(event.TypedUpdateEvent[client.Object]{ObjectOld: old, ObjectNew: changed})
	}

	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1, ResourceVersion: "1"}}
	status := machine.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.Phase = "Provisioning"
	conditions.Set(status, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "x"})
	g.Expect(update(machineChangedForInfrastructure, machine, status)).To(BeFalse(), "Machine status")
	for name, change := range map[string]func(*clusterv1.Machine){
		"bootstrap data (spec)": func(m *clusterv1.Machine) { m.Generation = 2 },
		"labels":                func(m *clusterv1.Machine) { m.Labels = map[string]string{clusterv1.MachineControlPlaneLabel: ""} },
		"deletion":              func(m *clusterv1.Machine) { m.DeletionTimestamp = &metav1.Time{} },
	} {
		changed := machine.DeepCopy()
		change(changed)
		g.Expect(update(machineChangedForInfrastructure, machine, changed)).To(BeTrue(), "Machine %s", name)
	}

	hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1, ResourceVersion: "1"}}
	ownStatus := hm.DeepCopy()
	ownStatus.ResourceVersion = "2"
	ownStatus.Status.Initialization.Provisioned = ptr.To(true)
	g.Expect(update(ownStatusIgnored, hm, ownStatus)).To(BeFalse(), "HarvesterMachine status")
	lost := ownStatus.DeepCopy()
	lost.ResourceVersion = "3"
	lost.Status = infrav1.HarvesterMachineStatus{}
	g.Expect(update(ownStatusIgnored, ownStatus, lost)).To(BeTrue(), "HarvesterMachine status lost (restored from an old copy)")
	for name, change := range map[string]func(*infrav1.HarvesterMachine){
		"finalizer": func(m *infrav1.HarvesterMachine) { m.Finalizers = []string{infrav1.MachineFinalizer} },
		"owner":     func(m *infrav1.HarvesterMachine) { m.OwnerReferences = []metav1.OwnerReference{{Name: "m"}} },
		"paused":    func(m *infrav1.HarvesterMachine) { m.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} },
		"deletion":  func(m *infrav1.HarvesterMachine) { m.DeletionTimestamp = &metav1.Time{} },
	} {
		changed := hm.DeepCopy()
		change(changed)
		g.Expect(update(ownStatusIgnored, hm, changed)).To(BeTrue(), "HarvesterMachine %s", name)
	}

	hc := &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1, ResourceVersion: "1"}}
	conditions.Set(hc, metav1.Condition{Type: infrav1.HarvesterAvailableCondition, Status: metav1.ConditionTrue, Reason: infrav1.ReadyReason})
	credentials := hc.DeepCopy()
	credentials.ResourceVersion = "2"
	conditions.Set(credentials, metav1.Condition{Type: infrav1.GuestCredentialsReadyCondition, Status: metav1.ConditionTrue, Reason: infrav1.ReadyReason})
	credentials.Status.HarvesterVersion = "v1.6.0"
	g.Expect(update(clusterChangedForMachines, hc, credentials)).To(BeFalse(), "HarvesterCluster conditions other than HarvesterAvailable")
	for name, change := range map[string]func(*infrav1.HarvesterCluster){
		"spec": func(c *infrav1.HarvesterCluster) { c.Generation = 2 },
		"skip cleanup": func(c *infrav1.HarvesterCluster) {
			c.Annotations = map[string]string{infrav1.SkipHarvesterCleanupAnnotation: "true"}
		},
		"failure domain": func(c *infrav1.HarvesterCluster) {
			c.Status.FailureDomains = []clusterv1.FailureDomain{{Name: "zone-a"}}
		},
		"provisioned": func(c *infrav1.HarvesterCluster) { c.Status.Initialization.Provisioned = ptr.To(true) },
		"Harvester lost": func(c *infrav1.HarvesterCluster) {
			conditions.Set(c, metav1.Condition{Type: infrav1.HarvesterAvailableCondition, Status: metav1.ConditionFalse, Reason: infrav1.HarvesterUnreachableReason})
		},
	} {
		changed := hc.DeepCopy()
		change(changed)
		g.Expect(update(clusterChangedForMachines, hc, changed)).To(BeTrue(), "HarvesterCluster %s", name)
	}
}

// A VMI that comes up running with an address puts its machine ahead of the machines queued
// before it; every other VMI event queues as usual, and a queue without priorities gets a plain
// add.
func TestReadyVMIGoesAheadOfTheQueue(t *testing.T) {
	g := NewWithT(t)
	vmi := func(machine string, phase kubevirtv1.VirtualMachineInstancePhase, ip string) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "target", Name: machine + "-vm",
			Labels: map[string]string{naming.LabelMachine: machine, naming.LabelMachineNamespace: "ns"}},
			Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "host-1"}}
		if ip != "" {
			v.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: ip}}
		}
		return v
	}
	update := func(old, changed client.Object) event.TypedUpdateEvent[client.Object] {
		old.SetResourceVersion("1")
		changed.SetResourceVersion("2") // an equal version is a resync, which queues at low priority
		return event.TypedUpdateEvent[client.Object]{ObjectOld: old, ObjectNew: changed}
	}
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}}
	}
	h := readyFirst(harvesterObjectToMachine)
	ctx := t.Context()

	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	// Queued first: a VMI that is scheduled, one running without an address yet, and one that
	// was running with an address already and moved host.
	h.Update(ctx, update(vmi("a", kubevirtv1.Scheduling, ""), vmi("a", kubevirtv1.Scheduled, "")), q)
	h.Update(ctx, update(vmi("b", kubevirtv1.Scheduled, ""), vmi("b", kubevirtv1.Running, "")), q)
	moved := vmi("c", kubevirtv1.Running, "10.0.0.3")
	moved.Status.NodeName = "host-2"
	h.Update(ctx, update(vmi("c", kubevirtv1.Running, "10.0.0.3"), moved), q)
	// Then the one that comes up.
	h.Update(ctx, update(vmi("d", kubevirtv1.Running, ""), vmi("d", kubevirtv1.Running, "10.0.0.4")), q)
	g.Eventually(q.Len).Should(Equal(4))
	var order []string
	var priorities []int
	for range 4 {
		item, priority, _ := q.GetWithPriority()
		order, priorities = append(order, item.Name), append(priorities, priority)
		q.Done(item)
	}
	g.Expect(order).To(Equal([]string{"d", "a", "b", "c"}))
	g.Expect(priorities).To(Equal([]int{readyPriority, 0, 0, 0}))

	plain := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer plain.ShutDown()
	h.Update(ctx, update(vmi("d", kubevirtv1.Running, ""), vmi("d", kubevirtv1.Running, "10.0.0.4")), plain)
	g.Expect(plain.Len()).To(Equal(1))
	item, _ := plain.Get()
	g.Expect(item).To(Equal(req("d")))
}
