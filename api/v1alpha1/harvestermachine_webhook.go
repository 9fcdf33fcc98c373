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

package v1alpha1

// Long file: the defaulting and validation webhook of HarvesterMachines and their templates, one
// rule per field family, each with its error message.

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"
)

// +kubebuilder:webhook:verbs=create,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvestermachines,versions=v1alpha1,name=default.harvestermachine.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvestermachines,versions=v1alpha1,name=validation.harvestermachine.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// HarvesterMachineWebhook defaults and validates HarvesterMachines. Defaults are applied when a
// machine is made: its spec cannot change after that but for its providerID and a resize within
// its maximums (ValidateUpdate), none of which defaulting touches, so defaulting it again on
// every update could only find nothing to do or make a change that is then refused. The
// validating webhook is not called for updates that leave the spec as it was (CAPI's labels,
// owners and finalizers, the provider's): config/webhook/kustomization.yaml gives it a match
// condition, so each such write costs the apiserver no call to the manager.
type HarvesterMachineWebhook struct{}

var (
	_ admission.Defaulter[*HarvesterMachine] = &HarvesterMachineWebhook{}
	_ admission.Validator[*HarvesterMachine] = &HarvesterMachineWebhook{}
)

// SetupWebhookWithManager registers the webhook with a manager.
func (w *HarvesterMachineWebhook) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &HarvesterMachine{}).WithDefaulter(w).WithValidator(w).Complete()
}

// Default fills in the defaults of a HarvesterMachine.
func (w *HarvesterMachineWebhook) Default(_ context.Context, m *HarvesterMachine) error {
	m.Spec.Default()
	return nil
}

// ValidateCreate checks a new HarvesterMachine.
func (w *HarvesterMachineWebhook) ValidateCreate(_ context.Context, m *HarvesterMachine) (admission.Warnings, error) {
	return nil, invalid("HarvesterMachine", m.Name, m.Spec.validate(field.NewPath("spec")))
}

// ValidateUpdate checks a changed HarvesterMachine. Like every CAPI infrastructure machine, its
// spec is immutable (a change means a new machine), except that the provider fills in
// providerID once and that Cluster API's in-place updates may grow a machine's cpu and memory up
// to its maximums and its image disks (InPlaceUpdate). Those write the new spec together with
// CAPI's update-in-progress annotation (KubeadmControlPlane dry-runs it first, without it): a
// resize without either is refused, so that a machine's size never moves away from what its
// MachineSet's template says, which the next in-place update starts from.
func (w *HarvesterMachineWebhook) ValidateUpdate(ctx context.Context, oldM, newM *HarvesterMachine) (admission.Warnings, error) {
	path := field.NewPath("spec")
	errs := ratchet(newM.Spec.validate(path), oldM.Spec.validate(path))
	if oldM.Spec.ProviderID != "" && newM.Spec.ProviderID != oldM.Spec.ProviderID {
		errs = append(errs, field.Forbidden(path.Child("providerID"), "cannot change once set"))
	}
	oldSpec, refused := InPlaceUpdate(&oldM.Spec, &newM.Spec, path)
	errs = append(errs, refused...)
	resized := !reflect.DeepEqual(oldSpec, oldM.Spec)
	if _, inPlace := newM.Annotations[clusterv1.UpdateInProgressAnnotation]; resized && !inPlace && !isDryRun(ctx) {
		errs = append(errs, field.Forbidden(path, "a running machine is resized only by Cluster API's in-place update (which sets the "+
			clusterv1.UpdateInProgressAnnotation+" annotation); change the machine template instead"))
	}
	newSpec := newM.Spec
	oldSpec.ProviderID, newSpec.ProviderID = "", ""
	if len(refused) == 0 && !reflect.DeepEqual(oldSpec, newSpec) {
		errs = append(errs, field.Forbidden(path, "a HarvesterMachine cannot change; change the machine template and let CAPI roll out new machines"))
	}
	return nil, invalid("HarvesterMachine", newM.Name, errs)
}

