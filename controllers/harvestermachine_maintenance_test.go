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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/maintenance"
)

// What a machine does when Harvester empties its host, decided on what Harvester shows (the
// services seam; no guest node, so no drain): the bed's e2e and integration tests run the same
// against Harvester's and KubeVirt's own controllers.
func TestMachineMovesOffAHostHarvesterEmpties(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	vm := func(strategy kubevirtv1.VirtualMachineRunStrategy, annotations map[string]string) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "m", UID: "vm-uid", Annotations: annotations},
			Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(strategy)},
		}
	}
	vmi := func(host string, mutate func(*kubevirtv1.VirtualMachineInstanceStatus)) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: host}}
		if mutate != nil {
			mutate(&v.Status)
		}
		return v
	}
	running := func(host string, mutate func(*kubevirtv1.VirtualMachineInstanceStatus)) harvester.VMState {
		return harvester.VMState{Ready: true, Host: host, VMI: vmi(host, mutate),
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}
	}
	inMaintenance := map[string]*corev1.Node{"host-1": {
		ObjectMeta: metav1.ObjectMeta{Name: "host-1", Annotations: map[string]string{maintenance.AnnotationMaintainStatus: "running"}},
		Spec:       corev1.NodeSpec{Unschedulable: true},
	}}
	cordoned := map[string]*corev1.Node{"host-1": {ObjectMeta: metav1.ObjectMeta{Name: "host-1"}, Spec: corev1.NodeSpec{Unschedulable: true}}}
	gpu := func(hm *infrav1.HarvesterMachine) {
		hm.Spec.GPUs = []infrav1.HostDevice{{Name: "gpu-0", DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}
	}
	holding := func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{MaintenanceAnnotation: "skip-remediation,drain", clusterv1.MachineSkipRemediationAnnotation: ""}
	}
	draining := func(since time.Duration) func(*infrav1.HarvesterMachine) {
		return func(hm *infrav1.HarvesterMachine) {
			gpu(hm)
			hm.Status.Conditions = append(hm.Status.Conditions, metav1.Condition{Type: infrav1.HostMaintenanceCondition, Status: metav1.ConditionTrue,
				Reason: infrav1.DrainingNodeReason, LastTransitionTime: metav1.NewTime(time.Now().Add(-since))})
		}
	}
	drainingOwner := func(timeout int32) func(*clusterv1.Machine) {
		return func(m *clusterv1.Machine) {
			holding(m)
			m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "node-1"}
			m.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(timeout)
		}
	}
	evacuating := func() *fakeHarvester {
		return &fakeHarvester{vm: vm(kubevirtv1.RunStrategyRerunOnFailure, nil), state: running("host-1", func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.EvacuationNodeName = "host-1" })}
	}
	for _, tc := range []struct {
		name      string
		harvester *fakeHarvester
		// guests is the reconciler's ClusterCache (nil: no guest node to drain).
		guests clustercache.ClusterCache
		// drainLimit is the manager's --host-maintenance-drain-timeout (0: none).
		drainLimit time.Duration
		machine    func(*infrav1.HarvesterMachine)
		owner      func(*clusterv1.Machine)
		// sibling is another Machine of the same MachineDeployment, being moved off its host.
		sibling bool
		// wantStrategies are SetRunStrategy's calls; wantReason the HostMaintenance reason;
		// wantVMReason the VirtualMachineReady reason; wantOwner the host-maintenance annotation
		// on the Machine ("" none).
		wantStrategies []string
		wantReason     string
		wantVMReason   string
		wantOwner      string
		wantEvent      string
	}{{
		name:           "a GPU machine asked to leave its host (KubeVirt's evacuation mark): drained, then stopped, remediation held",
		harvester:      &fakeHarvester{vm: vm(kubevirtv1.RunStrategyRerunOnFailure, nil), state: running("host-1", func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.EvacuationNodeName = "host-1" })},
		machine:        gpu,
		wantStrategies: []string{"Halted " + naming.AnnotationRunStrategyBeforeStop + "=RerunOnFailure " + naming.AnnotationStoppedForHost + "=host-1"},
		wantReason:     infrav1.StoppedForHostReason, wantVMReason: infrav1.StoppedForHostMaintenanceReason,
		wantOwner: "skip-remediation,drain", wantEvent: "Guest node drained; stopping VM guests/m to leave host host-1",
	}, {
		name:      "a DrainAndRestart machine on a host entering maintenance, another of its pool already moving: it waits",
		harvester: &fakeHarvester{vm: vm(kubevirtv1.RunStrategyRerunOnFailure, nil), state: running("host-1", nil), hosts: inMaintenance},
		machine: func(hm *infrav1.HarvesterMachine) {
			hm.Spec.HostMaintenance.Policy = infrav1.HostMaintenanceDrainAndRestart
		},
		sibling:    true,
		wantReason: infrav1.WaitingForDrainLimitReason, wantVMReason: infrav1.ReadyReason,
	}, {
		name:           "the VM the provider stopped is gone from its host: started again, the marks removed",
		harvester:      &fakeHarvester{vm: vm(kubevirtv1.RunStrategyHalted, map[string]string{naming.AnnotationStoppedForHost: "host-1", naming.AnnotationRunStrategyBeforeStop: "Always"})},
		machine:        gpu,
		owner:          holding,
		wantStrategies: []string{"Always -" + naming.AnnotationRunStrategyBeforeStop + " -" + naming.AnnotationStoppedForHost},
		wantReason:     infrav1.RestartingReason, wantVMReason: infrav1.StoppedForHostMaintenanceReason,
		wantOwner: "skip-remediation,drain", wantEvent: "starting it on another host",
	}, {
		name:       "the VM the provider stopped still has its instance: it waits for it to go",
		harvester:  &fakeHarvester{vm: vm(kubevirtv1.RunStrategyHalted, map[string]string{naming.AnnotationStoppedForHost: "host-1"}), state: running("host-1", nil)},
		machine:    gpu,
		owner:      holding,
		wantReason: infrav1.StoppedForHostReason, wantVMReason: infrav1.StoppedForHostMaintenanceReason, wantOwner: "skip-remediation,drain",
	}, {
		name: "Harvester's forced maintenance halted the VM: started again as Harvester recorded it, remediation held",
		harvester: &fakeHarvester{vm: vm(kubevirtv1.RunStrategyHalted, map[string]string{naming.AnnotationHarvesterRunStrategy: "Always"}),
			state: harvester.VMState{Reason: infrav1.VMStoppedReason, Message: "the VM is stopped"}, hosts: inMaintenance},
		machine:        func(hm *infrav1.HarvesterMachine) { gpu(hm); hm.Status.VirtualMachine.Host = "host-1" },
		wantStrategies: []string{"Always"},
		wantReason:     infrav1.HaltedByHarvesterReason, wantVMReason: infrav1.StoppedForHostMaintenanceReason,
		wantOwner: "skip-remediation", wantEvent: "without a drain of the guest node",
	}, {
		name:       "a stopped VM on a host nobody empties is left stopped",
		harvester:  &fakeHarvester{vm: vm(kubevirtv1.RunStrategyHalted, nil), state: harvester.VMState{Reason: infrav1.VMStoppedReason, Message: "the VM is stopped"}},
		machine:    func(hm *infrav1.HarvesterMachine) { gpu(hm); hm.Status.VirtualMachine.Host = "host-1" },
		wantReason: infrav1.NoHostMaintenanceReason, wantVMReason: infrav1.VMStoppedReason,
	}, {
		name: "a LiveMigrate machine KubeVirt cannot migrate, on a host entering maintenance: said plainly, nothing stopped",
		harvester: &fakeHarvester{vm: vm(kubevirtv1.RunStrategyRerunOnFailure, nil), hosts: inMaintenance, state: running("host-1", func(s *kubevirtv1.VirtualMachineInstanceStatus) {
			s.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse, Reason: "DisksNotLiveMigratable", Message: "PVC root is not shared"}}
		})},
		wantReason: infrav1.MigrationBlockedReason, wantVMReason: infrav1.ReadyReason,
	}, {
		name:       "a LiveMigrate machine on a cordoned host: left to KubeVirt's migration",
		harvester:  &fakeHarvester{vm: vm(kubevirtv1.RunStrategyRerunOnFailure, nil), hosts: cordoned, state: running("host-1", nil)},
		wantReason: infrav1.NoHostMaintenanceReason, wantVMReason: infrav1.ReadyReason,
	}, {
		name: "a migration under way is reported",
		harvester: &fakeHarvester{vm: vm(kubevirtv1.RunStrategyRerunOnFailure, nil), state: running("host-1", func(s *kubevirtv1.VirtualMachineInstanceStatus) {
			s.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{SourceNode: "host-1", TargetNode: "host-2"}
		})},
		wantReason: infrav1.MigratingReason, wantVMReason: infrav1.ReadyReason,
	}, {
		name:       "back on another host: what the provider set on the Machine is removed",
		harvester:  &fakeHarvester{vm: vm(kubevirtv1.RunStrategyRerunOnFailure, nil), state: running("host-2", nil)},
		machine:    gpu,
		owner:      holding,
		wantReason: infrav1.NoHostMaintenanceReason, wantVMReason: infrav1.ReadyReason, wantEvent: "guest node is Ready again",
	}, {
		name:      "the guest's API unreachable: the drain waits, the VM runs on",
		harvester: evacuating(), guests: unreachableGuests{},
		machine: draining(time.Minute), owner: drainingOwner(600),
		wantReason: infrav1.DrainingNodeReason, wantVMReason: infrav1.ReadyReason, wantOwner: "skip-remediation,drain",
	}, {
		name:      "the drain past the Machine's nodeDrainTimeoutSeconds: the VM stops with what is left",
		harvester: evacuating(), guests: unreachableGuests{},
		machine: draining(time.Hour), owner: drainingOwner(600),
		wantStrategies: []string{"Halted " + naming.AnnotationRunStrategyBeforeStop + "=RerunOnFailure " + naming.AnnotationStoppedForHost + "=host-1"},
		wantReason:     infrav1.StoppedForHostReason, wantVMReason: infrav1.StoppedForHostMaintenanceReason,
		wantOwner: "skip-remediation,drain", wantEvent: "took longer than its limit (10m0s",
	}, {
		name:      "a tenant's drain with no timeout of its own (or a longer one) is bounded by the manager's limit",
		harvester: evacuating(), guests: unreachableGuests{}, drainLimit: 10 * time.Minute,
		machine: draining(time.Hour), owner: drainingOwner(86400),
		wantStrategies: []string{"Halted " + naming.AnnotationRunStrategyBeforeStop + "=RerunOnFailure " + naming.AnnotationStoppedForHost + "=host-1"},
		wantReason:     infrav1.StoppedForHostReason, wantVMReason: infrav1.StoppedForHostMaintenanceReason,
		wantOwner: "skip-remediation,drain", wantEvent: "took longer than its limit (10m0s",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			hm, objs := provisionedClusterMachine()
			if tc.machine != nil {
				tc.machine(hm)
			}
			var owner *clusterv1.Machine
			for _, o := range objs {
				if m, ok := o.(*clusterv1.Machine); ok {
					owner = m
				}
			}
			owner.Labels = map[string]string{clusterv1.ClusterNameLabel: owner.Spec.ClusterName, clusterv1.MachineDeploymentNameLabel: "workers"}
			if tc.owner != nil {
				tc.owner(owner)
			}
			objs = append(objs, &clusterv1.MachineDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: "workers"},
				Spec: clusterv1.MachineDeploymentSpec{ClusterName: owner.Spec.ClusterName, Replicas: ptr.To[int32](3),
					Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
						RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(0))}}}},
			})
			if tc.sibling {
				objs = append(objs, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: "sibling",
					Labels:      owner.Labels,
					Annotations: map[string]string{MaintenanceAnnotation: "skip-remediation,drain"}}})
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(hm).Build()
			recorder := events.NewFakeRecorder(10)
			r := &HarvesterMachineReconciler{Client: c, Recorder: recorder, services: tc.harvester, ClusterCache: tc.guests, HostDrainTimeout: tc.drainLimit}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)}); err != nil {
				t.Fatal(err)
			}
			if strings.Join(tc.harvester.runStrategies, "|") != strings.Join(tc.wantStrategies, "|") {
				t.Errorf("run strategies set %q, want %q", tc.harvester.runStrategies, tc.wantStrategies)
			}
			got := &infrav1.HarvesterMachine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(hm), got); err != nil {
				t.Fatal(err)
			}
			if reason := conditions.GetReason(got, infrav1.HostMaintenanceCondition); reason != tc.wantReason {
				t.Errorf("HostMaintenance %+v, want reason %s", conditions.Get(got, infrav1.HostMaintenanceCondition), tc.wantReason)
			}
			if reason := conditions.GetReason(got, infrav1.VirtualMachineReadyCondition); reason != tc.wantVMReason {
				t.Errorf("VirtualMachineReady %+v, want reason %s", conditions.Get(got, infrav1.VirtualMachineReadyCondition), tc.wantVMReason)
			}
			m := &clusterv1.Machine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(owner), m); err != nil {
				t.Fatal(err)
			}
			if v, ok := m.Annotations[MaintenanceAnnotation]; v != tc.wantOwner || ok != (tc.wantOwner != "") {
				t.Errorf("Machine's %s %q (set: %v), want %q", MaintenanceAnnotation, v, ok, tc.wantOwner)
			}
			_, skip := m.Annotations[clusterv1.MachineSkipRemediationAnnotation]
			if wantSkip := strings.Contains(tc.wantOwner, "skip-remediation"); skip != wantSkip {
				t.Errorf("Machine's skip-remediation set: %v, want %v", skip, wantSkip)
			}
			expectEventSaying(t, recorder, tc.wantEvent)
		})
	}
}

// unreachableGuests is a ClusterCache whose guests are never connected.
type unreachableGuests struct{ clustercache.ClusterCache }

func (unreachableGuests) GetUncachedClient(context.Context, client.ObjectKey) (client.Client, error) {
	return nil, clustercache.ErrClusterNotConnected
}

// expectEventSaying checks the events a reconcile sent through recorder: one of them saying want,
// or none when want is "".
func expectEventSaying(t *testing.T, recorder *events.FakeRecorder, want string) {
	t.Helper()
	var sent []string
	for len(recorder.Events) > 0 {
		sent = append(sent, <-recorder.Events)
	}
	if want != "" && !strings.Contains(strings.Join(sent, "\n"), want) {
		t.Errorf("events %q, want one saying %q", sent, want)
	}
	if want == "" && len(sent) > 0 {
		t.Errorf("events %q, want none", sent)
	}
}
