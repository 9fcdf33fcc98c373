package harvester

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// With a HarvesterClusterIdentity, a machine names images, key pairs and networks of its target
// namespace and of the identity's shared namespaces only: the identity's cluster-wide reads
// would otherwise boot a tenant's VM from another tenant's image on another tenant's network.
func TestReferencesStayInSharedNamespaces(t *testing.T) {
	g := NewWithT(t)
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	c := &Client{Client: fake.NewClientBuilder().WithScheme(scheme).Build()}
	reason := func(svc *VMService, spec infrav1.HarvesterMachineSpec) string {
		_, err := svc.resolveReferences(context.Background(), &spec, "tenant-a")
		e, ok := AsError(err)
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
	// The target namespace and a shared one are read (and here found missing).
	g.Expect(reason(shared, infrav1.HarvesterMachineSpec{Disks: []infrav1.Disk{{Image: "public/ubuntu"}}})).To(Equal(infrav1.ImageNotFoundReason))
	g.Expect(reason(shared, infrav1.HarvesterMachineSpec{Disks: []infrav1.Disk{{Image: "ubuntu"}}})).To(Equal(infrav1.ImageNotFoundReason))
}