// isDryRun says whether the admission request is a dry run (nothing is stored).
func isDryRun(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && req.DryRun != nil && *req.DryRun
}

// ValidateDelete allows every deletion.
func (w *HarvesterMachineWebhook) ValidateDelete(context.Context, *HarvesterMachine) (admission.Warnings, error) {
	return nil, nil
}

// Default fills in the defaults of a HarvesterMachine spec: disk and interface names, the
// virtio bus, the first disk as boot disk, device names, BIOS firmware and the RerunOnFailure
// run strategy.
func (s *HarvesterMachineSpec) Default() {
	anyBootOrder := false
	for i := range s.Disks {
		d := &s.Disks[i]
		d.Name = s.DiskName(i)
		if d.Bus == "" {
			d.Bus = DiskBusVirtio
		}
		anyBootOrder = anyBootOrder || d.BootOrder != nil
	}
	if !anyBootOrder && len(s.Disks) > 0 {
		s.Disks[0].BootOrder = ptr.To[int32](1)
	}
	for i := range s.Networks {
		s.Networks[i].Name = s.NICName(i)
	}
	for i := range s.HostDevices {
		if s.HostDevices[i].Name == "" {
			s.HostDevices[i].Name = fmt.Sprintf("hostdevice-%d", i)
		}
	}
	for i := range s.GPUs {
		if s.GPUs[i].Name == "" {
			s.GPUs[i].Name = fmt.Sprintf("gpu-%d", i)
		}
	}
	if s.Firmware.BootMode == "" {
		s.Firmware.BootMode = BootModeBIOS
	}
	if s.RunStrategy == "" {
		s.RunStrategy = RunStrategyRerunOnFailure
	}
}

