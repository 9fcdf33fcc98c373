package harvestersim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The resource part of Harvester's VirtualMachine admission webhook, transcribed from
// github.com/harvester/harvester v1.8.0 (pkg/webhook/resources/virtualmachine: mutator.go's
// patchResourceOvercommit and generateMemoryPatch, validator.go's checkReservedMemoryAnnotation)
// until Harvester's own webhook server runs in the bed (docs/development.md says what blocks it):
//   - requests are the limits scaled down by the `overcommit-config` setting (cpu x 100 / its cpu
//     percentage; memory x 100 / its memory percentage, rounded down to MiB), except that a VM
//     with dedicated CPUs keeps its limits and one with host devices requests its guest memory;
//   - guest memory is the memory limit less the `harvesterhci.io/reservedMemory` annotation, or,
//     without it, less 100Mi unless the `additional-guest-memory-overhead-ratio` setting is set
//     (Harvester v1.8's default, "1.5", is: no reservation); a VM with
//     `harvesterhci.io/enableCPUAndMemoryHotplug: "true"` starts from its own guest memory;
//   - `cpu.maxSockets` is 1 unless hotplug is on;
//   - the validator refuses a reservation that is not below the memory limit, or that with the
//     guest memory exceeds it.
//
// It does this on create, and on update only when the limits, the reservation or dedicated CPU
// placement change (needUpdateResourceOvercommit). Without the `overcommit-config` setting it
// changes nothing, as Harvester's does. Not transcribed: the KubeVirt CR's default architecture
// (the simulated hosts are x86-64), affinity, MAC addresses, run strategy and the rest of the
// mutator and validator.
const (
	vmMutatePath   = "/mutate-harvester-virtualmachine"
	vmValidatePath = "/validate-harvester-virtualmachine"

	// SettingOvercommit and SettingOverheadRatio are the settings the VM mutator reads; the
	// simulator seeds them with Harvester v1.8's defaults (pkg/settings/settings.go).
	SettingOvercommit           = "overcommit-config"
	SettingOverheadRatio        = "additional-guest-memory-overhead-ratio"
	defaultOvercommit           = `{"cpu":1000,"memory":150,"storage":100}`
	defaultOverheadRatio        = "1.5"
	annotationReservedMemory    = "harvesterhci.io/reservedMemory"
	annotationCPUMemoryHotplug  = "harvesterhci.io/enableCPUAndMemoryHotplug"
	legacyReservedMemory        = 100 * 1024 * 1024
	minimumGuestMemory          = 10 * 1024 * 1024
	memoryRequestRoundingFactor = 1024 * 1024
)

type overcommit struct {
	CPU    int64 `json:"cpu"`
	Memory int64 `json:"memory"`
}

type vmAdmission struct{ reader client.Reader }

