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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// HarvesterClusterTemplateSpec holds the template of HarvesterClusters made from it.
type HarvesterClusterTemplateSpec struct {
	// +required
	Template HarvesterClusterTemplateResource `json:"template"`
}

// HarvesterClusterTemplateResource is what a ClusterClass stamps out as a HarvesterCluster.
type HarvesterClusterTemplateResource struct {
	// metadata is copied onto the HarvesterClusters made from this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// +required
	Spec HarvesterClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=harvesterclustertemplates,scope=Namespaced,categories=cluster-api,shortName=hvct
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// HarvesterClusterTemplate is a template for HarvesterClusters, used by ClusterClasses.
type HarvesterClusterTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec HarvesterClusterTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// HarvesterClusterTemplateList is a list of HarvesterClusterTemplates.
type HarvesterClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HarvesterClusterTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HarvesterClusterTemplate{}, &HarvesterClusterTemplateList{})
}
