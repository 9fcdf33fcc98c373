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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// A resizable machine's VM follows the machine's cpu and memory, decided on what Harvester shows
// (the services seam): the integration and e2e tests run the same against KubeVirt's own
// controllers.
func TestMachineResizesItsVM(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	// The VM as built for cpu 2 / memory 4Gi with maxCPU 4 / maxMemory 8Gi.
	vm := func(mutate func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
		v := &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "m", UID: "vm-uid"},
			Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{
					CPU:    &kubevirtv1.CPU{Sockets: 2, Cores: 1, Threads: 1, MaxSockets: 4},
					Memory: &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("4Gi")), MaxGuest: ptr.To(resource.MustParse("8Gi"))},
				},
			}}},
		}
		if mutate != nil {
			mutate(v)
		}
		return v
	}
	running := func(sockets uint32, guest string, mutate func(*kubevirtv1.VirtualMachineInstanceStatus)) harvester.VMState {
		vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
			Phase: kubevirtv1.Running, NodeName: "host-1",
			CurrentCPUTopology: &kubevirtv1.CPUTopology{Sockets: sockets, Cores: 1, Threads: 1},
			Memory:             &kubevirtv1.MemoryStatus{GuestRequested: ptr.To(resource.MustParse(guest)), GuestCurrent: ptr.To(resource.MustParse(guest))},
		}}
		if mutate != nil {
			mutate(&vmi.Status)
		}
		return harvester.VMState{Ready: true, Host: "host-1", VMI: vmi,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}
	}
	resizable := func(cpu int32, memory string) func(*infrav1.HarvesterMachine) {
		return func(hm *infrav1.HarvesterMachine) {
			hm.Spec.CPU, hm.Spec.MaxCPU = cpu, 4
			hm.Spec.Memory, hm.Spec.MaxMemory = resource.MustParse(memory), ptr.To(resource.MustParse("8Gi"))
		}
	}
	rootDisk := func(size string) func(*infrav1.HarvesterMachine) {
		return func(hm *infrav1.HarvesterMachine) {
			hm.Spec.Disks = []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse(size)}}
		}
	}
	refused := apierrors.NewInvalid(schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"}, "m",
		field.ErrorList{field.Invalid(field.NewPath("spec", "template", "spec", "domain", "memory", "guest"), "10Gi", "must not exceed maxGuest")})
	for _, tc := range []struct {
		name      string
		harvester *fakeHarvester
		machine   func(*infrav1.HarvesterMachine)
		// volume is the root disk's volume: asked and actual size ("" none).
		volumeAsked, volumeHas string
		wantGrown              []string
		// wantResizes are Resize's calls; wantStatus and wantReason the ResourcesUpToDate
		// condition ("" none); wantMessage a substring of its message; wantEvent of the event.
		wantResizes []string
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
		wantEvent   string
	}{{
		name:      "a machine without maximums: nothing to follow, no condition",
		harvester: &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil)},
	}, {
		name:       "a resizable machine at its VM's size: up to date",
		harvester:  &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil)},
		machine:    resizable(2, "4Gi"),
		wantStatus: metav1.ConditionTrue, wantReason: infrav1.ReadyReason,
	}, {
		name:        "cpu and memory raised on the machine: the VM's sockets and guest memory are patched",
		harvester:   &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil)},
		machine:     resizable(3, "6Gi"),
		wantResizes: []string{"sockets=3 guest=6Gi"},
		wantStatus:  metav1.ConditionFalse, wantReason: infrav1.ResizingReason,
		wantMessage: "asked KubeVirt for 3 CPUs and 6Gi memory", wantEvent: "Resizing VM guests/m to 3 CPUs and 6Gi memory",
	}, {
		name: "only memory raised, with reserved memory: the guest memory less the reserve, the sockets left",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("3840Mi"))
		}), state: running(2, "3840Mi", nil)},
		machine: func(hm *infrav1.HarvesterMachine) {
			resizable(2, "6Gi")(hm)
			hm.Spec.ReservedMemory = ptr.To(resource.MustParse("256Mi"))
		},
		wantResizes: []string{"sockets=- guest=5888Mi"},
		wantStatus:  metav1.ConditionFalse, wantReason: infrav1.ResizingReason, wantEvent: "Resizing",
	}, {
		name: "the VM has the new size, the VMI not yet: KubeVirt's migration is quoted",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.CPU.Sockets = 3
		}), state: running(2, "4Gi", func(s *kubevirtv1.VirtualMachineInstanceStatus) {
			s.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceVCPUChange, Status: corev1.ConditionTrue, Message: "hotplug in progress"}}
			s.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{TargetNode: "host-2"}
		})},
		machine:    resizable(3, "4Gi"),
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizingReason,
		wantMessage: "KubeVirt is giving the running VM 3 CPUs (has 2); HotVCPUChange: hotplug in progress; migrating to host-2",
	}, {
		name: "the VMI took the new size: up to date",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.CPU.Sockets = 3
			v.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("6Gi"))
		}), state: running(3, "6Gi", nil)},
		machine:    resizable(3, "6Gi"),
		wantStatus: metav1.ConditionTrue, wantReason: infrav1.ReadyReason,
	}, {
		name: "KubeVirt says the change needs a restart: reported with its message",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("6Gi"))
			v.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineRestartRequired, Status: corev1.ConditionTrue,
				Message: "memory updated in template spec. Memory-hotplug failed and is not available for this VM configuration"}}
		}), state: running(2, "4Gi", nil)},
		machine:    resizable(2, "6Gi"),
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizeNeedsRestartReason,
		wantMessage: "KubeVirt cannot give the running VM 2 CPUs and 6Gi memory: memory updated in template spec. Memory-hotplug failed",
	}, {
		name: "the VMI cannot migrate, which KubeVirt's resize needs: reported, not left Resizing",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.CPU.Sockets = 3
		}), state: running(2, "4Gi", func(s *kubevirtv1.VirtualMachineInstanceStatus) {
			s.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
				Reason: "DisksNotLiveMigratable", Message: "cannot migrate VMI with non-shared PVCs"}}
		})},
		machine:    resizable(3, "4Gi"),
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizeNeedsRestartReason,
		wantMessage: "this VM cannot migrate (DisksNotLiveMigratable: cannot migrate VMI with non-shared PVCs)",
	}, {
		name: "the resize's migration failed: said, still Resizing (KubeVirt's workload updater tries again)",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.CPU.Sockets = 3
		}), state: running(2, "4Gi", func(s *kubevirtv1.VirtualMachineInstanceStatus) {
			s.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{Failed: true, FailureReason: "target pod unschedulable"}
		})},
		machine:    resizable(3, "4Gi"),
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizingReason,
		wantMessage: "the last migration failed: target pod unschedulable",
	}, {
		name: "a RestartRequired of the VM for another change does not fail a resize that is done",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineRestartRequired, Status: corev1.ConditionTrue, Message: "a non-live-updatable field was changed"}}
		}), state: running(2, "4Gi", nil)},
		machine:    resizable(2, "4Gi"),
		wantStatus: metav1.ConditionTrue, wantReason: infrav1.ReadyReason,
	}, {
		name:        "Harvester's or KubeVirt's webhook refuses the new size: reported with the refusal and a warning",
		harvester:   &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil), resizeErr: refused},
		machine:     resizable(2, "6Gi"),
		wantResizes: []string{"sockets=- guest=6Gi"},
		wantStatus:  metav1.ConditionFalse, wantReason: infrav1.ResizeRefusedReason,
		wantMessage: "must not exceed maxGuest", wantEvent: "must not exceed maxGuest",
	}, {
		name: "a stopped VM with its template resized: up to date (it starts with the new size)",
		harvester: &fakeHarvester{vm: vm(func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.CPU.Sockets = 3
		}), state: harvester.VMState{Reason: infrav1.VMStoppedReason, Message: "the VM is stopped"}},
		machine:    resizable(3, "4Gi"),
		wantStatus: metav1.ConditionTrue, wantReason: infrav1.ReadyReason,
	}, {
		name:        "a machine without maximums whose image disk grew: its volume is asked for the new size",
		harvester:   &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil)},
		machine:     rootDisk("50Gi"),
		volumeAsked: "40Gi", volumeHas: "40Gi",
		wantGrown:  []string{"disk-0=50Gi"},
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizingReason,
		wantMessage: "growing disk disk-0 to 50Gi (asked)", wantEvent: "Growing disk disk-0 (volume guests/",
	}, {
		name:        "the volume was asked for more and has not grown yet",
		harvester:   &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil)},
		machine:     rootDisk("50Gi"),
		volumeAsked: "50Gi", volumeHas: "40Gi",
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizingReason,
		wantMessage: "growing disk disk-0 to 50Gi (has 40Gi)",
	}, {
		name:      "the volume grew: up to date",
		harvester: &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil)},
		machine: func(hm *infrav1.HarvesterMachine) {
			rootDisk("50Gi")(hm)
			hm.Status.Conditions = append(hm.Status.Conditions, metav1.Condition{Type: infrav1.ResourcesUpToDateCondition, Status: metav1.ConditionFalse, Reason: infrav1.ResizingReason, LastTransitionTime: metav1.Now()})
		},
		volumeAsked: "50Gi", volumeHas: "50Gi",
		wantStatus: metav1.ConditionTrue, wantReason: infrav1.ReadyReason,
	}, {
		name: "Harvester's PVC webhook refuses the growth: reported with its message",
		harvester: &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil), growErr: apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, "v",
			field.ErrorList{field.Invalid(field.NewPath("spec"), "", "not able to expand volume: kubevirt ExpandDisks not included in featureGate")})},
		machine:     rootDisk("50Gi"),
		volumeAsked: "40Gi", volumeHas: "40Gi",
		wantGrown:  []string{"disk-0=50Gi"},
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizeRefusedReason,
		wantMessage: "ExpandDisks not included", wantEvent: "ExpandDisks not included",
	}, {
		name:      "a machine being updated in place whose volume is not (yet) seen: waits, says so",
		harvester: &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil), volumes: map[string]*corev1.PersistentVolumeClaim{}},
		machine: func(hm *infrav1.HarvesterMachine) {
			rootDisk("50Gi")(hm)
			hm.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
		},
		wantStatus: metav1.ConditionFalse, wantReason: infrav1.ResizingReason, wantMessage: "disk disk-0: volume guests/",
	}, {
		name:        "a machine without maximums at its volumes' size: no condition",
		harvester:   &fakeHarvester{vm: vm(nil), state: running(2, "4Gi", nil)},
		machine:     rootDisk("40Gi"),
		volumeAsked: "40Gi", volumeHas: "40Gi",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			hm, objs := provisionedClusterMachine()
			hm.Spec.ProviderID = infrav1.ProviderIDPrefix + "vm-uid"
			if tc.machine != nil {
				tc.machine(hm)
			}
			if tc.volumeAsked != "" {
				claim := build.ClaimName(hm, hm.Spec.DiskName(0))
				tc.harvester.volumes = map[string]*corev1.PersistentVolumeClaim{claim: {
					ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: claim},
					Spec:       corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tc.volumeAsked)}}},
					Status:     corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tc.volumeHas)}},
				}}
				for i, g := range tc.wantGrown {
					tc.wantGrown[i] = strings.Replace(g, "disk-0", claim, 1)
				}
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(hm).Build()
			recorder := events.NewFakeRecorder(10)
			r := &HarvesterMachineReconciler{Client: c, Recorder: recorder, services: tc.harvester}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)}); err != nil {
				t.Fatal(err)
			}
			if strings.Join(tc.harvester.grown, "|") != strings.Join(tc.wantGrown, "|") {
				t.Errorf("volumes grown %q, want %q", tc.harvester.grown, tc.wantGrown)
			}
			if strings.Join(tc.harvester.resizes, "|") != strings.Join(tc.wantResizes, "|") {
				t.Errorf("resizes %q, want %q", tc.harvester.resizes, tc.wantResizes)
			}
			got := &infrav1.HarvesterMachine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(hm), got); err != nil {
				t.Fatal(err)
			}
			cond := conditions.Get(got, infrav1.ResourcesUpToDateCondition)
			switch {
			case tc.wantReason == "" && cond != nil:
				t.Errorf("ResourcesUpToDate %+v, want none", cond)
			case tc.wantReason != "" && (cond == nil || cond.Status != tc.wantStatus || cond.Reason != tc.wantReason || !strings.Contains(cond.Message, tc.wantMessage)):
				t.Errorf("ResourcesUpToDate %+v, want %s/%s with %q", cond, tc.wantStatus, tc.wantReason, tc.wantMessage)
			case cond != nil && cond.ObservedGeneration != got.Generation:
				t.Errorf("ResourcesUpToDate observed generation %d, the machine's is %d", cond.ObservedGeneration, got.Generation)
			}
			expectEventSaying(t, recorder, tc.wantEvent)
		})
	}
}
