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

// Long file: the VM service (get, create with its cloud-init Secret, observe, adopt, delete)
// and the resolution of the images, key pairs and networks a machine names.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// VMService does the Harvester side of a HarvesterMachine: its VM (ensure, observe, delete), the
// VM's cloud-init Secret and its volumes. Its errors are Errors, or plain errors of the
// management side.
type VMService struct {
	C *transport.Client
	// Guest is the machines' guest cluster: a VM, Secret or volume of a machine's name that
	// is not labelled as this cluster's is another's.
	Guest naming.Guest
	// SharedNamespaces, when not nil, are the only Harvester namespaces besides the machine's
	// own whose images, key pairs and networks a machine may name (a HarvesterClusterIdentity's
	// sharedNamespaces): the identity's reads reach further than the tenant should.
	SharedNamespaces []string
}

// allowed tells whether a reference into namespace ns may be used by a machine of namespace own.
func (s *VMService) allowed(ns, own string) bool {
	return s.SharedNamespaces == nil || ns == own || slices.Contains(s.SharedNamespaces, ns)
}

func (s *VMService) notShared(what, ns, name string) error {
	return transport.ReferenceError(infrav1.ReferenceNotAllowedReason,
		"%s %s/%s is in a Harvester namespace the cluster's HarvesterClusterIdentity does not share (its sharedNamespaces)", what, ns, name)
}

// VMRequest is what a machine's VM is made of: the VM's input (references are resolved here)
// and its cloud-init.
type VMRequest struct {
	build.VMInput
	Bootstrap       []byte
	BootstrapFormat string // CAPI's `format` key of the bootstrap data, if any
	NetworkData     []byte
}

// Get returns the machine's VM: from the connection's cache when it is there (nothing asked of
// Harvester at steady state), else live, since a cache may lag behind a create and a restart
// must never make a second VM, and an absence must be sure before it counts as a deletion. It
// returns nil when there is none, an Error NameTaken when the name holds a VM that is not the
// machine's.
func (s *VMService) Get(ctx context.Context, namespace string, m *infrav1.HarvesterMachine) (*kubevirtv1.VirtualMachine, error) {
	vm := &kubevirtv1.VirtualMachine{}
	key := client.ObjectKey{Namespace: namespace, Name: naming.VMName(m.Name)}
	err := s.C.Cache.Get(ctx, key, vm)
	if apierrors.IsNotFound(err) {
		err = s.C.Get(ctx, key, vm)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, transport.ClassifyError(err, "reading VM "+key.String())
	}
	if !build.OwnedBy(vm.Labels, s.Guest, m) {
		return nil, transport.NameTaken("a VM named %s already exists in Harvester namespace %s and was not made for this machine; it is left untouched", vm.Name, vm.Namespace)
	}
	return vm, nil
}

// Create resolves the machine's references, writes its cloud-init Secret and creates its VM.
// created is false when a VM of that name appeared meanwhile (look at it again).
func (s *VMService) Create(ctx context.Context, req *VMRequest) (vm *kubevirtv1.VirtualMachine, created bool, err error) {
	in := req.VMInput
	in.Guest = s.Guest
	resolved, err := s.resolveReferences(ctx, &in.Machine.Spec, in.Namespace)
	if err != nil {
		return nil, false, err
	}
	in.Images, in.KeyPairs = resolved.Images, resolved.KeyPairs
	userData, _, err := build.BuildUserData(build.UserDataInput{
		Bootstrap: req.Bootstrap, BootstrapFormat: req.BootstrapFormat, SSHPublicKeys: resolved.SSHPublicKeys,
		GuestAgent: in.Machine.Spec.GuestAgent, Extra: in.Machine.Spec.UserData,
	})
	if errors.Is(err, build.ErrUserDataConflict) {
		return nil, false, &transport.Error{Kind: transport.KindInvalid, Reason: infrav1.UserDataConflictReason, Message: err.Error(), Err: err}
	}
	if err != nil {
		return nil, false, &transport.Error{Kind: transport.KindInvalid, Reason: infrav1.UnsupportedBootstrapFormatReason, Message: err.Error(), Err: err}
	}
	in.UserDataSecret = naming.CloudInitSecretName(in.Machine.Name)
	if len(req.NetworkData) > 0 {
		in.NetworkDataSecret = in.UserDataSecret
	}
	if err := s.ensureCloudInit(ctx, &in, userData, req.NetworkData); err != nil {
		return nil, false, err
	}
	vm, err = build.BuildVM(&in)
	if err != nil {
		return nil, false, err
	}
	if err := s.C.Create(ctx, vm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, false, nil
		}
		return nil, false, transport.ClassifyError(err, fmt.Sprintf("creating VM %s/%s", vm.Namespace, vm.Name))
	}
	return vm, true, nil
}

