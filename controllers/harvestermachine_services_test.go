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
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// fakeHarvester is machineServices and vmService without a Harvester: each answer is the
// test's, and each call is counted.
type fakeHarvester struct {
	connectErr error
	vm         *kubevirtv1.VirtualMachine
	createErr  error
	state      harvester.VMState
	deleted    bool
	// hosts are the Harvester hosts by name (a bare Node when not there).
	hosts map[string]*corev1.Node

	calls []string
	// runStrategies are the run strategies SetRunStrategy set, with the annotations it changed.
	runStrategies []string
	// resizes are Resize's calls ("sockets=N guest=Q", "-" for unchanged); resizeErr its answer.
	resizes   []string
	resizeErr error
	// volumes are the VM's volumes by name (none: not made yet); grown are GrowVolume's calls
	// ("name=size"), growErr its answer.
	volumes map[string]*corev1.PersistentVolumeClaim
	grown   []string
	growErr error
}

func (f *fakeHarvester) Volume(_ context.Context, _, name string) (*corev1.PersistentVolumeClaim, error) {
	return f.volumes[name], nil
}

func (f *fakeHarvester) GrowVolume(_ context.Context, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	f.calls = append(f.calls, "growVolume")
	f.grown = append(f.grown, pvc.Name+"="+size.String())
	return f.growErr
}

func (f *fakeHarvester) connect(context.Context, *machineScope) error {
	f.calls = append(f.calls, "connect")
	return f.connectErr
}

func (f *fakeHarvester) vms(*machineScope, []string) vmService { return f }

func (f *fakeHarvester) release(*machineScope) { f.calls = append(f.calls, "release") }

func (f *fakeHarvester) Get(context.Context, string, *infrav1.HarvesterMachine) (*kubevirtv1.VirtualMachine, error) {
	f.calls = append(f.calls, "get")
	return f.vm, nil
}

func (f *fakeHarvester) Create(_ context.Context, req *harvester.VMRequest) (*kubevirtv1.VirtualMachine, bool, error) {
	f.calls = append(f.calls, "create")
	if f.createErr != nil {
		return nil, false, f.createErr
	}
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Machine.Name}}, true, nil
}

func (f *fakeHarvester) AdoptCloudInit(context.Context, *kubevirtv1.VirtualMachine) error {
	f.calls = append(f.calls, "adopt")
	return nil
}

func (f *fakeHarvester) Observe(context.Context, *kubevirtv1.VirtualMachine, *infrav1.HarvesterMachine) (harvester.VMState, error) {
	f.calls = append(f.calls, "observe")
	return f.state, nil
}

func (f *fakeHarvester) Delete(context.Context, string, *infrav1.HarvesterMachine) (bool, bool, error) {
	f.calls = append(f.calls, "delete")
	return f.deleted, f.deleted, nil
}

