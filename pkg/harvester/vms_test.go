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
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// With a HarvesterClusterIdentity, a machine names images, key pairs and networks of its target
// namespace and of the identity's shared namespaces only: the identity's cluster-wide reads
// would otherwise boot a tenant's VM from another tenant's image on another tenant's network.
func TestReferencesStayInSharedNamespaces(t *testing.T) {
	g := NewWithT(t)
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	c := &transport.Client{Client: fake.NewClientBuilder().WithScheme(scheme).Build()}
	reason := func(svc *VMService, spec infrav1.HarvesterMachineSpec) string {
		_, err := svc.resolveReferences(context.Background(), &spec, "tenant-a")
		e, ok := transport.AsError(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		return e.Reason
	}
	shared := &VMService{C: c, SharedNamespaces: []string{"public"}}
	for _, spec := range []infrav1.HarvesterMachineSpec{
		{Disks: []infrav1.Disk{{Image: "tenant-b/ubuntu"}}},
		{SSHKeyPairs: []string{"tenant-b/ops"}},
		{Networks: []infrav1.Network{{NetworkName: "tenant-b/vlan20"}}},
	} {
		g.Expect(reason(shared, spec)).To(Equal(infrav1.ReferenceNotAllowedReason), "%+v", spec)
		// A Secret identity (no shared list) is the tenant's own credential: its RBAC decides.
		g.Expect(reason(&VMService{C: c}, spec)).NotTo(Equal(infrav1.ReferenceNotAllowedReason), "%+v", spec)
	}
	// A storage class that carries an image (every VM image has one) is an image reference: a
	// disk of that class is a copy of the image, so with shared namespaces it is refused; a
	// plain class is not.
	g.Expect(c.Create(context.Background(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lh-0f3a"}, Provisioner: "driver.longhorn.io",
		Parameters: map[string]string{ImageStorageClassParameter: "vmi-0f3a", "numberOfReplicas": "3"}})).To(Succeed())
	g.Expect(c.Create(context.Background(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "driver.longhorn.io",
		Parameters: map[string]string{"numberOfReplicas": "3"}})).To(Succeed())
	imageClass := infrav1.HarvesterMachineSpec{Disks: []infrav1.Disk{{Name: "disk-0", StorageClassName: "lh-0f3a", Size: resource.MustParse("10Gi")}}}
	g.Expect(reason(shared, imageClass)).To(Equal(infrav1.ReferenceNotAllowedReason))
	_, err = (&VMService{C: c}).resolveReferences(context.Background(), &imageClass, "tenant-a")
	g.Expect(err).NotTo(HaveOccurred(), "a Secret identity's RBAC decides")
	for _, class := range []string{"fast", "not-made-yet"} {
		_, err = shared.resolveReferences(context.Background(), &infrav1.HarvesterMachineSpec{Disks: []infrav1.Disk{{Name: "disk-0", StorageClassName: class, Size: resource.MustParse("10Gi")}}}, "tenant-a")
		g.Expect(err).NotTo(HaveOccurred(), class)
	}

	// The target namespace and a shared one are read (and here found missing).
	g.Expect(reason(shared, infrav1.HarvesterMachineSpec{Disks: []infrav1.Disk{{Image: "public/ubuntu"}}})).To(Equal(infrav1.ImageNotFoundReason))
	g.Expect(reason(shared, infrav1.HarvesterMachineSpec{Disks: []infrav1.Disk{{Image: "ubuntu"}}})).To(Equal(infrav1.ImageNotFoundReason))
}

// A machine's cloud-init Secret is read from its VM, not derived from the machine's name, which
// a long name would not give back.
func TestCloudInitSecretIsReadFromTheVM(t *testing.T) {
	g := NewWithT(t)
	m := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: strings.Repeat("cluster-with-a-long-name-", 4) + "md-0-7c9f8-x2kqz"},
		Spec: infrav1.HarvesterMachineSpec{CPU: 2, Memory: resource.MustParse("4Gi"),
			Disks:    []infrav1.Disk{{Name: "disk-0", StorageClassName: "fast", Size: resource.MustParse("10Gi")}},
			Networks: []infrav1.Network{{Name: "nic-0", NetworkName: "default/vlan10"}}}}
	vm, err := build.BuildVM(&build.VMInput{Machine: m, Namespace: "guests", Guest: naming.Guest{Namespace: "default", Name: "demo"},
		Role: naming.RoleWorker, UserDataSecret: "the-secret"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cloudInitSecretOf(vm)).To(Equal("the-secret"))
}

