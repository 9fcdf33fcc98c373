package harvester

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A guest made by an earlier version has a ClusterRoleBinding to Harvester's CSI role (every
// namespace): Ensure replaces it by the namespaced binding and the narrow cluster-wide one, and
// turning CSI off removes all of them.
func TestEnsureReplacesTheClusterWideCSIBinding(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gi := GuestIdentity{Namespace: "guests", ServiceAccount: "guest-abc", Cluster: "ns.prod", CSI: true}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: gi.Namespace, Name: gi.ServiceAccount}}
	legacy := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: LegacyCSIBindingName(gi.Namespace, gi.ServiceAccount)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CSIDriverRole},
		Subjects:   subject,
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(legacy).Build()
	s := &GuestIdentityService{C: c}

	g.Expect(s.Ensure(ctx, gi)).To(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(legacy), &rbacv1.ClusterRoleBinding{}))).To(BeTrue(),
		"the cluster-wide binding to Harvester's CSI role is gone")
	rb := &rbacv1.RoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: gi.Namespace, Name: CSIRoleBindingName(gi.ServiceAccount)}, rb)).To(Succeed())
	g.Expect(rb.RoleRef.Name).To(Equal(CSIDriverRole))
	crb := &rbacv1.ClusterRoleBinding{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: CSIBindingName(gi.Namespace, gi.ServiceAccount)}, crb)).To(Succeed())
	g.Expect(crb.RoleRef.Name).To(Equal(CSIClusterRole))
	g.Expect(s.Ensure(ctx, gi)).To(Succeed(), "idempotent")

	gi.CSI = false
	g.Expect(s.Ensure(ctx, gi)).To(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(rb), &rbacv1.RoleBinding{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(crb), &rbacv1.ClusterRoleBinding{}))).To(BeTrue())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: gi.Namespace, Name: gi.ServiceAccount}, &rbacv1.RoleBinding{})).To(Succeed(),
		"the cloud-provider binding stays")
}
