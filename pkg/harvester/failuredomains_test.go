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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

func host(name string, labels map[string]string, cordoned bool) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
}

// A witness node runs no VM and is no failure domain; a cordoned host (maintenance, an upgrade)
// stays one, so that the list does not flap while Harvester drains it. Hosts are failure domains
// for worker pools only: placement in a domain is required, which pins a VM to a host.
func TestFailureDomainsLeaveOutWitnessesAndKeepCordonedHosts(t *testing.T) {
	g := NewWithT(t)
	witness := map[string]string{LabelWitness: "true"}
	domains, byHost := FailureDomains([]corev1.Node{
		host("h1", nil, false), host("h2", nil, true), host("w", witness, false),
	})
	g.Expect(byHost).To(BeTrue())
	var names []string
	for _, fd := range domains {
		names = append(names, fd.Name)
		g.Expect(fd.ControlPlane).To(Equal(ptr.To(false)), fd.Name)
	}
	g.Expect(names).To(Equal([]string{"h1", "h2"}))
	g.Expect(FailureDomainOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h2"}}, domains)).To(Equal("h2"))
	g.Expect(FailureDomainOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, domains)).To(BeEmpty())

	zoneA, zoneB := map[string]string{build.LabelZone: "a"}, map[string]string{build.LabelZone: "b"}
	domains, byHost = FailureDomains([]corev1.Node{
		host("h1", zoneA, false), host("h2", zoneB, true), host("w", map[string]string{LabelWitness: "true", build.LabelZone: "c"}, false),
	})
	g.Expect(byHost).To(BeFalse())
	names = nil
	for _, fd := range domains {
		names = append(names, fd.Name)
		g.Expect(fd.ControlPlane).To(Equal(ptr.To(true)), fd.Name)
	}
	g.Expect(names).To(Equal([]string{"a", "b"}), "zone b's only host is cordoned, not gone; zone c has only a witness")
	g.Expect(domains[0].Attributes).To(HaveKeyWithValue(build.FailureDomainHostsKey, "1"))
	domains, _ = FailureDomains([]corev1.Node{host("h1", zoneA, false), host("h2", zoneA, false), host("h3", zoneB, false)})
	g.Expect(domains[0].Attributes).To(HaveKeyWithValue(build.FailureDomainHostsKey, "2"), "zone a")
	g.Expect(domains[1].Attributes).To(HaveKeyWithValue(build.FailureDomainHostsKey, "1"), "zone b")
	g.Expect(FailureDomainOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h9", Labels: zoneB}}, domains)).To(Equal("b"))
}
