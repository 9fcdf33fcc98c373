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
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// guestCall is one call a guest's client makes on Harvester with the guest's credential: the verb
// on a group's resource (a Setting's name where the role names it), and where the client makes it.
type guestCall struct {
	group, resource, verb, name string
	where                       string
}

// The calls of the guest's CCM (this repository's cloudprovider/) on Harvester, all in its target
// namespace.
var ccmCalls = []guestCall{
	{"loadbalancer.harvesterhci.io", "loadbalancers", "create", "", "cloudprovider/loadbalancer.go: a Service's load balancer made"},
	{"loadbalancer.harvesterhci.io", "loadbalancers", "update", "", "cloudprovider/loadbalancer.go: rewritten when the Service changes"},
	{"loadbalancer.harvesterhci.io", "loadbalancers", "get", "", "cloudprovider/loadbalancer.go: read before deletion"},
	{"loadbalancer.harvesterhci.io", "loadbalancers", "delete", "", "cloudprovider/loadbalancer.go: deleted with the Service"},
	{"loadbalancer.harvesterhci.io", "loadbalancers", "list", "", "cloudprovider/loadbalancer_watch.go: the namespace's cache"},
	{"loadbalancer.harvesterhci.io", "loadbalancers", "watch", "", "cloudprovider/loadbalancer_watch.go: the namespace's cache"},
	{"kubevirt.io", "virtualmachines", "get", "", "cloudprovider/instances.go: a Node's VM"},
	{"kubevirt.io", "virtualmachines", "list", "", "cloudprovider/instances.go: a Node's VM by providerID"},
	{"kubevirt.io", "virtualmachineinstances", "get", "", "cloudprovider/instances.go: addresses and host"},
	{"kubevirt.io", "virtualmachineinstances", "list", "", "cloudprovider/instances.go: a Node by its hostname; topology.go: the cache"},
	{"kubevirt.io", "virtualmachineinstances", "watch", "", "cloudprovider/topology.go: live migrations"},
}

// The calls of the Harvester CSI driver (harvester-csi-driver v0.2.8, whose Harvester-side calls
// v0.2.9 and v0.2.10 keep) in its target namespace, by its source (pkg/csi/).
var csiNamespacedCalls = []guestCall{
	{"", "persistentvolumeclaims", "create", "", "controller_server.go CreateVolume"},
	{"", "persistentvolumeclaims", "get", "", "controller_server.go, node_server.go: binding, publish, stage, stats"},
	{"", "persistentvolumeclaims", "update", "", "controller_server.go ControllerExpandVolume (a plain update)"},
	{"", "persistentvolumeclaims", "delete", "", "controller_server.go DeleteVolume"},
	{"", "pods", "list", "", "controller_server.go isVolumeInUse, before growing a volume"},
	{"kubevirt.io", "virtualmachines", "get", "", "controller_server.go: the VM read before a hot-plug patch"},
	{"kubevirt.io", "virtualmachines", "patch", "", "controller_server.go, node/controller.go: declarative hot-plug (Harvester v1.8 on)"},
	{"kubevirt.io", "virtualmachineinstances", "get", "", "manager.go, controller_server.go, node_server.go: own VMI, hot-plug status"},
	{"kubevirt.io", "virtualmachineinstances", "list", "", "manager.go discoverVMIName: the driver stops without it"},
	{"snapshot.storage.k8s.io", "volumesnapshots", "get", "", "controller_server.go: readiness, restore source"},
	{"snapshot.storage.k8s.io", "volumesnapshots", "list", "", "controller_server.go ListSnapshots"},
	{"snapshot.storage.k8s.io", "volumesnapshots", "create", "", "controller_server.go CreateSnapshot"},
	{"snapshot.storage.k8s.io", "volumesnapshots", "delete", "", "controller_server.go DeleteSnapshot"},
	{"harvesterhci.io", "volumeremotebackups", "create", "", "controller_server.go CreateSnapshot of type backup"},
	{"harvesterhci.io", "volumeremotebackups", "get", "", "controller_server.go: readiness, restore source"},
	{"harvesterhci.io", "volumeremotebackups", "delete", "", "controller_server.go DeleteSnapshot of a backup"},
	{"harvesterhci.io", "volumeremoterestores", "create", "", "controller_server.go CreateVolume from a backup"},
	{"harvesterhci.io", "volumeremoterestores", "get", "", "controller_server.go: readiness, DeleteVolume"},
	{"harvesterhci.io", "volumeremoterestores", "delete", "", "controller_server.go DeleteVolume of a restored volume"},
}

