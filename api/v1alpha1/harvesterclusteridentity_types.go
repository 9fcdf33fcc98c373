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
)

// HarvesterClusterIdentityKind is the kind an identityRef names for an admin-owned identity.
const HarvesterClusterIdentityKind = "HarvesterClusterIdentity"

// HarvesterClusterIdentitySpec is a Harvester credential the platform admin lends to tenants:
// its kubeconfig lives in a Secret of the provider's own namespace, which tenants cannot read,
// and it serves only the management namespaces and Harvester namespaces it lists.
type HarvesterClusterIdentitySpec struct {
	// secretName names the Secret, in the provider's namespace (capi-harvester-system), whose
	// `kubeconfig` key reaches Harvester. The provider reads it; tenants need no access to it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// allowedNamespaces are the management namespaces whose HarvesterClusters may use this
	// identity: those listed, and those the selector matches. Empty, no namespace may.
	// +required
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`

	// targetNamespaces are the Harvester namespaces a HarvesterCluster using this identity may
	// name as its targetNamespace. Give each tenant its own.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	TargetNamespaces []string `json:"targetNamespaces"`

	// sharedNamespaces are further Harvester namespaces whose images, key pairs and VM networks
	// machines using this identity may name as `namespace/name` (Harvester installs often keep
	// public images and VLANs in one namespace). A machine's own target namespace is always
	// allowed; any other namespace is refused.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	SharedNamespaces []string `json:"sharedNamespaces,omitempty"`
}

// AllowedNamespaces selects management namespaces.
type AllowedNamespaces struct {
	// list names namespaces.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	NamespaceList []string `json:"list,omitempty"`

	// selector matches namespaces by their labels. An empty selector matches every namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// HarvesterClusterIdentity is an admin-owned Harvester identity that HarvesterClusters of the
// namespaces it allows name in spec.identityRef (the CAPV/CAPZ/CAPA multi-tenancy convention).
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=harvesterclusteridentities,scope=Cluster,categories=cluster-api
// +kubebuilder:printcolumn:name="Secret",type="string",JSONPath=".spec.secretName",description="Secret in the provider's namespace"
// +kubebuilder:printcolumn:name="Targets",type="string",JSONPath=".spec.targetNamespaces",description="Harvester namespaces it may target"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type HarvesterClusterIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec HarvesterClusterIdentitySpec `json:"spec"`
}

// HarvesterClusterIdentityList is a list of HarvesterClusterIdentities.
// +kubebuilder:object:root=true
type HarvesterClusterIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HarvesterClusterIdentity `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HarvesterClusterIdentity{}, &HarvesterClusterIdentityList{})
}