func (s *HarvesterMachineSpec) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList

	if s.ProviderID != "" && !strings.HasPrefix(s.ProviderID, ProviderIDPrefix) {
		errs = append(errs, field.Invalid(path.Child("providerID"), s.ProviderID, "must start with "+ProviderIDPrefix))
	}
	switch {
	case s.CPU < 1:
		errs = append(errs, field.Invalid(path.Child("cpu"), s.CPU, "must be at least 1"))
	case s.CPU > MaxCPU:
		errs = append(errs, field.Invalid(path.Child("cpu"), s.CPU, fmt.Sprintf("must be at most %d", MaxCPU)))
	}
	errs = append(errs, validateAtLeast(path.Child("memory"), s.Memory, MinMemory)...)
	if r := s.ReservedMemory; r != nil {
		switch {
		case r.Sign() < 0:
			errs = append(errs, field.Invalid(path.Child("reservedMemory"), r.String(), "must not be negative"))
		case r.Cmp(s.Memory) >= 0:
			errs = append(errs, field.Invalid(path.Child("reservedMemory"), r.String(), "must be less than memory ("+s.Memory.String()+")"))
		}
	}

	errs = append(errs, s.validateHotplugMaximums(path)...)
	errs = append(errs, validateDisks(path.Child("disks"), s.Disks)...)
	errs = append(errs, validateNetworks(path.Child("networks"), s.Networks)...)
	errs = append(errs, validateHostDevices(path, s.HostDevices, s.GPUs)...)
	if s.CPUModel != "" {
		if len(s.CPUModel) > 64 || !cpuModelPattern.MatchString(s.CPUModel) {
			errs = append(errs, field.Invalid(path.Child("cpuModel"), s.CPUModel,
				"must be host-passthrough, host-model or a CPU model name (letters, digits, '.', '_', '-')"))
		}
	}
	errs = append(errs, s.validateNetworkData(path)...)
	if strings.TrimSpace(s.UserData) != "" {
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(s.UserData), &cfg); err != nil {
			// Neither the value nor the parser's message (which may quote it) is echoed: user
			// data may hold credentials.
			errs = append(errs, field.Invalid(path.Child("userData"), "(not shown)", "must be cloud-config, a YAML mapping"))
		}
	}
	errs = append(errs, s.validateGuestAgent(path)...)
	errs = append(errs, validateAffinity(path.Child("affinity"), s.Affinity)...)

	for i, kp := range s.SSHKeyPairs {
		errs = append(errs, validateNamespacedName(path.Child("sshKeyPairs").Index(i), kp, true)...)
	}

	fwPath := path.Child("firmware")
	switch s.Firmware.BootMode {
	case "", BootModeBIOS, BootModeEFI:
	default:
		errs = append(errs, field.NotSupported(fwPath.Child("bootMode"), s.Firmware.BootMode, []BootMode{BootModeBIOS, BootModeEFI}))
	}
	if s.Firmware.SecureBoot && s.Firmware.BootMode != BootModeEFI {
		errs = append(errs, field.Invalid(fwPath.Child("secureBoot"), true, "secure boot requires bootMode EFI"))
	}
	if s.Firmware.PersistentEFIVars && s.Firmware.BootMode != BootModeEFI {
		errs = append(errs, field.Invalid(fwPath.Child("persistentEFIVars"), true, "persistent UEFI variables require bootMode EFI"))
	}
	if s.Firmware.PersistentTPM && !s.Firmware.TPM {
		errs = append(errs, field.Invalid(fwPath.Child("persistentTPM"), true, "a persistent TPM requires tpm"))
	}
	if s.IsolateEmulatorThread && !s.DedicatedCPUPlacement {
		errs = append(errs, field.Invalid(path.Child("isolateEmulatorThread"), true, "an isolated emulator thread requires dedicatedCPUPlacement"))
	}

	switch s.HostMaintenance.Policy {
	case "", HostMaintenanceDrainAndRestart:
	case HostMaintenanceLiveMigrate:
		if len(s.HostDevices) > 0 || len(s.GPUs) > 0 {
			errs = append(errs, field.Invalid(path.Child("hostMaintenance", "policy"), s.HostMaintenance.Policy,
				"a VM with host devices or vGPUs cannot live-migrate: KubeVirt would refuse every eviction of it and block its host's maintenance; use DrainAndRestart"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("hostMaintenance", "policy"), s.HostMaintenance.Policy,
			[]HostMaintenancePolicy{HostMaintenanceLiveMigrate, HostMaintenanceDrainAndRestart}))
	}
	switch s.RunStrategy {
	case "", RunStrategyAlways, RunStrategyRerunOnFailure:
	default:
		errs = append(errs, field.NotSupported(path.Child("runStrategy"), s.RunStrategy, []RunStrategy{RunStrategyRerunOnFailure, RunStrategyAlways}))
	}
	return errs
}

func validateDisks(path *field.Path, disks []Disk) field.ErrorList {
	var errs field.ErrorList
	if len(disks) == 0 {
		return field.ErrorList{field.Required(path, "at least one disk, usually an image-backed root disk")}
	}
	names := map[string]bool{}
	bootOrders := map[int32]bool{}
	for i, d := range disks {
		p := path.Index(i)
		if d.Name != "" {
			for _, msg := range validation.IsDNS1123Label(d.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), d.Name, msg))
			}
			if d.Name == CloudInitDiskName {
				errs = append(errs, field.Invalid(p.Child("name"), d.Name, "is reserved for the cloud-init disk the provider adds"))
			}
			if names[d.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
			}
			names[d.Name] = true
		}
		switch {
		case d.Image == "" && d.StorageClassName == "":
			errs = append(errs, field.Required(p, "set exactly one of image or storageClassName"))
		case d.Image != "" && d.StorageClassName != "":
			errs = append(errs, field.Forbidden(p.Child("storageClassName"), "set exactly one of image or storageClassName: an image disk takes the image's storage class"))
		case d.Image != "":
			errs = append(errs, validateNamespacedName(p.Child("image"), d.Image, true)...)
		default:
			for _, msg := range validation.IsDNS1123Subdomain(d.StorageClassName) {
				errs = append(errs, field.Invalid(p.Child("storageClassName"), d.StorageClassName, msg))
			}
		}
		errs = append(errs, validateAtLeast(p.Child("size"), d.Size, MinDiskSize)...)
		switch d.Bus {
		case "", DiskBusVirtio, DiskBusSCSI, DiskBusSATA:
		default:
			errs = append(errs, field.NotSupported(p.Child("bus"), d.Bus, []DiskBus{DiskBusVirtio, DiskBusSCSI, DiskBusSATA}))
		}
		if d.BootOrder != nil {
			if *d.BootOrder < 1 {
				errs = append(errs, field.Invalid(p.Child("bootOrder"), *d.BootOrder, "must be at least 1"))
			} else if bootOrders[*d.BootOrder] {
				errs = append(errs, field.Duplicate(p.Child("bootOrder"), *d.BootOrder))
			}
			bootOrders[*d.BootOrder] = true
		}
	}
	return errs
}

