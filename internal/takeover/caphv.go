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

// Package takeover takes clusters over from the community Harvester provider (CAPHV,
// rancher-sandbox/cluster-api-provider-harvester v0.10) without re-creating anything on
// Harvester (docs/decisions/0009-migration-from-caphv.md, docs/migrating-from-caphv.md): it reads
// CAPHV's objects, refuses what this provider cannot take over, and translates the rest into
// this provider's objects and the labels their Harvester objects need.
//
// CAPHV's types are written here from its documented schema (storage version v1beta1), not
// imported: its module is not one this project builds against, and only the fields below are
// read.
package takeover

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// CAPHV's group is this provider's; it stores v1beta1 (and serves v1alpha1 with the same schema).
const caphvVersion = "v1beta1"

// GVKs of CAPHV's kinds, read in their storage version (no conversion webhook is needed to read
// them, so they can be read while CAPHV is stopped).
var (
	ClusterGVK         = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: caphvVersion, Kind: "HarvesterCluster"}
	MachineGVK         = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: caphvVersion, Kind: "HarvesterMachine"}
	MachineTemplateGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: caphvVersion, Kind: "HarvesterMachineTemplate"}
	ClusterTemplateGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: caphvVersion, Kind: "HarvesterClusterTemplate"}
)

// Finalizers are CAPHV's finalizers, current and legacy, which a take-over removes once CAPHV is
// stopped.
var Finalizers = []string{
	"harvester.infrastructure.cluster.x-k8s.io/finalizer",
	"harvester.infrastructure.cluster.x-k8s.io",
	"harvestermachine.infrastructure.cluster.x-k8s.io/finalizer",
	"harvestermachine.infrastructure.cluster.x-k8s.io",
}

// What CAPHV names and labels on Harvester.
const (
	// LabelMachineType selects a cluster's control-plane VMIs for CAPHV's load balancer, with
	// value `controlplane-<cluster>`.
	LabelMachineType = "harvestercluster/machinetype"
	// CloudInitSuffix: a machine's cloud-init Secret is `<machine>-cloud-init`.
	CloudInitSuffix = "-cloud-init"
)

// Cluster is CAPHV's HarvesterCluster (v1beta1), the fields a take-over reads.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterSpec   `json:"spec"`
	Status            ClusterStatus `json:"status,omitempty"`
}

// ClusterSpec is CAPHV's HarvesterClusterSpec.
type ClusterSpec struct {
	Server                    string                `json:"server,omitempty"`
	IdentitySecret            NamespacedName        `json:"identitySecret"`
	LoadBalancerConfig        LoadBalancerConfig    `json:"loadBalancerConfig"`
	ControlPlaneEndpoint      clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty"`
	TargetNamespace           string                `json:"targetNamespace"`
	UpdateCloudProviderConfig *map[string]string    `json:"updateCloudProviderConfig,omitempty"`
	VMNetworkConfig           *VMNetworkConfig      `json:"vmNetworkConfig,omitempty"`
}

// NamespacedName is CAPHV's SecretKey.
type NamespacedName struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// LoadBalancerConfig is CAPHV's control-plane load balancer configuration.
type LoadBalancerConfig struct {
	IPAMType  string     `json:"ipamType"`
	IPPoolRef string     `json:"ipPoolRef,omitempty"`
	IPPool    IPPool     `json:"ipPool,omitempty"`
	Listeners []Listener `json:"listeners,omitempty"`
}

