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