func validateNetworks(path *field.Path, networks []Network) field.ErrorList {
	var errs field.ErrorList
	if len(networks) == 0 {
		return field.ErrorList{field.Required(path, "at least one network; the management network (the first unless another sets management)")}
	}
	names := map[string]bool{}
	macs := map[string]bool{}
	management := -1
	for i, n := range networks {
		p := path.Index(i)
		if n.Name != "" {
			for _, msg := range validation.IsDNS1123Label(n.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), n.Name, msg))
			}
			if names[n.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), n.Name))
			}
			names[n.Name] = true
		}
		if n.Model != "" && !slices.Contains(NICModels, n.Model) {
			errs = append(errs, field.NotSupported(p.Child("model"), n.Model, NICModels))
		}
		if n.NetworkName == "" {
			errs = append(errs, field.Required(p.Child("networkName"), "the VM network as `namespace/name`"))
		} else {
			errs = append(errs, validateNamespacedName(p.Child("networkName"), n.NetworkName, false)...)
		}
		if n.Management {
			if management >= 0 {
				errs = append(errs, field.Duplicate(p.Child("management"), true))
			}
			management = i
		}
		if n.MACAddress != "" {
			if macErrs := validateMAC(p.Child("macAddress"), n.MACAddress); len(macErrs) > 0 {
				errs = append(errs, macErrs...)
			} else if key := strings.ToLower(n.MACAddress); macs[key] {
				errs = append(errs, field.Duplicate(p.Child("macAddress"), n.MACAddress))
			} else {
				macs[key] = true
			}
		}
		errs = append(errs, validatePoolRefs(p.Child("addressesFromPools"), n.AddressesFromPools)...)
		if len(n.Nameservers) > 0 && len(n.AddressesFromPools) == 0 {
			errs = append(errs, field.Forbidden(p.Child("nameservers"), "only with addressesFromPools: a NIC without pools uses DHCP, which gives its own"))
		}
		for j, ns := range n.Nameservers {
			if net.ParseIP(ns) == nil {
				errs = append(errs, field.Invalid(p.Child("nameservers").Index(j), ns, "must be an IPv4 or IPv6 address"))
			}
		}
	}
	return errs
}

// poolKind is a Kubernetes kind as the API spells them: a letter, then letters and digits.
var poolKind = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

func validatePoolRefs(path *field.Path, refs []IPPoolReference) field.ErrorList {
	var errs field.ErrorList
	seen := map[IPPoolReference]bool{}
	for i, ref := range refs {
		p := path.Index(i)
		if ref.APIGroup == "" {
			errs = append(errs, field.Required(p.Child("apiGroup"), "the pool's API group, e.g. "+IPAMAPIGroup))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(ref.APIGroup) {
				errs = append(errs, field.Invalid(p.Child("apiGroup"), ref.APIGroup, msg))
			}
		}
		if !poolKind.MatchString(ref.Kind) || len(ref.Kind) > 63 {
			errs = append(errs, field.Invalid(p.Child("kind"), ref.Kind, "must be the pool's kind, e.g. InClusterIPPool"))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the pool's name"))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
			}
		}
		if seen[ref] {
			errs = append(errs, field.Duplicate(p, ref.Kind+"/"+ref.Name))
		}
		seen[ref] = true
	}
	return errs
}

