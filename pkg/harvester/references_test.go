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
	"reflect"
	"slices"
	"strings"
	"testing"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// What every name-like field of the provider's specs is: a reference to an object (on Harvester
// or the management cluster) and where it is confined, or why it is not a reference. A field
// added to HarvesterMachineSpec or HarvesterClusterSpec fails
// TestEverySpecFieldIsClassifiedAsAReferenceOrNot until it is put here, so that no new reference
// skips the checks (docs/security.md, "The model").
var specFields = map[string]string{
	// HarvesterMachineSpec.
	"machine.providerID":                           "not a reference: the provider writes it; templates may not set it (webhook)",
	"machine.memory":                               "not a reference: a quantity",
	"machine.maxMemory":                            "not a reference: a quantity",
	"machine.reservedMemory":                       "not a reference: a quantity",
	"machine.disks.name":                           "not a reference: a disk's name within its VM",
	"machine.disks.image":                          "reference, VirtualMachineImage: resolveReferences confines it to the target namespace and sharedNamespaces (TestReferencesStayInSharedNamespaces)",
	"machine.disks.storageClassName":               "reference, StorageClass: checkStorageClass refuses one that carries an image where references are confined (TestReferencesStayInSharedNamespaces)",
	"machine.disks.size":                           "not a reference: a quantity",
	"machine.disks.bus":                            "not a reference: an enum",
	"machine.networks.name":                        "not a reference: an interface's name within its VM",
	"machine.networks.networkName":                 "reference, NetworkAttachmentDefinition: resolveReferences confines it as images (TestReferencesStayInSharedNamespaces)",
	"machine.networks.model":                       "not a reference: an enum",
	"machine.networks.macAddress":                  "not a reference: a value",
	"machine.networks.addressesFromPools.apiGroup": "reference, an IPAM pool on the management cluster, always of the machine's own namespace (an IPAddressClaim there names it)",
	"machine.networks.addressesFromPools.kind":     "reference, as apiGroup",
	"machine.networks.addressesFromPools.name":     "reference, as apiGroup",
	"machine.networks.nameservers":                 "not a reference: addresses",
	"machine.cpuModel":                             "not a reference: a CPU model",
	"machine.hostDevices.name":                     "not a reference: a device's name within its VM",
	"machine.hostDevices.deviceName":               "reference, a Harvester host device (hardware, not a tenant's data): KubeVirt's permitted host devices decide",
	"machine.gpus.name":                            "not a reference: a device's name within its VM",
	"machine.gpus.deviceName":                      "reference, as hostDevices.deviceName",
	"machine.sshKeyPairs":                          "reference, KeyPair: resolveReferences confines it as images (TestReferencesStayInSharedNamespaces)",
	"machine.networkData":                          "not a reference: cloud-init content",
	"machine.userData":                             "not a reference: cloud-init content",
	"machine.affinity":                             "references pods by label: the webhook refuses namespaces and namespaceSelector in pod (anti-)affinity terms, so only the VM's own namespace is probed (TestWebhookRefusesBelowTheFloor)",
	"machine.firmware.bootMode":                    "not a reference: an enum",
	"machine.runStrategy":                          "not a reference: an enum",
	"machine.guestAgent":                           "not a reference: an enum",
	"machine.hostMaintenance.policy":               "not a reference: an enum",
	// HarvesterClusterSpec.
	"cluster.identityRef.kind":         "reference, HarvesterClusterIdentity: identitySecretKey checks allowedNamespaces and targetNamespaces at every reconcile, before any write (TestAnIdentityATenantMayNotUseIsNeitherPinnedNorDisclosed)",
	"cluster.identityRef.name":         "reference, as identityRef.kind",
	"cluster.identitySecret.name":      "reference, Secret: of the HarvesterCluster's own namespace only (no namespace field)",
	"cluster.targetNamespace":          "reference, Harvester namespace: the identity's targetNamespaces and its RBAC; system namespaces refused (TestWebhookRefusesSystemNamespaces)",
	"cluster.controlPlaneEndpoint":     "not a reference on Harvester: the user's own endpoint, when set",
	"cluster.loadBalancer.ipam":        "not a reference: an enum",
	"cluster.loadBalancer.ipPoolName":  "reference, IPPool (cluster-scoped): with a HarvesterClusterIdentity, LoadBalancerService.checkReferences requires the pool's scope to name the target namespace, or the global pool (TestControlPlaneLoadBalancerReferencesStayInTheTenantsScope)",
	"cluster.loadBalancer.network":     "reference, network: with a HarvesterClusterIdentity, checkReferences confines it to the target and shared namespaces (TestControlPlaneLoadBalancerReferencesStayInTheTenantsScope)",
	"cluster.guestHarvesterAPI.server": "not a reference on Harvester: the URL the guest reaches Harvester at",
}

func TestEverySpecFieldIsClassifiedAsAReferenceOrNot(t *testing.T) {
	var fields []string
	for prefix, typ := range map[string]reflect.Type{
		"machine": reflect.TypeOf(infrav1.HarvesterMachineSpec{}),
		"cluster": reflect.TypeOf(infrav1.HarvesterClusterSpec{}),
	} {
		fields = append(fields, nameLikeFields(typ, prefix)...)
	}
	for _, f := range fields {
		if specFields[f] == "" {
			t.Errorf("%s is not classified: say in specFields whether it names an object, and where that is confined", f)
		}
	}
	for f := range specFields {
		if !slices.Contains(fields, f) {
			t.Errorf("specFields lists %s, which the specs no longer have", f)
		}
	}
}

// nameLikeFields returns the JSON paths of typ's fields that are strings (or lists of them) or
// of types from outside the provider's API (such as quantities and affinities), following the
// provider's own structs.
func nameLikeFields(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeOf(infrav1.HarvesterMachineSpec{}).PkgPath() {
		return []string{path}
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" {
			name = f.Name
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.String || ft.Kind() == reflect.Struct {
			out = append(out, nameLikeFields(f.Type, path+"."+name)...)
		}
	}
	return out
}
