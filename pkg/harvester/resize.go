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
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// Resizer is what resizing a machine's VM asks of Harvester (VMService has it): the VM's CPU
// sockets and guest memory, and its volumes' sizes.
type Resizer interface {
	// Resize sets the VM's CPU sockets and guest memory (nil: unchanged), locked to vm's
	// version; a refusal is an Invalid or BadRequest API error.
	Resize(ctx context.Context, vm *kubevirtv1.VirtualMachine, sockets *uint32, guest *resource.Quantity) error
	// Volume reads a volume of the machine's VM (nil when there is none); GrowVolume raises its
	// requested size, locked to its version (a refusal is an Invalid or Forbidden API error).
	Volume(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	GrowVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) error
}

// SizeEvent is an event the controller records on the machine for its resize.
type SizeEvent struct {
	Type, Reason, Note string
}

// SizeReport is where a machine's resize stands: the ResourcesUpToDate condition the controller
// sets (none when Report is false: nothing was ever resized) and the events it records.
type SizeReport struct {
	Report          bool
	Status          metav1.ConditionStatus
	Reason, Message string
	Events          []SizeEvent
}

func (r *SizeReport) set(status metav1.ConditionStatus, reason, message string) {
	r.Report, r.Status, r.Reason, r.Message = true, status, reason, message
}

// ReconcileSize gives a machine's VM the CPUs, memory and disk sizes of its spec, which may have
// grown since the VM was made (Cluster API's in-place updates write the new template's values
// into the machine; the webhook lets them only grow, CPUs and memory up to the maximums), and
// reports how far Harvester and KubeVirt are: it patches the VM's sockets and guest memory as
// Harvester's own hotplug action does (KubeVirt's VM controller hands them to the running VMI
// and its workload updater migrates the VMI, whose target takes them) and raises a grown disk's
// volume request as Harvester's volume expansion does (docs/decisions/0008-in-place-updates.md).
// A refusal is reported, not returned; a conflict is returned for the caller to read the VM
// again; other Harvester errors are transport errors. It reads hm and never changes it.
func ReconcileSize(ctx context.Context, vms Resizer, hm *infrav1.HarvesterMachine, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (SizeReport, error) {
	var rep SizeReport
	disksPending, disksGrown, refused, err := growDisks(ctx, &rep, vms, hm, vm)
	if err != nil || refused {
		return rep, err
	}
	_, inPlace := hm.Annotations[clusterv1.UpdateInProgressAnnotation]
	if !hm.Spec.Resizable() && !disksGrown && !inPlace && conditions.Get(hm, infrav1.ResourcesUpToDateCondition) == nil {
		return rep, nil // nothing was ever resized: no condition to keep
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
			rep.refused(fmt.Sprintf("VM %s/%s", vm.Namespace, vm.Name), err)
			return rep, nil
		case err != nil:
			return rep, err
		}
		rep.Events = append(rep.Events, SizeEvent{Type: corev1.EventTypeNormal, Reason: infrav1.ResizingReason,
			Note: fmt.Sprintf("Resizing VM %s/%s to %s", vm.Namespace, vm.Name, SizeText(&hm.Spec))})
		rep.set(metav1.ConditionFalse, infrav1.ResizingReason, "asked KubeVirt for "+SizeText(&hm.Spec))
		return rep, nil
	}
	if pending := pendingResize(vmi, sockets, guest); pending != "" {
		// KubeVirt resizes a running VM only through a live migration.
		for _, c := range vm.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineRestartRequired && c.Status == corev1.ConditionTrue {
				rep.set(metav1.ConditionFalse, infrav1.ResizeNeedsRestartReason,
					fmt.Sprintf("KubeVirt cannot give the running VM %s: %s", SizeText(&hm.Spec), c.Message))
				return rep, nil
			}
		}
		if migratable, why := LiveMigratable(vmi); !migratable {
			rep.set(metav1.ConditionFalse, infrav1.ResizeNeedsRestartReason, fmt.Sprintf(
				"KubeVirt gives a running VM more CPUs or memory through a live migration, and this VM cannot migrate (%s): it keeps its size until it restarts", why))
			return rep, nil
		}
		disksPending = append([]string{pending}, disksPending...)
	}
	if len(disksPending) > 0 {
		rep.set(metav1.ConditionFalse, infrav1.ResizingReason, strings.Join(disksPending, "; "))
		return rep, nil
	}
	rep.set(metav1.ConditionTrue, infrav1.ReadyReason, "")
	return rep, nil
}