// SetRunStrategy may be given the cache's copy of a VM, which keeps only the annotations the
// provider reads: removing the last of those must not remove the VM's others (a patch computed
// against the copy would say "annotations: null"), and a VM changed since it was read conflicts.
func TestSetRunStrategyChangesOnlyTheAnnotationsNamed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	c := &transport.Client{Client: fake.NewClientBuilder().WithScheme(scheme).Build()}
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "m-1", Annotations: map[string]string{
		naming.AnnotationVolumeClaimTemplates: "[]", naming.AnnotationStoppedForHost: "host-1", naming.AnnotationRunStrategyBeforeStop: "Always",
	}}, Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyHalted)}}
	g.Expect(c.Create(ctx, vm)).To(Succeed())
	cached := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name, ResourceVersion: vm.ResourceVersion,
		Annotations: map[string]string{naming.AnnotationStoppedForHost: "host-1", naming.AnnotationRunStrategyBeforeStop: "Always"}}}

	svc := &VMService{C: c}
	g.Expect(svc.SetRunStrategy(ctx, cached, kubevirtv1.RunStrategyAlways, map[string]*string{
		naming.AnnotationStoppedForHost: nil, naming.AnnotationRunStrategyBeforeStop: nil,
	})).To(Succeed())
	got := &kubevirtv1.VirtualMachine{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(vm), got)).To(Succeed())
	g.Expect(got.Annotations).To(Equal(map[string]string{naming.AnnotationVolumeClaimTemplates: "[]"}))
	g.Expect(*got.Spec.RunStrategy).To(Equal(kubevirtv1.RunStrategyAlways))

	err = svc.SetRunStrategy(ctx, cached, kubevirtv1.RunStrategyHalted, map[string]*string{naming.AnnotationStoppedForHost: ptr.To("host-2")})
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "the copy's version is stale: %v", err)
}

// A machine's cloud-init Secret of the expected name that this machine did not make (another
// management cluster's, a tenant's own Secret) is never overwritten nor adopted: NameTaken, and
// its data stays as it was. One the machine made is brought up to date.
func TestCloudInitSecretOfAnotherOwnerIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	guest := naming.Guest{Namespace: "ns", Name: "prod", Mark: "0123456789abcdef"}
	m := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod-md-0-x2kqz"}}
	in := &build.VMInput{Machine: m, Namespace: "tenant", Guest: guest, Role: naming.RoleWorker}
	key := client.ObjectKey{Namespace: "tenant", Name: naming.CloudInitSecretName(m.Name)}
	other := naming.Guest{Namespace: "ns", Name: "prod", Mark: "fedcba9876543210"}
	for what, labels := range map[string]map[string]string{
		"unlabelled":                   nil,
		"another management cluster's": build.MachineLabels(&build.VMInput{Machine: m, Namespace: "tenant", Guest: other, Role: naming.RoleWorker}),
	} {
		foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels},
			Data: map[string][]byte{"userdata": []byte("theirs")}}
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(foreign).Build()
		svc := &VMService{C: &transport.Client{Client: c}, Guest: guest}
		err := svc.ensureCloudInit(ctx, in, []byte("ours"), nil)
		e, ok := transport.AsError(err)
		g.Expect(ok).To(BeTrue(), "%s: %v", what, err)
		g.Expect(e.Reason).To(Equal(infrav1.NameTakenReason), what)
		got := &corev1.Secret{}
		g.Expect(c.Get(ctx, key, got)).To(Succeed())
		g.Expect(string(got.Data["userdata"])).To(Equal("theirs"), what)
	}

	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	svc := &VMService{C: &transport.Client{Client: c}, Guest: guest}
	g.Expect(svc.ensureCloudInit(ctx, in, []byte("first"), nil)).To(Succeed())
	g.Expect(svc.ensureCloudInit(ctx, in, []byte("second"), []byte("network"))).To(Succeed())
	got := &corev1.Secret{}
	g.Expect(c.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string][]byte{"userdata": []byte("second"), "networkdata": []byte("network")}))
}
