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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// HarvesterMachineTemplateSpec holds the template of HarvesterMachines made from it.
type HarvesterMachineTemplateSpec struct {
	// +required
	Template HarvesterMachineTemplateResource `json:"template"`
}

// HarvesterMachineTemplateResource is what CAPI stamps out as a HarvesterMachine.
type HarvesterMachineTemplateResource struct {
	// metadata is copied onto the HarvesterMachines made from this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of the HarvesterMachines made from this template. It cannot fix providerID or a MAC
	// address: every machine made from it would get the same.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID)",message="must not be set in a template: every machine made from it would claim the same VM",fieldPath=".providerID"
	// +kubebuilder:validation:XValidation:rule="!has(self.networks) || self.networks.all(n, !has(n.macAddress))",message="must not fix a MAC address in a template: every machine made from it would get the same",fieldPath=".networks"
	Spec HarvesterMachineSpec `json:"spec"`
}

// Architecture is the CPU architecture of a node.
// +kubebuilder:validation:Enum=amd64;arm64
type Architecture string

const (
	// ArchitectureAmd64 is x86-64.
	ArchitectureAmd64 Architecture = "amd64"
	// ArchitectureArm64 is 64-bit ARM.
	ArchitectureArm64 Architecture = "arm64"
)

// NodeInfo describes the nodes made from a template, for autoscaling from zero.
// +kubebuilder:validation:MinProperties=1
type NodeInfo struct {
	// architecture of the node's CPU.
	// +optional
	Architecture Architecture `json:"architecture,omitempty"`

	// operatingSystem of the node, e.g. `linux`.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	OperatingSystem string `json:"operatingSystem,omitempty"`
}

// HarvesterMachineTemplateStatus is the observed state of a HarvesterMachineTemplate.
// +kubebuilder:validation:MinProperties=1
type HarvesterMachineTemplateStatus struct {
	// capacity of a node made from this template, written by the provider from the spec: `cpu`
	// (cores), `memory` (what the guest sees: memory less reservedMemory) and `ephemeral-storage`
	// (the boot disk's size), so that the cluster autoscaler can scale a MachineDeployment up
	// from zero.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// nodeInfo describes the nodes made from this template (written by the provider:
	// `amd64`, `linux`).
	// +optional
	NodeInfo NodeInfo `json:"nodeInfo,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=harvestermachinetemplates,scope=Namespaced,categories=cluster-api,shortName=hvmt
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="CPU",type="integer",JSONPath=".spec.template.spec.cpu",description="Virtual CPU cores"
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".spec.template.spec.memory",description="Guest memory"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// HarvesterMachineTemplate is a template for HarvesterMachines, used by MachineDeployments,
// control planes and ClusterClasses.
type HarvesterMachineTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec HarvesterMachineTemplateSpec `json:"spec"`
	// +optional
	Status HarvesterMachineTemplateStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// HarvesterMachineTemplateList is a list of HarvesterMachineTemplates.
type HarvesterMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HarvesterMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HarvesterMachineTemplate{}, &HarvesterMachineTemplateList{})
}
