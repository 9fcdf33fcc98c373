package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
	} {
		changed := vmi.DeepCopy()
		change(changed)
		g.Expect(passes(vmi, changed)).To(BeTrue(), "VMI %s", name)
	}
}