// validateGuestAgent refuses `guestAgent: None` on a machine whose management NIC takes no
// static address: only the guest agent would tell its address, and the machine would wait for
// ever.
func (s *HarvesterMachineSpec) validateGuestAgent(path *field.Path) field.ErrorList {
	if s.GuestAgent != GuestAgentNone {
		return nil
	}
	if i := s.ManagementNIC(); i >= 0 && len(s.Networks[i].AddressesFromPools) > 0 {
		return nil
	}
	return field.ErrorList{field.Forbidden(path.Child("guestAgent"),
		"None needs static addresses on the management NIC (addressesFromPools): without qemu-guest-agent Harvester learns no address of the VM; use Enable when the image has the agent")}
}

// validateNetworkData refuses a user's networkData on a machine whose NICs take addresses from
// IP pools: the provider writes the network-data then, and two network configurations for the
// same NICs would have to be merged by guessing which wins.
func (s *HarvesterMachineSpec) validateNetworkData(path *field.Path) field.ErrorList {
	pools := slices.ContainsFunc(s.Networks, func(n Network) bool { return len(n.AddressesFromPools) > 0 })
	if s.NetworkConfigVersion != 0 && !pools {
		return field.ErrorList{field.Forbidden(path.Child("networkConfigVersion"),
			"only with addressesFromPools: it is the version of the network data the provider writes for them (networkData is written by you, in the version you choose)")}
	}
	if s.NetworkData == "" {
		return nil
	}
	for i, n := range s.Networks {
		if len(n.AddressesFromPools) > 0 {
			return field.ErrorList{field.Forbidden(path.Child("networkData"), fmt.Sprintf(
				"must be empty when a NIC takes addresses from IP pools (networks[%d].addressesFromPools): the provider writes the guest's network-data from the claimed addresses; configure the guest's network in the bootstrap data instead, or drop addressesFromPools", i))}
		}
	}
	return nil
}

// validateAsTemplate checks the spec of a machine template: a spec, less what a template must not
// fix because every machine made from it would get the same.
func (s *HarvesterMachineSpec) validateAsTemplate(path *field.Path) field.ErrorList {
	errs := s.validate(path)
	if s.ProviderID != "" {
		errs = append(errs, field.Forbidden(path.Child("providerID"), "must not be set in a template: every machine made from it would claim the same VM"))
	}
	for i, n := range s.Networks {
		if n.MACAddress != "" {
			errs = append(errs, field.Forbidden(path.Child("networks").Index(i).Child("macAddress"), "must not fix a MAC address in a template: every machine made from it would get the same"))
		}
	}
	return errs
}

// cpuModelPattern is the shape of a CPU model: KubeVirt passes it to libvirt as the model name
// (or takes host-passthrough and host-model as modes). The CRD's pattern repeats it.
var cpuModelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// validateHostDevices checks the PCI devices and vGPUs of a machine: names KubeVirt takes,
// unique across both lists (KubeVirt's domain has one namespace of device names), and a
// deviceName that is an extended resource name as the pcidevices add-on advertises them on
// hosts: `<vendor domain>/<name>`.
func validateHostDevices(path *field.Path, hostDevices, gpus []HostDevice) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	// An unnamed device is checked under the name defaulting gives it, so that a spec accepted
	// before defaulting is still accepted after.
	check := func(p *field.Path, d HostDevice, defaultName string) {
		name := d.Name
		if name == "" {
			name = defaultName
		} else {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(p.Child("name"), name, msg))
			}
		}
		if names[name] {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		names[name] = true
		errs = append(errs, validateDeviceResourceName(p.Child("deviceName"), d.DeviceName)...)
	}
	for i, d := range hostDevices {
		check(path.Child("hostDevices").Index(i), d, fmt.Sprintf("hostdevice-%d", i))
	}
	for i, d := range gpus {
		check(path.Child("gpus").Index(i), d, fmt.Sprintf("gpu-%d", i))
	}
	return errs
}