// VMState is what a machine reports of its VM: Ready once the VM runs with an address on its
// management network, else Reason and Message say what it waits for.
type VMState struct {
	Ready           bool
	Reason, Message string
	// Host the VM runs on, and its addresses (management NIC first); VMI is nil before it starts.
	Host      string
	Addresses []corev1.NodeAddress
	VMI       *kubevirtv1.VirtualMachineInstance
}

// Observe reads the VM's instance from the connection's cache (its watch brings the machine
// back on every change) and says how far the VM is.
func (s *VMService) Observe(ctx context.Context, vm *kubevirtv1.VirtualMachine, m *infrav1.HarvesterMachine) (VMState, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.C.Cache.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return VMState{}, transport.ClassifyError(err, "reading the VM's instance")
		}
		st := VMState{Reason: infrav1.VMStartingReason, Message: "waiting for the VM to start"}
		switch vm.Status.PrintableStatus {
		case kubevirtv1.VirtualMachineStatusStopped, kubevirtv1.VirtualMachineStatusStopping:
			st.Reason, st.Message = infrav1.VMStoppedReason, "the VM is stopped"
		case kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding, kubevirtv1.VirtualMachineStatusProvisioning:
			st.Reason, st.Message = infrav1.VMCreatingReason, "waiting for the VM's volumes"
		}
		return st, nil
	}
	st := VMState{Host: vmi.Status.NodeName, VMI: vmi}
	switch vmi.Status.Phase {
	case kubevirtv1.Running:
	case kubevirtv1.Failed:
		st.Reason, st.Message = infrav1.VMFailedReason, "the VM failed on Harvester"
		return st, nil
	default:
		st.Reason, st.Message = vmiWaitReason(vmi)
		return st, nil
	}
	st.Addresses = guestcloud.MachineAddresses(vmi, build.NetworkNames(&m.Spec), naming.VMName(m.Name))
	// A management NIC with claimed static addresses has its address: no need to wait for the
	// guest agent, which an air-gapped guest may not have.
	if !guestcloud.HasInternalIP(st.Addresses) && !hasClaimedManagementAddress(m) {
		st.Reason, st.Message = infrav1.WaitingForIPReason, "the VM runs but its management NIC reports no address yet: "+
			"the image needs a running qemu-guest-agent (spec.guestAgent), or the management NIC static addresses from IP pools"
		return st, nil
	}
	st.Ready = true
	return st, nil
}

// hasClaimedManagementAddress tells whether the machine's management NIC has an address claimed
// from an IP pool.
func hasClaimedManagementAddress(m *infrav1.HarvesterMachine) bool {
	mgmt := build.ManagementNetworkName(&m.Spec)
	return mgmt != "" && slices.ContainsFunc(m.Status.IPAddresses, func(a infrav1.ClaimedIPAddress) bool { return a.Interface == mgmt })
}

// vmiWaitReason says why a VMI that is not running yet waits: unschedulable (KubeVirt copies
// the virt-launcher pod's PodScheduled=False condition to the VMI, with the scheduler's
// message), or on its way.
func vmiWaitReason(vmi *kubevirtv1.VirtualMachineInstance) (string, string) {
	for _, c := range vmi.Status.Conditions {
		if string(c.Type) == string(corev1.PodScheduled) && c.Status == corev1.ConditionFalse {
			msg := "the VM cannot be scheduled: " + c.Message
			if cpu := vmi.Spec.Domain.CPU; cpu != nil && cpu.DedicatedCPUPlacement {
				msg += " (its CPUs are pinned: it runs only on hosts whose CPU manager is enabled, labelled cpumanager=true)"
			}
			return infrav1.VMUnschedulableReason, msg
		}
	}
	return infrav1.VMStartingReason, fmt.Sprintf("the VM is %s", vmi.Status.Phase)
}

// Delete deletes the machine's VM, then what it leaves: its cloud-init Secret and volumes. gone
// tells whether all of it is gone (else an event of the VM's or a volume's deletion comes);
// deleted, whether this call asked Harvester to delete the VM.
func (s *VMService) Delete(ctx context.Context, namespace string, m *infrav1.HarvesterMachine) (gone, deleted bool, err error) {
	vm, err := s.Get(ctx, namespace, m)
	if e, ok := transport.AsError(err); ok && e.Reason == infrav1.NameTakenReason {
		vm, err = nil, nil // another's VM: left alone, and the machine's own things cleaned up
	}
	if err != nil {
		return false, false, err
	}
	if vm != nil {
		if vm.DeletionTimestamp.IsZero() {
			if err := s.C.Delete(ctx, vm); client.IgnoreNotFound(err) != nil {
				return false, false, transport.ClassifyError(err, fmt.Sprintf("deleting VM %s/%s", namespace, vm.Name))
			}
			deleted = true
		}
		return false, deleted, nil
	}
	gone, err = s.cleanup(ctx, m, namespace)
	return gone, false, err
}