func (f *fakeHarvester) Host(_ context.Context, name string) (*corev1.Node, error) {
	if h, ok := f.hosts[name]; ok {
		return h, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

func (f *fakeHarvester) SetRunStrategy(_ context.Context, _ *kubevirtv1.VirtualMachine, strategy kubevirtv1.VirtualMachineRunStrategy, annotations map[string]*string) error {
	f.calls = append(f.calls, "setRunStrategy")
	keys := slices.Sorted(maps.Keys(annotations))
	for i, k := range keys {
		if v := annotations[k]; v != nil {
			keys[i] = k + "=" + *v
		} else {
			keys[i] = "-" + k
		}
	}
	f.runStrategies = append(f.runStrategies, strings.TrimSpace(string(strategy)+" "+strings.Join(keys, " ")))
	return nil
}

func (f *fakeHarvester) Resize(_ context.Context, _ *kubevirtv1.VirtualMachine, sockets *uint32, guest *resource.Quantity) error {
	f.calls = append(f.calls, "resize")
	call := "sockets=-"
	if sockets != nil {
		call = fmt.Sprintf("sockets=%d", *sockets)
	}
	if guest != nil {
		call += " guest=" + guest.String()
	} else {
		call += " guest=-"
	}
	f.resizes = append(f.resizes, call)
	return f.resizeErr
}

// provisionedClusterMachine is a HarvesterMachine with its finalizer, owned by a Machine with
// bootstrap data, of a Cluster whose HarvesterCluster is provisioned with an owner mark.
func provisionedClusterMachine() (*infrav1.HarvesterMachine, []client.Object) {
	hm, objs := ownedMachine()
	hm.Finalizers = []string{infrav1.MachineFinalizer}
	for _, o := range objs {
		switch o := o.(type) {
		case *clusterv1.Cluster:
			o.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		case *clusterv1.Machine:
			o.Spec.Bootstrap.DataSecretName = ptr.To("m-bootstrap")
		case *infrav1.HarvesterCluster:
			o.Annotations = map[string]string{infrav1.OwnerMarkAnnotation: "0123456789"}
			o.Spec.TargetNamespace = "guests"
		}
	}
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-bootstrap"},
		Data: map[string][]byte{"value": []byte("#cloud-config\n"), "format": []byte("cloud-config")}}
	return hm, append(objs, bootstrap)
}

// The reconciler's decisions on what Harvester answers, through its services seam: no Harvester,
// no bed.
func TestMachineReconcilerDecidesOnWhatHarvesterAnswers(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	running := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "m", UID: "vm-uid"}}
	for _, tc := range []struct {
		name       string
		harvester  *fakeHarvester
		providerID string
		deleting   bool
		// again reconciles a second time (a later event) before the checks.
		again bool
		// wantCalls are the services' calls, in order; wantReason the VirtualMachineReady
		// reason after the reconcile; wantEvent a substring of the one event sent ("" none).
		wantCalls  []string
		wantReason string
		wantEvent  string
		wantErr    bool
		check      func(t *testing.T, got *infrav1.HarvesterMachine, res ctrl.Result)
	}{{
		name:      "no VM yet: it is made, and the machine says so",
		harvester: &fakeHarvester{},
		wantCalls: []string{"connect", "get", "create"}, wantReason: infrav1.VMCreatingReason, wantEvent: "Created VM guests/m",
		check: func(t *testing.T, got *infrav1.HarvesterMachine, res ctrl.Result) {
			if res.RequeueAfter != fallbackRequeue {
				t.Errorf("result %+v: want the fallback re-check only, the VM's events do the rest", res)
			}
		},
	}, {
		name: "Harvester refuses the VM: its words on the machine, an error for controller-runtime's back-off",
		harvester: &fakeHarvester{createErr: &transport.Error{Kind: transport.KindRefused, Reason: infrav1.HarvesterRefusedReason,
			Message: "storage insufficient resources due to resource quota"}},
		wantCalls: []string{"connect", "get", "create"}, wantReason: infrav1.HarvesterRefusedReason, wantErr: true,
		check: func(t *testing.T, got *infrav1.HarvesterMachine, _ ctrl.Result) {
			if c := conditions.Get(got, infrav1.VirtualMachineReadyCondition); c == nil || !strings.Contains(c.Message, "resource quota") {
				t.Errorf("condition %+v: want Harvester's message", c)
			}
		},
	}, {
		name: "Harvester unreachable: said on the machine, retried soon, nothing made",
		harvester: &fakeHarvester{connectErr: &transport.Error{Kind: transport.KindUnreachable, Reason: infrav1.HarvesterUnreachableReason,
			Message: "dial tcp: connection refused"}},
		wantCalls: []string{"connect"}, wantReason: infrav1.HarvesterUnreachableReason,
		check: func(t *testing.T, _ *infrav1.HarvesterMachine, res ctrl.Result) {
			if res.RequeueAfter != unreachableRecheck {
				t.Errorf("result %+v, want a re-check after %s", res, unreachableRecheck)
			}
		},
	}, {
		name:       "the VM of a provisioned machine is gone: reported once, never made again",
		harvester:  &fakeHarvester{},
		providerID: infrav1.ProviderIDPrefix + "old-uid",
		again:      true,
		wantCalls:  []string{"connect", "get", "connect", "get"}, wantReason: infrav1.VMDeletedReason, wantEvent: "deleted outside the provider",
	}, {
		name: "the VM runs: providerID, addresses and host from it, provisioned",
		harvester: &fakeHarvester{vm: running, state: harvester.VMState{Ready: true, Host: "host-1",
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}},
			VMI:       &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}}},
		wantCalls: []string{"connect", "get", "adopt", "observe"}, wantReason: infrav1.ReadyReason,
		check: func(t *testing.T, got *infrav1.HarvesterMachine, _ ctrl.Result) {
			if got.Spec.ProviderID != infrav1.ProviderIDPrefix+"vm-uid" {
				t.Errorf("providerID %q", got.Spec.ProviderID)
			}
			if !ptr.Deref(got.Status.Initialization.Provisioned, false) || got.Status.VirtualMachine.Host != "host-1" {
				t.Errorf("status %+v", got.Status)
			}
			if len(got.Status.Addresses) != 1 || got.Status.Addresses[0].Address != "10.0.0.5" {
				t.Errorf("addresses %+v", got.Status.Addresses)
			}
		},
	}, {
		name:      "deleting, the VM and its volumes gone: the connection is released, then the finalizer",
		harvester: &fakeHarvester{deleted: true},
		deleting:  true,
		wantCalls: []string{"connect", "delete", "release"}, wantEvent: "Deleted VM guests/m",
		check: func(t *testing.T, got *infrav1.HarvesterMachine, _ ctrl.Result) {
			if got != nil {
				t.Errorf("the machine is still there: %+v", got.Finalizers)
			}
		},
	}, {
		name:      "deleting, the VM not gone yet: the finalizer stays",
		harvester: &fakeHarvester{},
		deleting:  true,
		wantCalls: []string{"connect", "delete"}, wantReason: infrav1.DeletingReason,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			hm, objs := provisionedClusterMachine()
			hm.Spec.ProviderID = tc.providerID
			builder := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(hm)
			c := builder.Build()
			if tc.deleting {
				if err := c.Delete(ctx, hm); err != nil {
					t.Fatal(err)
				}
			}
			recorder := events.NewFakeRecorder(10)
			r := &HarvesterMachineReconciler{Client: c, Recorder: recorder, services: tc.harvester}
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)})
			if tc.again && err == nil {
				res, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hm)})
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile: %+v, %v; want an error: %v", res, err, tc.wantErr)
			}
			if strings.Join(tc.harvester.calls, ",") != strings.Join(tc.wantCalls, ",") {
				t.Errorf("calls %v, want %v", tc.harvester.calls, tc.wantCalls)
			}
			got := &infrav1.HarvesterMachine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(hm), got); err != nil {
				got = nil
			}
			if tc.wantReason != "" {
				if got == nil {
					t.Fatal("the machine is gone")
				}
				if reason := conditions.GetReason(got, infrav1.VirtualMachineReadyCondition); reason != tc.wantReason {
					t.Errorf("VirtualMachineReady reason %q, want %q", reason, tc.wantReason)
				}
			}
			var sent []string
			for len(recorder.Events) > 0 {
				sent = append(sent, <-recorder.Events)
			}
			switch {
			case tc.wantEvent == "" && len(sent) > 0:
				t.Errorf("events %v, want none", sent)
			case tc.wantEvent != "" && (len(sent) != 1 || !strings.Contains(sent[0], tc.wantEvent)):
				t.Errorf("events %v, want one saying %q", sent, tc.wantEvent)
			}
			if tc.check != nil {
				tc.check(t, got, res)
			}
		})
	}
}
