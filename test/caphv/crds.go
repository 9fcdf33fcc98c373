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

// Package caphv makes what the community Harvester provider (CAPHV,
// rancher-sandbox/cluster-api-provider-harvester v0.10.1) installs and leaves in a management
// cluster, for the tests of a take-over: its module is not served by the Go module proxy this
// project builds from, so its manager cannot run in the bed. Everything here is written from
// reading its source at v0.10.1 (commit 734c983, docs/decisions/0009-migration-from-caphv.md).
package caphv

import (
	"maps"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Group is CAPHV's API group, which is this provider's.
const Group = "infrastructure.cluster.x-k8s.io"

// contractLabels are CAPHV's release labels on its CRDs: every Cluster API contract maps to
// v1alpha1, so Cluster API reads and writes its objects as v1alpha1.
var contractLabels = map[string]string{
	"cluster.x-k8s.io/provider": "infrastructure-harvester",
	"cluster.x-k8s.io/v1beta2":  "v1alpha1",
	"cluster.x-k8s.io/v1beta1":  "v1alpha1",
}

// CRDs are CAPHV's four CRDs as its release installs them: namespaced, v1alpha1 and v1beta1
// served, v1beta1 stored, status subresources on the cluster and the machine. Their schemas
// keep every field (the bed does not check CAPHV's schema), and they convert between the two
// versions without a webhook: CAPHV's conversion copies every field but v1alpha1's
// failureReason and failureMessage, which no test sets.
func CRDs() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, k := range []struct {
		kind, plural string
		status       bool
	}{
		{"HarvesterCluster", "harvesterclusters", true},
		{"HarvesterMachine", "harvestermachines", true},
		{"HarvesterClusterTemplate", "harvesterclustertemplates", false},
		{"HarvesterMachineTemplate", "harvestermachinetemplates", false},
	} {
		schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec":   {Type: "object", XPreserveUnknownFields: ptr.To(true)},
				"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
			},
		}}
		var sub *apiextensionsv1.CustomResourceSubresources
		if k.status {
			sub = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
		}
		labels := maps.Clone(contractLabels)
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: k.plural + "." + Group, Labels: labels},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: Group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, ListKind: k.kind + "List", Plural: k.plural, Singular: strings.ToLower(k.kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
					{Name: "v1alpha1", Served: true, Storage: false, Schema: schema, Subresources: sub},
					{Name: "v1beta1", Served: true, Storage: true, Schema: schema, Subresources: sub},
				},
			},
		})
	}
	return out
}
