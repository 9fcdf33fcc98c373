package harvester

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// ReferenceError is a problem with something a machine refers to on Harvester; Reason is one of
// the API's condition reasons, and the message says what to fix.
type ReferenceError struct {
	Reason  string
	Message string
}

func (e *ReferenceError) Error() string { return e.Message }

// CloudInitSecretName is the Secret on Harvester that holds a machine's cloud-init data.
func CloudInitSecretName(machine string) string { return boundedName(machine+"-cloudinit", 253) }

// MachineService does the Harvester side of a HarvesterMachine.
type MachineService struct {
	C *Client
}

// Resolved is what a machine's references resolve to.
type Resolved struct {
	Images        map[string]Image
	KeyPairs      []string // namespace/name
	SSHPublicKeys []string
}

// ResolveReferences checks the images (present, imported), keypairs and networks a machine
// names, live (a cache would hide a fix), and returns what the VM needs of them.
func (s *MachineService) ResolveReferences(ctx context.Context, spec *infrav1.HarvesterMachineSpec, namespace string) (*Resolved, error) {
	r := &Resolved{Images: map[string]Image{}}
	for _, d := range spec.Disks {
		if d.Image == "" || r.Images[d.Image].Name != "" {
			continue
		}
		ns, name := ResolveRef(d.Image, namespace)
		img := &harvesterv1.VirtualMachineImage{}
		if err := s.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, img); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &ReferenceError{Reason: infrav1.ImageNotFoundReason, Message: fmt.Sprintf("image %s/%s does not exist on Harvester", ns, name)}
			}
			return nil, fmt.Errorf("reading image %s/%s: %w", ns, name, err)
		}
		if !imageImported(img) || img.Status.StorageClassName == "" {
			return nil, &ReferenceError{Reason: infrav1.ImageNotImportedReason, Message: fmt.Sprintf("image %s/%s is not imported yet (%d%%)", ns, name, img.Status.Progress)}
		}
		r.Images[d.Image] = Image{Namespace: ns, Name: name, StorageClassName: img.Status.StorageClassName}
	}
	for _, ref := range spec.SSHKeyPairs {
		ns, name := ResolveRef(ref, namespace)
		kp := &harvesterv1.KeyPair{}
		if err := s.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kp); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &ReferenceError{Reason: infrav1.KeyPairNotFoundReason, Message: fmt.Sprintf("keypair %s/%s does not exist on Harvester", ns, name)}
			}
			return nil, fmt.Errorf("reading keypair %s/%s: %w", ns, name, err)
		}
		r.KeyPairs = append(r.KeyPairs, ns+"/"+name)
		r.SSHPublicKeys = append(r.SSHPublicKeys, strings.TrimSpace(kp.Spec.PublicKey))
	}
	for _, n := range spec.Networks {
		ns, name := ResolveRef(n.NetworkName, namespace)
		nad := &unstructured.Unstructured{}
		nad.SetAPIVersion("k8s.cni.cncf.io/v1")
		nad.SetKind("NetworkAttachmentDefinition")
		if err := s.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, nad); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &ReferenceError{Reason: infrav1.NetworkNotFoundReason, Message: fmt.Sprintf("VM network %s/%s does not exist on Harvester", ns, name)}
			}
			return nil, fmt.Errorf("reading VM network %s/%s: %w", ns, name, err)
		}
	}
	return r, nil
}

func imageImported(img *harvesterv1.VirtualMachineImage) bool {
	for _, c := range img.Status.Conditions {
		if c.Type == harvesterv1.ImageImported {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// EnsureCloudInit writes the machine's cloud-init Secret (keys `userdata` and, when set,
// `networkdata`). An existing Secret of another owner is never overwritten.
func (s *MachineService) EnsureCloudInit(ctx context.Context, in *VMInput, userData, networkData []byte) error {
	name := CloudInitSecretName(in.Machine.Name)
	data := map[string][]byte{"userdata": userData}
	if len(networkData) > 0 {
		data["networkdata"] = networkData
	}
	existing := &corev1.Secret{}
	err := s.C.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: name, Labels: MachineLabels(in)},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if err := s.C.Create(ctx, secret); err != nil {
			return fmt.Errorf("creating cloud-init Secret %s/%s: %w", in.Namespace, name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading cloud-init Secret %s/%s: %w", in.Namespace, name, err)
	}
	if !OwnedBy(existing.Labels, in.Machine) {
		return &ReferenceError{Reason: infrav1.NameTakenReason, Message: fmt.Sprintf("Secret %s/%s exists on Harvester and was not made for this machine", in.Namespace, name)}
	}
	if equalData(existing.Data, data) {
		return nil
	}
	existing.Data = data
	if err := s.C.Update(ctx, existing); err != nil {
		return fmt.Errorf("updating cloud-init Secret %s/%s: %w", in.Namespace, name, err)
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

// AdoptCloudInit makes the VM the owner of the cloud-init Secret, so that Harvester's garbage
// collector removes it with the VM even if the provider is gone by then.
func (s *MachineService) AdoptCloudInit(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	name := cloudInitSecretOf(vm)
	if name == "" {
		return nil
	}
	secret := &corev1.Secret{}
	if err := s.C.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: name}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if slices.ContainsFunc(secret.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == vm.UID }) {
		return nil
	}
	secret.OwnerReferences = append(secret.OwnerReferences, metav1.OwnerReference{
		APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID,
	})
	return s.C.Update(ctx, secret)
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

// Cleanup deletes what a machine left besides its VM: its cloud-init Secret and any volume
// labelled as the machine's (Harvester deletes the listed ones with the VM; this catches
// volumes of a VM that was deleted without the list). It reports whether all is gone.
func (s *MachineService) Cleanup(ctx context.Context, m *infrav1.HarvesterMachine, namespace string) (bool, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: CloudInitSecretName(m.Name)}}
	existing := &corev1.Secret{}
	if err := s.C.Get(ctx, client.ObjectKeyFromObject(secret), existing); err == nil {
		if OwnedBy(existing.Labels, m) {
			if err := s.C.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("deleting cloud-init Secret %s/%s: %w", namespace, secret.Name, err)
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return false, err
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	// From the cache: the machine's VM is gone, so no volume of it appears any more, and each
	// deletion's event brings the machine back here.
	if err := s.C.Cache.List(ctx, pvcs, client.InNamespace(namespace), client.MatchingLabels{
		LabelManagedBy: ManagedByValue, LabelMachine: MachineLabelValue(m.Name), LabelMachineNamespace: m.Namespace,
	}); err != nil {
		return false, fmt.Errorf("listing the machine's volumes: %w", err)
	}
	for i := range pvcs.Items {
		if pvcs.Items[i].DeletionTimestamp == nil {
			if err := s.C.Delete(ctx, &pvcs.Items[i]); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("deleting volume %s/%s: %w", namespace, pvcs.Items[i].Name, err)
			}
		}
	}
	return len(pvcs.Items) == 0, nil
}