func (a *vmAdmission) Default(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	if vm.DeletionTimestamp != nil || vm.Spec.Template == nil {
		return nil
	}
	if req, err := admission.RequestFromContext(ctx); err == nil && len(req.OldObject.Raw) > 0 {
		old := &kubevirtv1.VirtualMachine{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return err
		}
		if !resourcesChanged(old, vm) {
			return nil
		}
	}
	oc, err := a.overcommit(ctx)
	if err != nil || oc == nil {
		return err
	}
	ratioSet, err := a.overheadRatioSet(ctx)
	if err != nil {
		return err
	}
	domain := &vm.Spec.Template.Spec.Domain
	if domain.Resources.Requests == nil {
		domain.Resources.Requests = corev1.ResourceList{}
	}
	if cpu := domain.Resources.Limits.Cpu(); !cpu.IsZero() {
		milli := cpu.MilliValue()
		if !dedicatedCPU(vm) {
			milli = milli * 100 / oc.CPU
		}
		domain.Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, cpu.Format)
	}
	mem := domain.Resources.Limits.Memory()
	if mem.IsZero() {
		return nil
	}
	request := resource.NewQuantity(mem.Value()*100/oc.Memory/memoryRequestRoundingFactor*memoryRequestRoundingFactor, mem.Format)
	hotplug := strings.EqualFold(vm.Annotations[annotationCPUMemoryHotplug], "true")
	reserved := *resource.NewQuantity(legacyReservedMemory, resource.BinarySI)
	reserve := true
	if s := vm.Annotations[annotationReservedMemory]; s != "" {
		if reserved, err = resource.ParseQuantity(s); err != nil {
			return fmt.Errorf("annotation %v can't be converted to memory unit", annotationReservedMemory)
		}
		if reserved.Value() >= mem.Value() {
			return fmt.Errorf("reservedMemory can't be equal or greater than limits.memory  %v %v", reserved.Value(), mem.Value())
		}
	} else if ratioSet {
		reserve = false
	}
	guest := mem.DeepCopy()
	if hotplug && domain.Memory != nil && domain.Memory.Guest != nil {
		guest = domain.Memory.Guest.DeepCopy()
	}
	if reserve {
		guest.Sub(reserved)
	}
	if guest.Value() < minimumGuestMemory {
		return fmt.Errorf("guest memory is under the minimum requirement (10 Mi), original: %v, final: %v", mem.Value(), guest.Value())
	}
	switch {
	case dedicatedCPU(vm):
		request = mem
	case len(domain.Devices.HostDevices) > 0 || len(domain.Devices.GPUs) > 0:
		request = ptr.To(guest.DeepCopy())
	}
	domain.Resources.Requests[corev1.ResourceMemory] = *request
	switch {
	case domain.Memory == nil:
		domain.Memory = &kubevirtv1.Memory{Guest: &guest}
	case !hotplug:
		domain.Memory.Guest = &guest
	}
	if !hotplug && vm.Spec.Template.Spec.Architecture != "arm64" {
		if domain.CPU == nil {
			domain.CPU = &kubevirtv1.CPU{}
		}
		domain.CPU.MaxSockets = 1
	}
	return nil
}

// resourcesChanged is needUpdateResourceOvercommit: what makes the mutator recompute on update.
func resourcesChanged(old, vm *kubevirtv1.VirtualMachine) bool {
	if old.Spec.Template == nil {
		return true
	}
	newLimits, oldLimits := vm.Spec.Template.Spec.Domain.Resources.Limits, old.Spec.Template.Spec.Domain.Resources.Limits
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		n, o := newLimits[name], oldLimits[name]
		if !n.IsZero() && (o.IsZero() || !n.Equal(o)) {
			return true
		}
	}
	if vm.Annotations[annotationReservedMemory] != old.Annotations[annotationReservedMemory] {
		return true
	}
	return dedicatedCPU(old) != dedicatedCPU(vm) ||
		len(old.Spec.Template.Spec.Domain.Devices.HostDevices)+len(old.Spec.Template.Spec.Domain.Devices.GPUs) !=
			len(vm.Spec.Template.Spec.Domain.Devices.HostDevices)+len(vm.Spec.Template.Spec.Domain.Devices.GPUs)
}

func dedicatedCPU(vm *kubevirtv1.VirtualMachine) bool {
	cpu := vm.Spec.Template.Spec.Domain.CPU
	return cpu != nil && cpu.DedicatedCPUPlacement
}

