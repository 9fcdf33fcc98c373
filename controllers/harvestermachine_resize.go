package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// reconcileResources gives a resizable machine's VM the CPUs and memory of its spec, which may
// have grown since the VM was made (Cluster API's in-place updates write the new template's
// values into the machine; the webhook lets them only grow, up to the maximums), and reports in
// ResourcesUpToDate how far KubeVirt is: it patches the VM's sockets and guest memory as
// Harvester's own hotplug action does, KubeVirt's VM controller hands them to the running VMI
// and its workload updater migrates the VMI, whose target takes them
// (docs/decisions/0008-in-place-updates.md). A conflict is returned for the caller to read the
// VM again; other Harvester errors are transport errors.
func (r *HarvesterMachineReconciler) reconcileResources(ctx context.Context, s *machineScope, vms vmService, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	hm := s.hm
	if !hm.Spec.Resizable() {
		return nil
	}
	sockets, guest := wantedSize(&hm.Spec)
	domain := vm.Spec.Template.Spec.Domain
	var setSockets *uint32
	var setGuest *resource.Quantity
	if sockets != nil && (domain.CPU == nil || domain.CPU.Sockets != *sockets) {
		setSockets = sockets
	}
	if guest != nil && (domain.Memory == nil || domain.Memory.Guest == nil || !domain.Memory.Guest.Equal(*guest)) {
		setGuest = guest
	}
	if setSockets != nil || setGuest != nil {
		err := vms.Resize(ctx, vm, setSockets, setGuest)
		switch {
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			r.Recorder.Eventf(hm, nil, corev1.EventTypeWarning, infrav1.ResizeRefusedReason, "Resize", "VM %s/%s: %s", vm.Namespace, vm.Name, err.Error())
			setResourcesCondition(hm, metav1.ConditionFalse, infrav1.ResizeRefusedReason, "the VM's new size was refused: "+err.Error())
			return nil
		case err != nil:
			return err
		}
		r.Recorder.Eventf(hm, nil, corev1.EventTypeNormal, infrav1.ResizingReason, "Resize", "Resizing VM %s/%s to %s", vm.Namespace, vm.Name, sizeText(&hm.Spec))
		setResourcesCondition(hm, metav1.ConditionFalse, infrav1.ResizingReason, "asked KubeVirt for "+sizeText(&hm.Spec))
		return nil
	}
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineRestartRequired && c.Status == corev1.ConditionTrue {
			setResourcesCondition(hm, metav1.ConditionFalse, infrav1.ResizeNeedsRestartReason,
				fmt.Sprintf("KubeVirt cannot give the running VM %s: %s", sizeText(&hm.Spec), c.Message))
			return nil
		}
	}
	if pending := pendingResize(vmi, sockets, guest); pending != "" {
		setResourcesCondition(hm, metav1.ConditionFalse, infrav1.ResizingReason, pending)
		return nil
	}
	setResourcesCondition(hm, metav1.ConditionTrue, infrav1.ReadyReason, "")
	return nil
}

// wantedSize is the VM's CPU sockets and guest memory a resizable machine's spec asks for (nil
// for what the machine cannot resize: a machine without maxCPU has one socket of cpu cores).
func wantedSize(spec *infrav1.HarvesterMachineSpec) (*uint32, *resource.Quantity) {
	var sockets *uint32
	var guest *resource.Quantity
	if spec.MaxCPU != 0 {
		sockets = ptr.To(uint32(spec.CPU)) //nolint:gosec // validated 1..512
	}
	if spec.MaxMemory != nil {
		guest = ptr.To(build.GuestMemory(spec))
	}
	return sockets, guest
}

// pendingResize says what the running VMI does not have yet of the wanted size, "" when it has
// it all (or does not run: a VM that starts takes its template's size).
func pendingResize(vmi *kubevirtv1.VirtualMachineInstance, sockets *uint32, guest *resource.Quantity) string {
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Running {
		return ""
	}
	var waiting []string
	if sockets != nil && (vmi.Status.CurrentCPUTopology == nil || vmi.Status.CurrentCPUTopology.Sockets < *sockets) {
		have := uint32(0)
		if t := vmi.Status.CurrentCPUTopology; t != nil {
			have = t.Sockets
		}
		waiting = append(waiting, fmt.Sprintf("%d CPUs (has %d)", *sockets, have))
	}
	if guest != nil {
		var have *resource.Quantity
		if m := vmi.Status.Memory; m != nil {
			have = m.GuestRequested
		}
		if have == nil || have.Cmp(*guest) < 0 {
			had := "?"
			if have != nil {
				had = have.String()
			}
			waiting = append(waiting, fmt.Sprintf("%s guest memory (has %s)", guest.String(), had))
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	msg := "KubeVirt is giving the running VM " + strings.Join(waiting, " and ")
	for _, c := range vmi.Status.Conditions {
		if (c.Type == kubevirtv1.VirtualMachineInstanceVCPUChange || c.Type == kubevirtv1.VirtualMachineInstanceMemoryChange) && c.Message != "" {
			msg += "; " + string(c.Type) + ": " + c.Message
		}
	}
	if ms := vmi.Status.MigrationState; ms != nil && !ms.Completed {
		msg += "; migrating to " + ms.TargetNode
	}
	return msg
}

// sizeText is a spec's CPUs and memory as events and conditions say them.
func sizeText(spec *infrav1.HarvesterMachineSpec) string {
	return fmt.Sprintf("%d CPUs and %s memory", spec.CPU, spec.Memory.String())
}

func setResourcesCondition(hm *infrav1.HarvesterMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hm, metav1.Condition{
		Type: infrav1.ResourcesUpToDateCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: hm.Generation,
	})
}
