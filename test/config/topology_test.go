package config

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
)

// The topology flavour takes every variable of the default flavour, with the same default: it
// ignored the load balancer's IPAM, the addons and the control plane's sizes.
func TestTheTopologyFlavourTakesTheDefaultFlavoursVariables(t *testing.T) {
	g := NewWithT(t)
	flat, err := templates.Variables("cluster-template.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	topology, err := templates.Variables("cluster-template-topology.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	for name, def := range flat {
		g.Expect(topology).To(HaveKey(name), "the topology flavour ignores %s", name)
		g.Expect(ptr.Deref(topology[name], "(required)")).To(Equal(ptr.Deref(def, "(required)")), "the default of %s", name)
	}
}