func (a *vmAdmission) setting(ctx context.Context, name string) (string, bool, error) {
	s := &harvesterv1.Setting{}
	if err := a.reader.Get(ctx, client.ObjectKey{Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	if s.Value != "" {
		return s.Value, true, nil
	}
	return s.Default, true, nil
}

func (a *vmAdmission) overcommit(ctx context.Context) (*overcommit, error) {
	value, ok, err := a.setting(ctx, SettingOvercommit)
	if err != nil || !ok {
		return nil, err
	}
	oc := &overcommit{}
	if err := json.Unmarshal([]byte(value), oc); err != nil {
		return nil, err
	}
	if oc.CPU <= 0 || oc.Memory <= 0 {
		return nil, fmt.Errorf("setting %s: %q has no cpu or memory percentage", SettingOvercommit, value)
	}
	return oc, nil
}

// overheadRatioSet: the setting names a ratio other than 0 (AdditionalGuestMemoryOverheadRatioConfig.IsEmpty).
func (a *vmAdmission) overheadRatioSet(ctx context.Context) (bool, error) {
	value, ok, err := a.setting(ctx, SettingOverheadRatio)
	if err != nil || !ok {
		return false, err
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return false, nil
	}
	r, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return false, fmt.Errorf("value %v can't be converted to float64, error:%w", value, err)
	}
	return r != 0, nil
}

func (a *vmAdmission) ValidateCreate(_ context.Context, vm *kubevirtv1.VirtualMachine) (admission.Warnings, error) {
	return nil, checkReservedMemory(vm)
}

func (a *vmAdmission) ValidateUpdate(_ context.Context, _, vm *kubevirtv1.VirtualMachine) (admission.Warnings, error) {
	if vm.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, checkReservedMemory(vm)
}

func (a *vmAdmission) ValidateDelete(context.Context, *kubevirtv1.VirtualMachine) (admission.Warnings, error) {
	return nil, nil
}

func checkReservedMemory(vm *kubevirtv1.VirtualMachine) error {
	if vm.Spec.Template == nil {
		return nil
	}
	mem := vm.Spec.Template.Spec.Domain.Resources.Limits.Memory()
	s := vm.Annotations[annotationReservedMemory]
	if mem.IsZero() || s == "" {
		return nil
	}
	field := fmt.Sprintf("metadata.annotations[%s]", annotationReservedMemory)
	reserved, err := resource.ParseQuantity(s)
	if err != nil {
		return invalid(field, err.Error())
	}
	if reserved.Cmp(*mem) >= 0 {
		return invalid(field, "reservedMemory cannot be equal or greater than limits.memory")
	}
	if m := vm.Spec.Template.Spec.Domain.Memory; m != nil && m.Guest != nil {
		total := m.Guest.DeepCopy()
		total.Add(reserved)
		if total.Cmp(*mem) > 0 {
			return invalid(field, fmt.Sprintf("guest memory %v plus reservedMemory %v cannot be greater than limits.memory %v",
				m.Guest.Value(), reserved.Value(), mem.Value()))
		}
	}
	if reserved.Sign() < 0 {
		return invalid(field, "reservedMemory cannot be less than 0")
	}
	return nil
}

// invalid is Harvester's werror.NewInvalidError as its webhook answers it: a 422 whose message
// names the field.
func invalid(field, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422,
		Reason: metav1.StatusReasonInvalid, Message: fmt.Sprintf("%s: %s", field, msg)}}
}

// vmWebhooks are the configurations; envtest points them at the simulator's manager. The
// mutator fails open and the validator closed, as Harvester registers them.
func vmWebhooks() ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration) {
	rule := []admissionv1.RuleWithOperations{{
		Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
		Rule: admissionv1.Rule{APIGroups: []string{kubevirtv1.SchemeGroupVersion.Group}, APIVersions: []string{"v1"},
			Resources: []string{"virtualmachines"}, Scope: ptr.To(admissionv1.NamespacedScope)},
	}}
	ref := func(path string) admissionv1.WebhookClientConfig {
		return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
			Namespace: "harvester-system", Name: "harvester-webhook", Path: ptr.To(path)}}
	}
	return []*admissionv1.MutatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "harvester-mutator"},
			Webhooks: []admissionv1.MutatingWebhook{{
				Name: "mutator.harvester-system.harvester-webhook", ClientConfig: ref(vmMutatePath), Rules: rule,
				FailurePolicy: ptr.To(admissionv1.Ignore), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}}, []*admissionv1.ValidatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "harvester-validator"},
			Webhooks: []admissionv1.ValidatingWebhook{{
				Name: "validator.harvester-system.harvester-webhook", ClientConfig: ref(vmValidatePath), Rules: rule,
				FailurePolicy: ptr.To(admissionv1.Fail), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}}
}

// setupVMWebhooks serves them from the simulator's manager.
func setupVMWebhooks(mgr ctrl.Manager) error {
	a := &vmAdmission{reader: mgr.GetAPIReader()}
	mgr.GetWebhookServer().Register(vmMutatePath, admission.WithDefaulter[*kubevirtv1.VirtualMachine](mgr.GetScheme(), a))
	mgr.GetWebhookServer().Register(vmValidatePath, admission.WithValidator[*kubevirtv1.VirtualMachine](mgr.GetScheme(), a))
	return nil
}
