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

package config_test

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// The Harvester kinds the manager caches and watches are declared once
// (transport.CachedKinds, plus the hosts): the identity the admin gives the provider on Harvester
// (config/harvester/provider-identity.yaml) must let it list and watch each, or the connection's
// cache never syncs and every cluster of that identity waits. A kind added to the declaration
// without its rule fails here, not on a real Harvester.
func TestTheIdentityListsAndWatchesEveryCachedKind(t *testing.T) {
	g := NewWithT(t)
	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	roles := shippedClusterRoles(t)
	grants := func(group, resource, verb string) bool {
		for _, name := range []string{"capi-harvester-provider-cluster", "capi-harvester-provider-namespaced"} {
			for _, rule := range roles[name].Rules {
				if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) &&
					slices.Contains(rule.Verbs, verb) && len(rule.ResourceNames) == 0 {
					return true
				}
			}
		}
		return false
	}
	for _, kind := range append(transport.CachedKinds(), &corev1.Node{}) {
		gvk, err := apiutil.GVKForObject(kind, scheme)
		g.Expect(err).NotTo(HaveOccurred())
		resource, _ := meta.UnsafeGuessKindToResource(gvk)
		for _, verb := range []string{"list", "watch"} {
			g.Expect(grants(gvk.Group, resource.Resource, verb)).To(BeTrue(),
				"the provider's identity cannot %s %s (%s), which the manager caches", verb, resource.Resource, gvk.Group)
		}
	}
}