// IPPool is CAPHV's inline pool, which it creates on Harvester.
type IPPool struct {
	VMNetwork  string `json:"vmNetwork,omitempty"`
	Subnet     string `json:"subnet,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
}

// Listener is an extra port of CAPHV's load balancer.
type Listener struct {
	Name        string `json:"name"`
	Port        int32  `json:"port"`
	Protocol    string `json:"protocol"`
	BackendPort int32  `json:"backendPort"`
}

// VMNetworkConfig is CAPHV's static addressing of VMs from its own allocator.
type VMNetworkConfig struct {
	IPPoolRef  string   `json:"ipPoolRef,omitempty"`
	IPPoolRefs []string `json:"ipPoolRefs,omitempty"`
	IPPool     *IPPool  `json:"ipPool,omitempty"`
	Gateway    string   `json:"gateway,omitempty"`
	SubnetMask string   `json:"subnetMask,omitempty"`
}

// ClusterStatus is what a take-over reads of CAPHV's HarvesterCluster status.
type ClusterStatus struct {
	Ready      bool               `json:"ready,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Machine is CAPHV's HarvesterMachine (v1beta1).
type Machine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MachineSpec   `json:"spec"`
	Status            MachineStatus `json:"status,omitempty"`
}

// MachineTemplate is CAPHV's HarvesterMachineTemplate.
type MachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Template struct {
			ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty"`
			Spec       MachineSpec          `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// MachineSpec is CAPHV's HarvesterMachineSpec.
type MachineSpec struct {
	ProviderID       string               `json:"providerID,omitempty"`
	FailureDomain    string               `json:"failureDomain,omitempty"`
	CPU              int32                `json:"cpu"`
	Memory           string               `json:"memory"`
	SSHUser          string               `json:"sshUser,omitempty"`
	SSHKeyPair       string               `json:"sshKeyPair,omitempty"`
	Volumes          []Volume             `json:"volumes"`
	Networks         []string             `json:"networks"`
	NodeAffinity     *corev1.NodeAffinity `json:"nodeAffinity,omitempty"`
	WorkloadAffinity *corev1.PodAffinity  `json:"workloadAffinity,omitempty"`
	NetworkConfig    *map[string]any      `json:"networkConfig,omitempty"`
	VMNetworkConfig  *VMNetworkConfig     `json:"vmNetworkConfig,omitempty"`
	Firmware         *MachineFirmware     `json:"firmware,omitempty"`
	TPM              *MachineTPM          `json:"tpm,omitempty"`
}

// Volume is one disk of CAPHV's machine.
type Volume struct {
	VolumeType   string             `json:"volumeType"`
	ImageName    string             `json:"imageName,omitempty"`
	StorageClass string             `json:"storageClass,omitempty"`
	VolumeSize   *resource.Quantity `json:"volumeSize,omitempty"`
	BootOrder    int                `json:"bootOrder,omitempty"`
}

// MachineFirmware is CAPHV's firmware choice.
type MachineFirmware struct {
	EFI        bool `json:"efi,omitempty"`
	SecureBoot bool `json:"secureBoot,omitempty"`
}

// MachineTPM is CAPHV's virtual TPM.
type MachineTPM struct {
	Enabled    bool `json:"enabled,omitempty"`
	Persistent bool `json:"persistent,omitempty"`
}

// MachineStatus is what a take-over reads of CAPHV's HarvesterMachine status.
type MachineStatus struct {
	Ready      bool                       `json:"ready,omitempty"`
	Addresses  []clusterv1.MachineAddress `json:"addresses,omitempty"`
	Conditions []metav1.Condition         `json:"conditions,omitempty"`
}

// LoadBalancerName is the name CAPHV gives a cluster's control-plane load balancer (and its
// Service): its RFC 1035 name of `<namespace>-<name>-lb` of the HarvesterCluster.
func LoadBalancerName(namespace, name string) string {
	return rfc1035Name(namespace, name, "lb")
}

var notRFC1035 = regexp.MustCompile(`[^a-z0-9-]`)

// rfc1035Name joins parts as CAPHV's name helper does: joined with `-`, lower-cased, every other
// character made `-`, trimmed of `-`, prefixed with `a-` unless it starts with a letter, and cut
// to 63 characters (which may leave a trailing `-`, a name Kubernetes refuses).
func rfc1035Name(parts ...string) string {
	s := notRFC1035.ReplaceAllString(strings.ToLower(strings.Join(parts, "-")), "-")
	s = strings.Trim(s, "-")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "a-" + s
	}
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}
