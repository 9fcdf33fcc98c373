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
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// What the in-place update extension answers Cluster API: a patch of what it can change, which
// Cluster API applies to the current template or machine and compares with the desired one
// (anything left different means a rollout), as the tests do here.
func TestInPlaceUpdateExtensionPatchesWhatAMachineTakesLive(t *testing.T) {
	spec := func(mutate func(*infrav1.HarvesterMachineSpec)) infrav1.HarvesterMachineSpec {
		s := infrav1.HarvesterMachineSpec{
			CPU: 2, MaxCPU: 4, Memory: resource.MustParse("4Gi"), MaxMemory: ptr.To(resource.MustParse("8Gi")),
			Disks:    []infrav1.Disk{{Name: "disk-0", Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
			Networks: []infrav1.Network{{Name: "nic-0", NetworkName: "default/vlan10"}},
		}
		if mutate != nil {
			mutate(&s)
		}
		return s
	}
	template := func(s infrav1.HarvesterMachineSpec) runtime.RawExtension {
		t := &infrav1.HarvesterMachineTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "HarvesterMachineTemplate"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers"},
			Spec:       infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: s}},
		}
		b, _ := json.Marshal(t)
		return runtime.RawExtension{Raw: b}
	}
	machine := func(s infrav1.HarvesterMachineSpec) runtime.RawExtension {
		s.ProviderID = infrav1.ProviderIDPrefix + "vm-uid"
		m := &infrav1.HarvesterMachine{
			TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "HarvesterMachine"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0"},
			Spec:       s,
		}
		b, _ := json.Marshal(m)
		return runtime.RawExtension{Raw: b}
	}
	// inPlace applies the answer to current as Cluster API does and says whether the result's
	// spec is desired's.
	inPlace := func(t *testing.T, current, desired runtime.RawExtension, p runtimehooksv1.Patch) bool {
		t.Helper()
		patched := current.Raw
		if p.IsDefined() {
			if p.PatchType != runtimehooksv1.JSONMergePatchType {
				t.Fatalf("patch type %s", p.PatchType)
			}
			var err error
			if patched, err = jsonpatch.MergePatch(current.Raw, p.Patch); err != nil {
				t.Fatal(err)
			}
		}
		var a, b map[string]any
		_ = json.Unmarshal(patched, &a)
		_ = json.Unmarshal(desired.Raw, &b)
		aj, _ := json.Marshal(a["spec"])
		bj, _ := json.Marshal(b["spec"])
		return string(aj) == string(bj)
	}
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	// A cluster on a Harvester of three hosts in one zone: its machines can migrate.
	threeHosts := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "three-hosts"},
		Status: clusterv1.ClusterStatus{FailureDomains: []clusterv1.FailureDomain{{Name: "zone-a", Attributes: map[string]string{build.FailureDomainHostsKey: "3"}}}}}
	h := &InPlaceUpdates{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(threeHosts).WithStatusSubresource(threeHosts).Build()}
	for _, tc := range []struct {
		name    string
		current infrav1.HarvesterMachineSpec
		desired infrav1.HarvesterMachineSpec
		// inPlace: the patched current is desired; wantWhy a substring of the message.
		inPlace bool
		wantWhy string
	}{{
		name: "more CPUs and memory within the maximums", inPlace: true,
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) { s.CPU, s.Memory = 4, resource.MustParse("6Gi") }),
	}, {
		name:    "memory written another way (6144Mi): desired's own value is patched in",
		inPlace: true,
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("6144Mi") }),
	}, {
		name:    "a new image with more CPUs: only the CPUs are patched, Cluster API rolls out",
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) { s.CPU, s.Disks[0].Image = 3, "default/ubuntu-26.04" }),
	}, {
		name:    "beyond maxCPU",
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 6 }),
		wantWhy: "can grow only up to maxCPU (4)",
	}, {
		name:    "fewer CPUs",
		current: spec(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 3 }),
		desired: spec(nil),
		wantWhy: "cannot shrink from 3",
	}, {
		name:    "a machine made without maxMemory",
		current: spec(func(s *infrav1.HarvesterMachineSpec) { s.MaxMemory = nil }),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) { s.MaxMemory, s.Memory = nil, resource.MustParse("6Gi") }),
		wantWhy: "made without maxMemory",
	}, {
		name:    "higher maximums with more CPUs: a new VM",
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) { s.CPU, s.MaxCPU = 6, 8 }),
		wantWhy: "fixed when it was made",
	}, {
		name: "a bigger image disk with more memory", inPlace: true,
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) {
			s.Disks[0].Size, s.Memory = resource.MustParse("60Gi"), resource.MustParse("6Gi")
		}),
	}, {
		name:    "a smaller disk",
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.MustParse("30Gi") }),
		wantWhy: "cannot shrink from 40Gi",
	}, {
		name:    "a bigger disk of a new image: a new disk",
		current: spec(nil),
		desired: spec(func(s *infrav1.HarvesterMachineSpec) {
			s.Disks[0].Size, s.Disks[0].Image = resource.MustParse("60Gi"), "default/ubuntu-26.04"
		}),
	}, {
		name:    "nothing of the HarvesterMachine changes (a new Kubernetes version): nothing to patch, no reason",
		inPlace: true,
		current: spec(nil), desired: spec(nil),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			setReq := &runtimehooksv1.CanUpdateMachineSetRequest{}
			setReq.Current.MachineSet.Namespace, setReq.Current.MachineSet.Spec.ClusterName = "ns", "three-hosts"
			setReq.Current.InfrastructureMachineTemplate, setReq.Desired.InfrastructureMachineTemplate = template(tc.current), template(tc.desired)
			setResp := &runtimehooksv1.CanUpdateMachineSetResponse{}
			h.CanUpdateMachineSet(context.Background(), setReq, setResp)

			machineReq := &runtimehooksv1.CanUpdateMachineRequest{}
			machineReq.Current.Machine.Namespace, machineReq.Current.Machine.Spec.ClusterName = "ns", "three-hosts"
			machineReq.Current.InfrastructureMachine, machineReq.Desired.InfrastructureMachine = machine(tc.current), machine(tc.desired)
			machineResp := &runtimehooksv1.CanUpdateMachineResponse{}
			h.CanUpdateMachine(context.Background(), machineReq, machineResp)

			for _, got := range []struct {
				what             string
				status           runtimehooksv1.ResponseStatus
				message          string
				current, desired runtime.RawExtension
				patch            runtimehooksv1.Patch
			}{
				{"CanUpdateMachineSet", setResp.Status, setResp.Message, setReq.Current.InfrastructureMachineTemplate, setReq.Desired.InfrastructureMachineTemplate, setResp.InfrastructureMachineTemplatePatch},
				{"CanUpdateMachine", machineResp.Status, machineResp.Message, machineReq.Current.InfrastructureMachine, machineReq.Desired.InfrastructureMachine, machineResp.InfrastructureMachinePatch},
			} {
				if got.status != runtimehooksv1.ResponseStatusSuccess {
					t.Errorf("%s: status %s (%s): a Failure would block the rollout", got.what, got.status, got.message)
				}
				if ok := inPlace(t, got.current, got.desired, got.patch); ok != tc.inPlace {
					t.Errorf("%s: in place %v, want %v (patch %s)", got.what, ok, tc.inPlace, got.patch.Patch)
				}
				if !strings.Contains(got.message, tc.wantWhy) {
					t.Errorf("%s: message %q, want it to say %q", got.what, got.message, tc.wantWhy)
				}
			}
		})
	}

	t.Run("machines pinned to a failure domain of one host cannot migrate: no patch, for machine sets and machines", func(t *testing.T) {
		scheme, err := NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
			Status: clusterv1.ClusterStatus{FailureDomains: []clusterv1.FailureDomain{
				{Name: "zone-a", Attributes: map[string]string{build.FailureDomainHostsKey: "2"}},
				{Name: "zone-b", Attributes: map[string]string{build.FailureDomainHostsKey: "1"}},
			}}}
		h := &InPlaceUpdates{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(cluster).WithStatusSubresource(cluster).Build()}
		bigger := spec(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 3 })
		for domain, want := range map[string]string{"zone-a": "", "": "", "zone-b": "failure domain zone-b, which has one Harvester host", "zone-c": "not one of Cluster ns/c's"} {
			setReq := &runtimehooksv1.CanUpdateMachineSetRequest{}
			setReq.Current.MachineSet = clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers"},
				Spec: clusterv1.MachineSetSpec{ClusterName: "c", Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{FailureDomain: domain}}}}
			setReq.Current.InfrastructureMachineTemplate, setReq.Desired.InfrastructureMachineTemplate = template(spec(nil)), template(bigger)
			setResp := &runtimehooksv1.CanUpdateMachineSetResponse{}
			h.CanUpdateMachineSet(context.Background(), setReq, setResp)
			machineReq := &runtimehooksv1.CanUpdateMachineRequest{}
			machineReq.Current.Machine = clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0"},
				Spec: clusterv1.MachineSpec{ClusterName: "c", FailureDomain: domain}}
			machineReq.Current.InfrastructureMachine, machineReq.Desired.InfrastructureMachine = machine(spec(nil)), machine(bigger)
			machineResp := &runtimehooksv1.CanUpdateMachineResponse{}
			h.CanUpdateMachine(context.Background(), machineReq, machineResp)
			for what, got := range map[string]struct {
				patch runtimehooksv1.Patch
				msg   string
			}{"MachineSet": {setResp.InfrastructureMachineTemplatePatch, setResp.Message}, "Machine": {machineResp.InfrastructureMachinePatch, machineResp.Message}} {
				if got.patch.IsDefined() != (want == "") || !strings.Contains(got.msg, want) {
					t.Errorf("%s in %s: patch %s message %q, want a patch: %v, message %q", what, domain, got.patch.Patch, got.msg, want == "", want)
				}
			}
		}
	})

	t.Run("a Harvester of one host: no patch, nowhere to migrate", func(t *testing.T) {
		scheme, err := NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
			Status: clusterv1.ClusterStatus{FailureDomains: []clusterv1.FailureDomain{{Name: "harvester-1", Attributes: map[string]string{build.FailureDomainHostsKey: "1"}}}}}
		h := &InPlaceUpdates{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(cluster).WithStatusSubresource(cluster).Build()}
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.MachineSet = clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers"}, Spec: clusterv1.MachineSetSpec{ClusterName: "c"}}
		req.Current.InfrastructureMachineTemplate = template(spec(nil))
		req.Desired.InfrastructureMachineTemplate = template(spec(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 3 }))
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		h.CanUpdateMachineSet(context.Background(), req, resp)
		if resp.InfrastructureMachineTemplatePatch.IsDefined() || !strings.Contains(resp.Message, "has one host") {
			t.Errorf("patch %s message %q, want none and why", resp.InfrastructureMachineTemplatePatch.Patch, resp.Message)
		}
	})

	t.Run("another provider's template: no patch", func(t *testing.T) {
		other := runtime.RawExtension{Raw: []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"DockerMachineTemplate","spec":{"template":{"spec":{"cpu":2}}}}`)}
		resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
		req := &runtimehooksv1.CanUpdateMachineSetRequest{}
		req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate = other, other
		h.CanUpdateMachineSet(context.Background(), req, resp)
		if resp.Status != runtimehooksv1.ResponseStatusSuccess || resp.InfrastructureMachineTemplatePatch.IsDefined() {
			t.Errorf("answer %+v, want Success without a patch", resp)
		}
	})
}

// UpdateMachine reports the machine's resize as its reconcile records it.
func TestInPlaceUpdateExtensionReportsTheResize(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	stored := func(cpu int32, c *metav1.Condition) *infrav1.HarvesterMachine {
		hm := &infrav1.HarvesterMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Generation: 2},
			Spec: infrav1.HarvesterMachineSpec{CPU: cpu, MaxCPU: 4, Memory: resource.MustParse("4Gi"),
				Disks: []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}}},
		}
		if c != nil {
			hm.Status.Conditions = []metav1.Condition{*c}
		}
		return hm
	}
	cond := func(status metav1.ConditionStatus, reason, message string, generation int64) *metav1.Condition {
		return &metav1.Condition{Type: infrav1.ResourcesUpToDateCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
	}
	desired := stored(3, nil)
	desired.TypeMeta = metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "HarvesterMachine"}
	raw, _ := json.Marshal(desired)
	for _, tc := range []struct {
		name   string
		stored *infrav1.HarvesterMachine
		// wantStatus, wantRetry and a substring of the message.
		wantStatus runtimehooksv1.ResponseStatus
		wantRetry  int32
		wantMsg    string
	}{
		{"the machine is gone", nil, runtimehooksv1.ResponseStatusFailure, 0, "HarvesterMachine ns/m is gone"},
		{"the copy read is older than the change", stored(2, cond(metav1.ConditionTrue, infrav1.ReadyReason, "", 2)), runtimehooksv1.ResponseStatusSuccess, InPlaceUpdateRetry, "waiting for the HarvesterMachine's change"},
		{"the reconcile has not seen the change", stored(3, cond(metav1.ConditionTrue, infrav1.ReadyReason, "", 1)), runtimehooksv1.ResponseStatusSuccess, InPlaceUpdateRetry, "waiting for the machine's reconcile"},
		{"KubeVirt migrates the VM", stored(3, cond(metav1.ConditionFalse, infrav1.ResizingReason, "KubeVirt is giving the running VM 3 CPUs (has 2)", 2)), runtimehooksv1.ResponseStatusSuccess, InPlaceUpdateRetry, "3 CPUs (has 2)"},
		{"done", stored(3, cond(metav1.ConditionTrue, infrav1.ReadyReason, "", 2)), runtimehooksv1.ResponseStatusSuccess, 0, "the VM has 3 CPUs and 4Gi memory"},
		{"KubeVirt needs a restart", stored(3, cond(metav1.ConditionFalse, infrav1.ResizeNeedsRestartReason, "Memory-hotplug failed", 2)), runtimehooksv1.ResponseStatusFailure, 0, "RestartRequired: Memory-hotplug failed"},
		{"Harvester refused", stored(3, cond(metav1.ConditionFalse, infrav1.ResizeRefusedReason, "denied", 2)), runtimehooksv1.ResponseStatusFailure, 0, "ResizeRefused: denied"},
		{"no resize reported yet (the VM's condition is no answer)", stored(3, &metav1.Condition{Type: infrav1.VirtualMachineReadyCondition, Status: metav1.ConditionTrue, Reason: infrav1.ReadyReason, ObservedGeneration: 2}),
			runtimehooksv1.ResponseStatusSuccess, InPlaceUpdateRetry, "waiting for the machine's reconcile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme)
			if tc.stored != nil {
				b = b.WithObjects(tc.stored)
			}
			h := &InPlaceUpdates{Reader: b.Build()}
			req := &runtimehooksv1.UpdateMachineRequest{}
			req.Desired.InfrastructureMachine = runtime.RawExtension{Raw: raw}
			resp := &runtimehooksv1.UpdateMachineResponse{}
			h.UpdateMachine(context.Background(), req, resp)
			if resp.Status != tc.wantStatus || resp.RetryAfterSeconds != tc.wantRetry || !strings.Contains(resp.Message, tc.wantMsg) {
				t.Errorf("answer %s retry %d %q, want %s retry %d %q", resp.Status, resp.RetryAfterSeconds, resp.Message, tc.wantStatus, tc.wantRetry, tc.wantMsg)
			}
		})
	}
}
