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

package harvester

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// resizer answers Resize with err and records the calls; it has no volumes.
type resizer struct {
	err   error
	calls int
}

func (r *resizer) Resize(context.Context, *kubevirtv1.VirtualMachine, *uint32, *resource.Quantity) error {
	r.calls++
	return r.err
}

func (r *resizer) Volume(context.Context, string, string) (*corev1.PersistentVolumeClaim, error) {
	return nil, nil
}

func (r *resizer) GrowVolume(context.Context, *corev1.PersistentVolumeClaim, resource.Quantity) error {
	return nil
}

// ReconcileSize reads the machine and says what to report; the controller writes the condition
// and records the events (controllers/harvestermachine_resize_test.go runs it through the
// reconciler). A refusal is a report with a warning, never an error; a VM that cannot migrate
// waits for a restart, with KubeVirt's reason.
func TestReconcileSizeReportsAndLeavesTheMachineAlone(t *testing.T) {
	g := NewWithT(t)
	hm := &infrav1.HarvesterMachine{Spec: infrav1.HarvesterMachineSpec{
		CPU: 3, MaxCPU: 4, Memory: resource.MustParse("4Gi"), MaxMemory: ptr.To(resource.MustParse("8Gi")),
	}}
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "m"},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				CPU:    &kubevirtv1.CPU{Sockets: 2, Cores: 1, Threads: 1, MaxSockets: 4},
				Memory: &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("4Gi")), MaxGuest: ptr.To(resource.MustParse("8Gi"))},
			},
		}}},
	}
	before := hm.DeepCopy()

	refusal := apierrors.NewBadRequest("no")
	rep, err := ReconcileSize(context.Background(), &resizer{err: refusal}, hm, vm, nil)
	g.Expect(err).NotTo(HaveOccurred(), "a refusal is reported, not returned")
	g.Expect(rep.Report).To(BeTrue())
	g.Expect(rep.Reason).To(Equal(infrav1.ResizeRefusedReason))
	g.Expect(rep.Events).To(ConsistOf(HaveField("Type", corev1.EventTypeWarning)))

	other := apierrors.NewServiceUnavailable("Harvester is busy")
	_, err = ReconcileSize(context.Background(), &resizer{err: other}, hm, vm, nil)
	g.Expect(err).To(HaveOccurred(), "any other failure is returned")

	r := &resizer{}
	rep, err = ReconcileSize(context.Background(), r, hm, vm, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.calls).To(Equal(1))
	g.Expect(rep.Reason).To(Equal(infrav1.ResizingReason))
	g.Expect(rep.Events).To(ConsistOf(HaveField("Note", "Resizing VM guests/m to 3 CPUs and 4Gi memory")))

	// The VM has the size; the running VMI not yet, and it cannot migrate.
	vm.Spec.Template.Spec.Domain.CPU.Sockets = 3
	vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
		Phase:              kubevirtv1.Running,
		CurrentCPUTopology: &kubevirtv1.CPUTopology{Sockets: 2, Cores: 1, Threads: 1},
		Memory:             &kubevirtv1.MemoryStatus{GuestCurrent: ptr.To(resource.MustParse("4Gi"))},
		Conditions: []kubevirtv1.VirtualMachineInstanceCondition{{
			Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
			Reason: "DisksNotLiveMigratable", Message: "a local disk",
		}},
	}}
	rep, err = ReconcileSize(context.Background(), &resizer{}, hm, vm, vmi)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Reason).To(Equal(infrav1.ResizeNeedsRestartReason))
	g.Expect(rep.Message).To(ContainSubstring("DisksNotLiveMigratable: a local disk"))

	g.Expect(hm).To(Equal(before), "the machine is read, never written")
}
