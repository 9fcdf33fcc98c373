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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// At a cluster's deletion the volumes its guest's CSI driver made are deleted from the record
// (which a tenant can write): never a machine's disk, nor a volume a VM of the namespace still
// uses (ours or another's); a volume already gone or going is skipped.
func TestGuestVolumeDeletionKeepsMachineDisksAndVolumesInUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "guests"
	pvc := func(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	someoneElses := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Volumes: []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "attached"}},
			}}},
		}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		pvc("guest-volume", nil),
		pvc("machine-disk", map[string]string{naming.LabelManagedBy: naming.ManagedByValue}),
		pvc("attached", nil),
		someoneElses,
	).Build()
	s := &GuestVolumeService{C: &transport.Client{Client: c}}

	outcomes, err := s.Delete(ctx, ns, []string{"guest-volume", "machine-disk", "attached", "never-there"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(outcomes).To(ConsistOf(
		VolumeOutcome{Name: "guest-volume", Deleted: true},
		And(HaveField("Name", "machine-disk"), HaveField("Deleted", false), HaveField("Kept", ContainSubstring("a machine's disk"))),
		VolumeOutcome{Name: "attached", Kept: "VM someone-elses still uses it"},
	))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "guest-volume"}, &corev1.PersistentVolumeClaim{}))).To(BeTrue())
	for _, kept := range []string{"machine-disk", "attached"} {
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kept}, &corev1.PersistentVolumeClaim{})).To(Succeed(), kept)
	}
}