// Resolved is what a machine's references resolve to.
type Resolved struct {
	Images        map[string]build.Image
	KeyPairs      []string // namespace/name
	SSHPublicKeys []string
}

// resolveReferences checks the images (present, imported), keypairs and networks a machine
// names, live (a cache would hide a fix), and returns what the VM needs of them.
func (s *VMService) resolveReferences(ctx context.Context, spec *infrav1.HarvesterMachineSpec, namespace string) (*Resolved, error) {
	r := &Resolved{Images: map[string]build.Image{}}
	for _, d := range spec.Disks {
		if d.Image == "" || r.Images[d.Image].Name != "" {
			continue
		}
		ns, name := build.ResolveRef(d.Image, namespace)
		if !s.allowed(ns, namespace) {
			return nil, s.notShared("image", ns, name)
		}
		img := &harvesterv1.VirtualMachineImage{}
		if err := s.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, img); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, transport.ReferenceError(infrav1.ImageNotFoundReason, "image %s/%s does not exist on Harvester", ns, name)
			}
			return nil, transport.ClassifyError(err, fmt.Sprintf("reading image %s/%s", ns, name))
		}
		if !imageImported(img) || img.Status.StorageClassName == "" {
			return nil, transport.ReferenceError(infrav1.ImageNotImportedReason, "image %s/%s is not imported yet (%d%%)", ns, name, img.Status.Progress)
		}
		r.Images[d.Image] = build.Image{Namespace: ns, Name: name, StorageClassName: img.Status.StorageClassName}
	}
	for _, d := range spec.Disks {
		if d.Image == "" && d.StorageClassName != "" {
			if err := s.checkStorageClass(ctx, d.StorageClassName); err != nil {
				return nil, err
			}
		}
	}
	for _, ref := range spec.SSHKeyPairs {
		ns, name := build.ResolveRef(ref, namespace)
		if !s.allowed(ns, namespace) {
			return nil, s.notShared("keypair", ns, name)
		}
		kp := &harvesterv1.KeyPair{}
		if err := s.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kp); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, transport.ReferenceError(infrav1.KeyPairNotFoundReason, "keypair %s/%s does not exist on Harvester", ns, name)
			}
			return nil, transport.ClassifyError(err, fmt.Sprintf("reading keypair %s/%s", ns, name))
		}
		r.KeyPairs = append(r.KeyPairs, ns+"/"+name)
		r.SSHPublicKeys = append(r.SSHPublicKeys, strings.TrimSpace(kp.Spec.PublicKey))
	}
	for _, n := range spec.Networks {
		ns, name := build.ResolveRef(n.NetworkName, namespace)
		if !s.allowed(ns, namespace) {
			return nil, s.notShared("VM network", ns, name)
		}
		nad := &unstructured.Unstructured{}
		nad.SetAPIVersion("k8s.cni.cncf.io/v1")
		nad.SetKind("NetworkAttachmentDefinition")
		if err := s.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, nad); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, transport.ReferenceError(infrav1.NetworkNotFoundReason, "VM network %s/%s does not exist on Harvester", ns, name)
			}
			return nil, transport.ClassifyError(err, fmt.Sprintf("reading VM network %s/%s", ns, name))
		}
	}
	return r, nil
}

// ImageStorageClassParameter is the parameter of a Longhorn storage class that names its backing
// image: Harvester makes such a class for every VM image (lh-<uid>, legacy longhorn-<name>), and
// any volume of that class is a copy of the image.
const ImageStorageClassParameter = "backingImage"

// checkStorageClass refuses, with an identity that confines references (SharedNamespaces), a
// disk whose storage class carries an image: a volume of that class is a copy of the image,
// whichever namespace the image is in, and a disk takes an image only through `image`, which is
// checked against the shared namespaces. Without SharedNamespaces the identity is the tenant's
// own credential, which may create such a volume itself.
func (s *VMService) checkStorageClass(ctx context.Context, name string) error {
	if s.SharedNamespaces == nil {
		return nil
	}
	sc := &storagev1.StorageClass{}
	if err := s.C.Get(ctx, client.ObjectKey{Name: name}, sc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the volume waits for the class, as Kubernetes lets it
		}
		return transport.ClassifyError(err, fmt.Sprintf("reading storage class %s", name))
	}
	if image := sc.Parameters[ImageStorageClassParameter]; image != "" {
		return transport.ReferenceError(infrav1.ReferenceNotAllowedReason,
			"storage class %s carries an image (backing image %s): a disk takes an image through `image`, which names its namespace", name, image)
	}
	return nil
}