// growDisks asks for the spec's size of each image disk whose volume is smaller (a disk the
// webhook let grow in place) and says what is still missing (pending), whether any disk was or
// is being grown, and whether a refusal was reported. Only image disks grow in place
// (infrav1.InPlaceUpdate).
func growDisks(ctx context.Context, rep *SizeReport, vms Resizer, hm *infrav1.HarvesterMachine, vm *kubevirtv1.VirtualMachine) (pending []string, grown, refused bool, err error) {
	namespace := vm.Namespace
	for i, d := range hm.Spec.Disks {
		if d.Image == "" {
			continue
		}
		name := hm.Spec.DiskName(i)
		claim := build.VolumeClaimOf(vm, hm, name)
		pvc, err := vms.Volume(ctx, namespace, claim)
		if err != nil {
			return nil, false, false, err
		}
		if pvc == nil {
			pending = append(pending, fmt.Sprintf("disk %s: volume %s/%s not found", name, namespace, claim))
			continue
		}
		asked := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if asked.Cmp(d.Size) < 0 {
			err := vms.GrowVolume(ctx, pvc, d.Size)
			switch {
			case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
				rep.refused(fmt.Sprintf("disk %s (volume %s/%s)", name, pvc.Namespace, pvc.Name), err)
				return nil, true, true, nil
			case err != nil:
				return nil, true, false, err
			}
			rep.Events = append(rep.Events, SizeEvent{Type: corev1.EventTypeNormal, Reason: infrav1.ResizingReason,
				Note: fmt.Sprintf("Growing disk %s (volume %s/%s) from %s to %s", name, pvc.Namespace, pvc.Name, asked.String(), d.Size.String())})
			pending, grown = append(pending, fmt.Sprintf("growing disk %s to %s (asked)", name, d.Size.String())), true
			continue
		}
		if have := pvc.Status.Capacity[corev1.ResourceStorage]; have.Cmp(d.Size) < 0 {
			pending, grown = append(pending, fmt.Sprintf("growing disk %s to %s (has %s)", name, d.Size.String(), have.String())), true
		}
	}
	return pending, grown, false, nil
}

// refused reports a size Harvester, KubeVirt or Kubernetes refused, with the refusal as the
// transport classifies it (a Status message cut to its bound, a body that is no Status not
// echoed).
func (r *SizeReport) refused(what string, err error) {
	msg := err.Error()
	if e, ok := transport.AsError(transport.ClassifyError(err, "the new size of "+what)); ok {
		msg = e.Message
	}
	r.Events = append(r.Events, SizeEvent{Type: corev1.EventTypeWarning, Reason: infrav1.ResizeRefusedReason, Note: msg})
	r.set(metav1.ConditionFalse, infrav1.ResizeRefusedReason, "refused: "+msg)
}

// wantedSize is the VM's CPU sockets and guest memory a resizable machine's spec asks for (nil
// for what the machine cannot resize: a machine without maxCPU has one socket of cpu cores).
func wantedSize(spec *infrav1.HarvesterMachineSpec) (*uint32, *resource.Quantity) {
	var sockets *uint32
	var guest *resource.Quantity
	if t := spec.CPUTopology(); t.MaxSockets != 0 {
		sockets = ptr.To(t.Sockets)
	}
	if spec.MaxMemory != nil {
		guest = ptr.To(spec.GuestMemory())
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
		// What the guest has, not what was asked of it.
		var have *resource.Quantity
		if m := vmi.Status.Memory; m != nil {
			have = m.GuestCurrent
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
	if ms := vmi.Status.MigrationState; ms != nil {
		switch {
		case ms.Failed:
			msg += "; the last migration failed"
			if ms.FailureReason != "" {
				msg += ": " + ms.FailureReason
			}
		case !ms.Completed:
			msg += "; migrating to " + ms.TargetNode
		}
	}
	return msg
}

// LiveMigratable reads KubeVirt's LiveMigratable condition of a VMI (true when it is not there)
// and, when it is false, KubeVirt's reason and message.
func LiveMigratable(vmi *kubevirtv1.VirtualMachineInstance) (migratable bool, why string) {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable {
			return c.Status != corev1.ConditionFalse, strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return true, ""
}

// SizeText is a spec's CPUs and memory as events and conditions say them.
func SizeText(spec *infrav1.HarvesterMachineSpec) string {
	return fmt.Sprintf("%d CPUs and %s memory", spec.CPU, spec.Memory.String())
}
