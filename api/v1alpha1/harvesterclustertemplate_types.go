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