func imageImported(img *harvesterv1.VirtualMachineImage) bool {
	for _, c := range img.Status.Conditions {
		if c.Type == harvesterv1.ImageImported {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ensureCloudInit writes the machine's cloud-init Secret (keys `userdata` and, when set,
// `networkdata`). An existing Secret of another owner is never overwritten.
func (s *VMService) ensureCloudInit(ctx context.Context, in *build.VMInput, userData, networkData []byte) error {
	name := naming.CloudInitSecretName(in.Machine.Name)
	data := map[string][]byte{"userdata": userData}
	if len(networkData) > 0 {
		data["networkdata"] = networkData
	}
	existing := &corev1.Secret{}
	err := s.C.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: name, Labels: build.MachineLabels(in)},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if err := s.C.Create(ctx, secret); err != nil {
			return transport.ClassifyError(err, fmt.Sprintf("creating cloud-init Secret %s/%s", in.Namespace, name))
		}
		return nil
	case err != nil:
		return transport.ClassifyError(err, fmt.Sprintf("reading cloud-init Secret %s/%s", in.Namespace, name))
	}
	if !build.OwnedBy(existing.Labels, s.Guest, in.Machine) {
		return transport.NameTaken("Secret %s/%s exists on Harvester and was not made for this machine", in.Namespace, name)
	}
	if equalData(existing.Data, data) {
		return nil
	}
	existing.Data = data
	if err := s.C.Update(ctx, existing); err != nil {
		return transport.ClassifyError(err, fmt.Sprintf("updating cloud-init Secret %s/%s", in.Namespace, name))
	}
	return nil
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// SetRunStrategy sets the VM's run strategy and annotations (a nil value removes one), locked
// to the version of the VM given: a VM that changed since it was read gets a conflict, and the
// machine reads it again. The provider changes a VM only to move it off a host (its host
// maintenance policy). The patch names the annotations it changes and nothing else of the VM's
// metadata: the VM given may be the cache's, which keeps only the annotations the provider
// reads, and a patch computed against it would remove the others when none of those was left.
func (s *VMService) SetRunStrategy(ctx context.Context, vm *kubevirtv1.VirtualMachine, strategy kubevirtv1.VirtualMachineRunStrategy, annotations map[string]*string) error {
	metadata := map[string]any{"resourceVersion": vm.ResourceVersion}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	body, err := json.Marshal(map[string]any{"metadata": metadata, "spec": map[string]any{"runStrategy": strategy}})
	if err != nil {
		return err
	}
	err = s.C.Patch(ctx, vm.DeepCopy(), client.RawPatch(types.MergePatchType, body))
	if apierrors.IsConflict(err) {
		return err // read again: the caller's reconcile starts over from the newer VM
	}
	return transport.ClassifyError(err, fmt.Sprintf("setting the run strategy of VM %s/%s to %s", vm.Namespace, vm.Name, strategy))
}

// Resize sets the CPU sockets and guest memory of the VM's template (nil leaves one as it is),
// locked to vm's version: the two fields KubeVirt changes on a running VM (through a live
// migration, as the KubeVirt CR's workload update strategy allows), and the two Harvester's own
// CPU and memory hotplug action patches.
func (s *VMService) Resize(ctx context.Context, vm *kubevirtv1.VirtualMachine, sockets *uint32, guest *resource.Quantity) error {
	patched := vm.DeepCopy()
	domain := &patched.Spec.Template.Spec.Domain
	if sockets != nil {
		if domain.CPU == nil {
			domain.CPU = &kubevirtv1.CPU{}
		}
		domain.CPU.Sockets = *sockets
	}
	if guest != nil {
		if domain.Memory == nil {
			domain.Memory = &kubevirtv1.Memory{}
		}
		domain.Memory.Guest = ptr.To(guest.DeepCopy())
	}
	err := s.C.Patch(ctx, patched, client.MergeFromWithOptions(vm, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return err // the caller reads the VM again, or reports the refusal
	}
	return transport.ClassifyError(err, fmt.Sprintf("resizing VM %s/%s", vm.Namespace, vm.Name))
}

// Volume reads a volume (PVC) of the connection's cache: its size asked and its capacity; nil
// when there is none.
func (s *VMService) Volume(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.C.Cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, transport.ClassifyError(err, "reading volume "+namespace+"/"+name)
	}
	return pvc, nil
}

// GrowVolume raises a volume's requested size, locked to pvc's version, as Harvester's volume
// expansion does: Kubernetes (the storage class must allow expansion), Harvester's PVC webhook
// (online expansion: KubeVirt's ExpandDisks gate, a provisioner Harvester knows to expand online)
// and the CSI driver decide; a refusal is an Invalid or Forbidden API error.
func (s *VMService) GrowVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	patched := pvc.DeepCopy()
	if patched.Spec.Resources.Requests == nil {
		patched.Spec.Resources.Requests = corev1.ResourceList{}
	}
	patched.Spec.Resources.Requests[corev1.ResourceStorage] = size
	err := s.C.Patch(ctx, patched, client.MergeFromWithOptions(pvc, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
		return err
	}
	return transport.ClassifyError(err, fmt.Sprintf("growing volume %s/%s", pvc.Namespace, pvc.Name))
}

// Host reads a Harvester host (its Node) from the connection's cache.
func (s *VMService) Host(ctx context.Context, name string) (*corev1.Node, error) {
	host := &corev1.Node{}
	if err := s.C.Cache.Get(ctx, client.ObjectKey{Name: name}, host); err != nil {
		return nil, err
	}
	return host, nil
}

// AdoptCloudInit makes the VM the owner of the cloud-init Secret, so that Harvester's garbage
// collector removes it with the VM even if the provider is gone by then.
func (s *VMService) AdoptCloudInit(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	name := cloudInitSecretOf(vm)
	if name == "" {
		return nil
	}
	secret := &corev1.Secret{}
	if err := s.C.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: name}, secret); err != nil {
		return transport.ClassifyError(client.IgnoreNotFound(err), "reading the VM's cloud-init Secret")
	}
	if slices.ContainsFunc(secret.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == vm.UID }) {
		return nil
	}
	secret.OwnerReferences = append(secret.OwnerReferences, metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID,
	})
	return transport.ClassifyError(s.C.Update(ctx, secret), "making the VM the owner of its cloud-init Secret")
}