// The CSI driver's calls outside a namespace that the provider grants.
var csiClusterCalls = []guestCall{
	{"storage.k8s.io", "storageclasses", "get", "", "controller_server.go: hostStorageClass, restore from a snapshot"},
	{"harvesterhci.io", "settings", "get", "csi-driver-config", "controller_server.go CreateSnapshot: the snapshot class"},
	{"harvesterhci.io", "settings", "get", "csi-online-expand-validation", "controller_server.go, node_server.go: expansion"},
}

// Each role the provider binds to a guest grants exactly what its client calls: every call is
// allowed, and nothing else is (no verb, resource or name beyond the list above, which says where
// each call is made). Harvester's own harvesterhci.io:cloudprovider and harvesterhci.io:csi-driver
// grant more (every verb on volumes, file systems, backups and restores, the hot-plug
// subresources, watches), which is why the provider binds its own.
func TestGuestRolesGrantWhatTheirClientsCallAndNothingElse(t *testing.T) {
	roles := shippedClusterRoles(t)
	for role, calls := range map[string][]guestCall{
		"capi-harvester-guest-cloudprovider": ccmCalls,
		"capi-harvester-guest-csi-volumes":   csiNamespacedCalls,
		"capi-harvester-guest-csi":           csiClusterCalls,
	} {
		t.Run(role, func(t *testing.T) {
			g := NewWithT(t)
			r, ok := roles[role]
			g.Expect(ok).To(BeTrue(), "provider-identity.yaml defines %s", role)
			var granted, called []string
			for _, rule := range r.Rules {
				g.Expect(rule.NonResourceURLs).To(BeEmpty())
				names := rule.ResourceNames
				if len(names) == 0 {
					names = []string{""}
				}
				for _, group := range rule.APIGroups {
					for _, resource := range rule.Resources {
						for _, verb := range rule.Verbs {
							g.Expect([]string{group, resource, verb}).NotTo(ContainElement("*"), "no wildcard")
							for _, name := range names {
								granted = append(granted, fmt.Sprintf("%s/%s %s %s", group, resource, verb, name))
							}
						}
					}
				}
			}
			for _, c := range calls {
				g.Expect(c.where).NotTo(BeEmpty())
				called = append(called, fmt.Sprintf("%s/%s %s %s", c.group, c.resource, c.verb, c.name))
			}
			slices.Sort(granted)
			slices.Sort(called)
			g.Expect(granted).To(Equal(called), "what %s grants is what its client calls", role)
		})
	}
}

// The provider's own identity on Harvester has no rights on tenants' snapshots, backups, restores
// or file systems: a leaked identity kubeconfig reaches none of them (docs/security.md, "The
// model"), and no rule of its roles is a wildcard.
func TestTheProvidersIdentityReachesNoSnapshotsOrBackups(t *testing.T) {
	g := NewWithT(t)
	roles := shippedClusterRoles(t)
	for _, name := range []string{"capi-harvester-provider-cluster", "capi-harvester-provider-namespaced"} {
		role, ok := roles[name]
		g.Expect(ok).To(BeTrue(), name)
		for _, rule := range role.Rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
				g.Expect(list).NotTo(ContainElement("*"), "%s: %v", name, rule)
			}
			for _, resource := range rule.Resources {
				g.Expect(resource).NotTo(BeElementOf("volumesnapshots", "volumesnapshotcontents", "volumeremotebackups",
					"volumeremoterestores", "virtualmachinebackups", "virtualmachinerestores", "networkfilesystems"), "%s: %v", name, rule)
			}
		}
	}
}

// shippedClusterRoles are the ClusterRoles of config/harvester/provider-identity.yaml, by name.
func shippedClusterRoles(t *testing.T) map[string]rbacv1.ClusterRole {
	t.Helper()
	roles := map[string]rbacv1.ClusterRole{}
	for _, doc := range strings.Split(string(readRepoFile(t, "config/harvester/provider-identity.yaml")), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "ClusterRole" {
			roles[role.Name] = role
		}
	}
	return roles
}
