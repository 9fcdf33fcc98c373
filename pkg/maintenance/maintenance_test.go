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

package maintenance

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

func TestHostEmptyingSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		host *corev1.Node
		want string
	}{
		{nil, ""},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h"}}, ""},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h", Annotations: map[string]string{annotationDrainRequested: "true"}}}, "host h enters maintenance mode"},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h", Annotations: map[string]string{AnnotationMaintainStatus: "completed"}}}, "host h enters maintenance mode"},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: transport.HostDrainTaint, Effect: corev1.TaintEffectNoSchedule}}}}, "being emptied for an upgrade"},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h"}, Spec: corev1.NodeSpec{Unschedulable: true}}, "host h is cordoned"},
	} {
		got := HostEmptying(tc.host)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("HostEmptying(%v) = %q, want one saying %q", tc.host, got, tc.want)
		}
	}
}

// hosts is a Harvester whose every host is in maintenance mode; it records the run strategies set.
type hosts struct {
	set []kubevirtv1.VirtualMachineRunStrategy
}

func (h *hosts) Host(_ context.Context, name string) (*corev1.Node, error) {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationMaintainStatus: "running"}}}, nil
}

func (h *hosts) SetRunStrategy(_ context.Context, _ *kubevirtv1.VirtualMachine, s kubevirtv1.VirtualMachineRunStrategy, _ map[string]*string) error {
	h.set = append(h.set, s)
	return nil
}

// A DrainAndRestart pool moves at most its MachineDeployment's maxUnavailable machines (a
// percentage of its replicas, at least one) at once; the machine is read, never changed.
func TestAPoolMovesItsShareOfMachinesAtOnce(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		maxUnavailable intstr.IntOrString
		moving         int
		wantFree       bool
	}{
		{intstr.FromInt32(0), 0, true},  // at least one
		{intstr.FromInt32(0), 1, false}, // one is moving already
		{intstr.FromString("30%"), 2, true},
		{intstr.FromString("30%"), 3, false},
	} {
		t.Run(fmt.Sprintf("maxUnavailable %s, %d moving", tc.maxUnavailable.String(), tc.moving), func(t *testing.T) {
			pool := map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineDeploymentNameLabel: "workers"}
			machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: pool}, Spec: clusterv1.MachineSpec{ClusterName: "c"}}
			objs := []client.Object{machine, &clusterv1.MachineDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers"},
				Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c", Replicas: ptr.To[int32](10),
					Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
						RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxUnavailable: ptr.To(tc.maxUnavailable)}}}},
			}}
			for i := range tc.moving {
				objs = append(objs, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("moving-%d", i),
					Labels: pool, Annotations: map[string]string{Annotation: "skip-remediation,drain"}}})
			}
			svc := Service{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
			hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
				Spec: infrav1.HarvesterMachineSpec{HostMaintenance: infrav1.HostMaintenance{Policy: infrav1.HostMaintenanceDrainAndRestart}}}
			read := hm.DeepCopy()
			h := &hosts{}
			rep, err := svc.Reconcile(context.Background(), h, Machine{HM: hm, Machine: machine, Cluster: &clusterv1.Cluster{},
				VM:  &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways)}},
				VMI: &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "host-1"}}})
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(hm, read) {
				t.Errorf("Reconcile changed the HarvesterMachine")
			}
			if rep.HostMaintenance == nil {
				t.Fatal("no HostMaintenance condition reported")
			}
			if free := rep.HostMaintenance.Reason != infrav1.WaitingForDrainLimitReason; free != tc.wantFree {
				t.Errorf("report %+v, want a free slot: %v", rep.HostMaintenance, tc.wantFree)
			}
			// With a slot, no guest to drain: the VM is stopped at once, held down.
			if tc.wantFree && (len(h.set) != 1 || h.set[0] != kubevirtv1.RunStrategyHalted || !rep.Handled || rep.VirtualMachine == nil) {
				t.Errorf("run strategies %v, report %+v: want the VM halted and the reconcile handled", h.set, rep)
			}
			if !tc.wantFree && (len(h.set) != 0 || rep.Handled || rep.RequeueAfter != Recheck) {
				t.Errorf("run strategies %v, report %+v: want nothing stopped and a recheck", h.set, rep)
			}
		})
	}
}
