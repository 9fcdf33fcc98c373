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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// A guest made by an earlier version has a ClusterRoleBinding to Harvester's CSI role (every
// namespace): Ensure replaces it by the namespaced binding and the narrow cluster-wide one, and
// turning CSI off removes all of them.
func TestEnsureReplacesTheClusterWideCSIBinding(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	guest := naming.Guest{Namespace: "ns", Name: "prod"}
	gi := GuestIdentity{Namespace: "guests", ServiceAccount: "guest-abc", Labels: guest.Labels(), Cluster: guest.ID(), CSI: true}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: gi.Namespace, Name: gi.ServiceAccount}}
	legacy := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: LegacyCSIBindingName(gi.Namespace, gi.ServiceAccount)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "harvesterhci.io:csi-driver"},
		Subjects:   subject,
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(legacy).Build()
	s := &GuestIdentityService{C: c}

	g.Expect(s.Ensure(ctx, gi)).To(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(legacy), &rbacv1.ClusterRoleBinding{}))).To(BeTrue(),
		"the cluster-wide binding to Harvester's CSI role is gone")
	rb := &rbacv1.RoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: gi.Namespace, Name: CSIRoleBindingName(gi.ServiceAccount)}, rb)).To(Succeed())
	g.Expect(rb.RoleRef.Name).To(Equal(CSIVolumesRole))
	crb := &rbacv1.ClusterRoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: naming.CSIBindingName(gi.Namespace, gi.ServiceAccount)}, crb)).To(Succeed())
	g.Expect(crb.RoleRef.Name).To(Equal(CSIClusterRole))
	g.Expect(s.Ensure(ctx, gi)).To(Succeed(), "idempotent")

	gi.CSI = false
	g.Expect(s.Ensure(ctx, gi)).To(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(rb), &rbacv1.RoleBinding{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(crb), &rbacv1.ClusterRoleBinding{}))).To(BeTrue())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: gi.Namespace, Name: gi.ServiceAccount}, &rbacv1.RoleBinding{})).To(Succeed(),
		"the cloud-provider binding stays")
}

// A guest made by an earlier version has RoleBindings to Harvester's own, wider roles
// (harvesterhci.io:cloudprovider, harvesterhci.io:csi-driver): Ensure replaces each by one of the
// same name to the provider's narrower role (a binding's role cannot change in place). A binding
// of that name someone else made is left alone, and said so.
func TestEnsureReplacesBindingsToHarvestersOwnRoles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	guest := naming.Guest{Namespace: "ns", Name: "prod"}
	gi := GuestIdentity{Namespace: "guests", ServiceAccount: "guest-abc", Labels: guest.Labels(), Cluster: guest.ID(), CSI: true}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: gi.Namespace, Name: gi.ServiceAccount}}
	earlier := func(name, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: gi.Namespace, Name: name, Labels: guest.Labels()},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subject}
	}
	cloud, csi := earlier(gi.ServiceAccount, "harvesterhci.io:cloudprovider"), earlier(CSIRoleBindingName(gi.ServiceAccount), "harvesterhci.io:csi-driver")
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(cloud, csi).Build()
	s := &GuestIdentityService{C: c}

	g.Expect(s.Ensure(ctx, gi)).To(Succeed())
	for binding, role := range map[*rbacv1.RoleBinding]string{cloud: CloudProviderRole, csi: CSIVolumesRole} {
		got := &rbacv1.RoleBinding{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(binding), got)).To(Succeed())
		g.Expect(got.RoleRef.Name).To(Equal(role), binding.Name)
		g.Expect(got.Subjects).To(Equal(subject), binding.Name)
		g.Expect(got.Labels).To(Equal(guest.Labels()), binding.Name)
	}
	g.Expect(s.Ensure(ctx, gi)).To(Succeed(), "idempotent")

	// A binding of the CSI binding's name that an admin made.
	admins := earlier(CSIRoleBindingName(gi.ServiceAccount), "harvesterhci.io:csi-driver")
	admins.Labels = nil
	g.Expect(c.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: admins.ObjectMeta})).To(Succeed())
	g.Expect(c.Create(ctx, admins)).To(Succeed())
	err := s.Ensure(ctx, gi)
	e, ok := transport.AsError(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(e.Reason).To(Equal(infrav1.NameTakenReason))
	got := &rbacv1.RoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(admins), got)).To(Succeed())
	g.Expect(got.RoleRef.Name).To(Equal("harvesterhci.io:csi-driver"), "left untouched")
}

// A ServiceAccount of the guest's name that another cluster's labels mark (two management
// clusters sharing the namespace, or a hand-made one) is neither taken over nor deleted with its
// bindings: deleting this cluster must not revoke the other's tokens.
func TestGuestIdentityLeavesAnotherClustersServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ours, theirs := naming.Guest{Namespace: "ns", Name: "prod", Mark: "0123456789"}, naming.Guest{Namespace: "ns", Name: "prod", Mark: "9876543210"}
	gi := GuestIdentity{Namespace: "guests", ServiceAccount: "guest-prod", Labels: ours.Labels(), Cluster: ours.ID(), CSI: true}
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: gi.Namespace, Name: gi.ServiceAccount, Labels: theirs.Labels(),
		Annotations: map[string]string{AnnotationGuestCluster: theirs.ID()}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: gi.Namespace, Name: gi.ServiceAccount, Labels: theirs.Labels()},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CloudProviderRole}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(other, binding).Build()
	s := &GuestIdentityService{C: c}

	err := s.Ensure(ctx, gi)
	e, ok := transport.AsError(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(e.Reason).To(Equal(infrav1.NameTakenReason))
	g.Expect(s.Delete(ctx, gi)).To(Succeed())
	sa := &corev1.ServiceAccount{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(other), sa)).To(Succeed(), "the other cluster's ServiceAccount stays")
	g.Expect(sa.Annotations).To(HaveKeyWithValue(AnnotationGuestCluster, theirs.ID()), "and keeps naming the other cluster")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(binding), &rbacv1.RoleBinding{})).To(Succeed(), "with its binding")
}
