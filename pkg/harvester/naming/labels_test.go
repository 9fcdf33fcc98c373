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

package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

func TestVMNameKeepsLabelsAndHashesTheRest(t *testing.T) {
	g := NewWithT(t)

	// Every name that worked before stays: existing VMs are still found by it.
	for _, name := range []string{"cp-abcde", "md-0-7c9f8-x2kqz", strings.Repeat("a", 63)} {
		g.Expect(VMName(name)).To(Equal(name))
		g.Expect(MachineLabelValue(name)).To(Equal(name))
	}

	// CAPI names a machine after its MachineDeployment: two machines of one long deployment
	// share all but their last characters.
	deployment := "prod-eu-west-1-" + strings.Repeat("workers-gpu-a100-", 6)
	a, b := deployment+"7c9f8-x2kqz", deployment+"7c9f8-p4r7m"
	dotted := "worker.eu-west-1.example"
	for _, name := range []string{a, b, dotted, "Upper_Case.Name", strings.Repeat("9", 300), "-.-"} {
		vm := VMName(name)
		g.Expect(validation.IsDNS1123Label(vm)).To(BeEmpty(), "%q -> %q", name, vm)
		g.Expect(len(vm)).To(BeNumerically("<=", 63))
		g.Expect(VMName(name)).To(Equal(vm), "stable across calls")
		label := MachineLabelValue(name)
		g.Expect(validation.IsValidLabelValue(label)).To(BeEmpty(), "%q -> %q", name, label)
	}
	g.Expect(VMName(a)).NotTo(Equal(VMName(b)), "names that share a long prefix stay distinct")
	g.Expect(VMName(a)).To(HavePrefix("prod-eu-west-1-workers-gpu-a100-"), "the start stays readable")
	g.Expect(VMName(a)).To(MatchRegexp(`-[0-9a-f]{10}$`))
	g.Expect(MachineLabelValue(a)).To(Equal(VMName(a)), "a name too long for a label is labelled with the VM's name")
	g.Expect(VMName(dotted)).NotTo(Equal(dotted), "a dot is not allowed in a hostname")
	g.Expect(MachineLabelValue(dotted)).To(Equal(dotted), "but it fits a label value")
}

// Two management clusters may each have a cluster of the same namespace and name in one
// Harvester namespace: their owner marks set every name and label apart, and a cluster
// recorded before marks existed keeps the names it had.
func TestGuestOfTellsManagementClustersApart(t *testing.T) {
	g := NewWithT(t)
	hc := func(uid types.UID, annotations map[string]string, finalizers ...string) *infrav1.HarvesterCluster {
		return &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prod", UID: uid,
			Annotations: annotations, Finalizers: finalizers}}
	}
	_, ok := GuestOf(hc("u1", nil), "prod")
	g.Expect(ok).To(BeFalse(), "no mark and no finalizer: not reconciled yet")
	legacy, ok := GuestOf(hc("u1", nil, infrav1.ClusterFinalizer), "prod")
	g.Expect(ok).To(BeTrue())
	g.Expect(legacy.ID()).To(Equal("default.prod"))
	g.Expect(legacy.LoadBalancerName()).To(Equal("cp-prod-"+sha10("default/prod")), "the name of earlier versions")
	g.Expect(legacy.ServiceAccountName()).To(Equal("guest-prod-" + sha10("default/prod")))

	markA, markB := NewOwnerMark("uid-in-management-a"), NewOwnerMark("uid-in-management-b")
	g.Expect(markA).To(MatchRegexp(`^[0-9a-f]{16}$`))
	a, _ := GuestOf(hc("u1", map[string]string{infrav1.OwnerMarkAnnotation: markA}, infrav1.ClusterFinalizer), "prod")
	b, _ := GuestOf(hc("u2", map[string]string{infrav1.OwnerMarkAnnotation: markB}, infrav1.ClusterFinalizer), "prod")
	for _, pair := range [][2]string{{a.ID(), b.ID()}, {a.LoadBalancerName(), b.LoadBalancerName()}, {a.ServiceAccountName(), b.ServiceAccountName()}} {
		g.Expect(pair[0]).NotTo(Equal(pair[1]))
	}
	for _, guest := range []Guest{a, b} {
		g.Expect(guest.ID()).NotTo(Equal(legacy.ID()))
		g.Expect(guest.LoadBalancerName()).NotTo(Equal(legacy.LoadBalancerName()))
	}
	lb := &metav1.ObjectMeta{Labels: a.Labels()}
	g.Expect(a.Owns(lb)).To(BeTrue())
	g.Expect(b.Owns(lb)).To(BeFalse())
	g.Expect(legacy.Owns(lb)).To(BeFalse())
	// An empty recorded mark is the legacy cluster, also without the finalizer (after a move).
	moved, ok := GuestOf(hc("u3", map[string]string{infrav1.OwnerMarkAnnotation: ""}), "prod")
	g.Expect(ok).To(BeTrue())
	g.Expect(moved).To(Equal(legacy))
}

func sha10(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

// A cluster whose namespace and name are too long for its ID is told apart by a hash of them and
// its mark: 24 hex characters (96 bits) for a mark made now, so that no name and mark can be
// searched for whose ID is another cluster's; clusters marked by an earlier version (10
// characters) or before marks keep the IDs their objects on Harvester are labelled with.
func TestLongClusterIDsAreHashedBeyondSearch(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("n", 40)
	mark := NewOwnerMark("uid")
	id := Guest{Namespace: long, Name: "prod-cluster-of-the-team", Mark: mark}.ID()
	g.Expect(id).To(HaveLen(63))
	g.Expect(id).To(MatchRegexp(`^n+-[0-9a-f]{24}$`))
	g.Expect(validation.IsValidLabelValue(id)).To(BeEmpty())
	g.Expect(Guest{Namespace: long, Name: "prod-cluster-of-the-teaM", Mark: mark}.ID()).NotTo(Equal(id), "the hash covers the whole name")
	g.Expect(Guest{Namespace: long, Name: "prod-cluster-of-the-team", Mark: NewOwnerMark("other")}.ID()).NotTo(Equal(id), "and the mark")
	g.Expect(Guest{Namespace: "short", Name: "prod", Mark: mark}.ID()).To(Equal("short.prod-"+mark), "a short one is readable")

	// The IDs of earlier versions, unchanged.
	legacyMark := "0123456789"
	base := long + ".prod-cluster-of-the-team"
	g.Expect(Guest{Namespace: long, Name: "prod-cluster-of-the-team", Mark: legacyMark}.ID()).
		To(Equal(base[:52] + "-" + sha10(base+"/"+legacyMark)))
	g.Expect(Guest{Namespace: long, Name: "prod-cluster-of-the-team"}.ID()).To(Equal(base[:52] + "-" + sha10(base)))
	g.Expect(Guest{Namespace: "short", Name: "prod", Mark: legacyMark}.ID()).To(Equal("short.prod-" + legacyMark))
}

// The cluster ID of the guest's load balancers (guestcloud.ServiceLoadBalancerName) is
// namespace.name.
func TestGuestIDIsNamespaceDotName(t *testing.T) {
	g := NewWithT(t)
	g.Expect((Guest{Namespace: "capi-ns", Name: "my-cluster"}).ID()).To(Equal("capi-ns.my-cluster"))
}