// cloudInitSecretOf is the user-data Secret a VM's cloud-init disk reads. It is read from the VM
// rather than derived from the VM's name, which may be a hash of the machine's (see VMName).
func cloudInitSecretOf(vm *kubevirtv1.VirtualMachine) string {
	if vm.Spec.Template == nil {
		return ""
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == infrav1.CloudInitDiskName && v.CloudInitNoCloud != nil && v.CloudInitNoCloud.UserDataSecretRef != nil {
			return v.CloudInitNoCloud.UserDataSecretRef.Name
		}
	}
	return ""
}

// cleanup deletes what a machine left besides its VM: its cloud-init Secret and any volume
// labelled as the machine's (Harvester deletes the listed ones with the VM; this catches
// volumes of a VM that was deleted without the list). It reports whether all is gone.
func (s *VMService) cleanup(ctx context.Context, m *infrav1.HarvesterMachine, namespace string) (bool, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: naming.CloudInitSecretName(m.Name)}}
	existing := &corev1.Secret{}
	if err := s.C.Get(ctx, client.ObjectKeyFromObject(secret), existing); err == nil {
		if build.OwnedBy(existing.Labels, s.Guest, m) {
			if err := s.C.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
				return false, transport.ClassifyError(err, fmt.Sprintf("deleting cloud-init Secret %s/%s", namespace, secret.Name))
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return false, transport.ClassifyError(err, "reading the machine's cloud-init Secret")
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	// From the cache: the machine's VM is gone, so no volume of it appears any more, and each
	// deletion's event brings the machine back here.
	if err := s.C.Cache.List(ctx, pvcs, client.InNamespace(namespace), client.MatchingLabels{
		naming.LabelManagedBy: naming.ManagedByValue, naming.LabelCluster: s.Guest.ID(), naming.LabelMachine: naming.MachineLabelValue(m.Name), naming.LabelMachineNamespace: m.Namespace,
	}); err != nil {
		return false, transport.ClassifyError(err, "listing the machine's volumes")
	}
	for i := range pvcs.Items {
		if pvcs.Items[i].DeletionTimestamp == nil {
			if err := s.C.Delete(ctx, &pvcs.Items[i]); client.IgnoreNotFound(err) != nil {
				return false, transport.ClassifyError(err, fmt.Sprintf("deleting volume %s/%s", namespace, pvcs.Items[i].Name))
			}
		}
	}
	return len(pvcs.Items) == 0, nil
}