// validateDeviceResourceName checks an extended resource name as a device plugin registers it:
// a qualified name with a domain prefix outside kubernetes.io (which Kubernetes keeps for its
// own resources).
func validateDeviceResourceName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "the resource name the host advertises for the device, e.g. nvidia.com/NVIDIA_A2-4Q")}
	}
	domain, _, ok := strings.Cut(name, "/")
	if !ok {
		return field.ErrorList{field.Invalid(p, name, "must be <vendor domain>/<device>, as the host advertises it, e.g. intel.com/I350_GIGABIT_NETWORK_CONNECTION")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		errs = append(errs, field.Invalid(p, name, "kubernetes.io resources are not devices"))
	}
	return errs
}

// validateAffinity refuses pod (anti-)affinity terms that reach beyond the VM's own namespace on
// Harvester: a term with namespaces or a namespaceSelector would let a tenant probe, through
// where its VM can be scheduled, which hosts run other tenants' VMs.
func validateAffinity(path *field.Path, a *corev1.Affinity) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	check := func(p *field.Path, t corev1.PodAffinityTerm) {
		if len(t.Namespaces) > 0 {
			errs = append(errs, field.Forbidden(p.Child("namespaces"), "pod affinity terms match the VM's own namespace only"))
		}
		if t.NamespaceSelector != nil {
			errs = append(errs, field.Forbidden(p.Child("namespaceSelector"), "pod affinity terms match the VM's own namespace only"))
		}
	}
	terms := func(p *field.Path, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) {
		for i, t := range required {
			check(p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i), t)
		}
		for i, t := range preferred {
			check(p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i).Child("podAffinityTerm"), t.PodAffinityTerm)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		terms(path.Child("podAffinity"), pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		terms(path.Child("podAntiAffinity"), pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return errs
}

// validateHotplugMaximums checks maxCPU and maxMemory: not below cpu and memory, guest memory
// KubeVirt can hot-plug into (at least 1Gi, whole 2Mi blocks), and no devices (KubeVirt changes a
// running VM's CPUs and memory through a live migration, which a VM with devices cannot make).
func (s *HarvesterMachineSpec) validateHotplugMaximums(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MaxCPU != 0 && s.MaxCPU < s.CPU {
		errs = append(errs, field.Invalid(path.Child("maxCPU"), s.MaxCPU, fmt.Sprintf("must be at least cpu (%d)", s.CPU)))
	}
	if s.MaxCPU > MaxCPU {
		errs = append(errs, field.Invalid(path.Child("maxCPU"), s.MaxCPU, fmt.Sprintf("must be at most %d", MaxCPU)))
	}
	if m := s.MaxMemory; m != nil {
		const block = 2 << 20
		guest := s.Memory.DeepCopy()
		maxGuest := m.DeepCopy()
		if r := s.ReservedMemory; r != nil {
			guest.Sub(*r)
			maxGuest.Sub(*r)
		}
		switch {
		case m.Cmp(s.Memory) < 0:
			errs = append(errs, field.Invalid(path.Child("maxMemory"), m.String(), "must be at least memory ("+s.Memory.String()+")"))
		case guest.Cmp(resource.MustParse("1Gi")) < 0:
			errs = append(errs, field.Invalid(path.Child("maxMemory"), m.String(),
				"needs a guest memory (memory less reservedMemory) of at least 1Gi: KubeVirt hot-plugs memory only into such guests"))
		case guest.Value()%block != 0 || maxGuest.Value()%block != 0:
			errs = append(errs, field.Invalid(path.Child("maxMemory"), m.String(),
				"needs the guest memory and its maximum (memory and maxMemory less reservedMemory) in whole 2Mi: KubeVirt hot-plugs memory in such blocks"))
		}
	}
	if (s.MaxCPU != 0 || s.MaxMemory != nil) && (len(s.HostDevices) > 0 || len(s.GPUs) > 0) {
		p := path.Child("maxCPU")
		if s.MaxCPU == 0 {
			p = path.Child("maxMemory")
		}
		errs = append(errs, field.Forbidden(p, "not with hostDevices or gpus: KubeVirt changes a running VM's CPUs and memory through a live migration, which a VM with devices cannot make"))
	}
	return errs
}
