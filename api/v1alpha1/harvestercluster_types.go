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

const (
	// ClusterFinalizer lets the HarvesterCluster reconciler clean up Harvester objects before the
	// HarvesterCluster goes away.
	ClusterFinalizer = "harvestercluster.infrastructure.cluster.x-k8s.io"

	// SkipHarvesterCleanupAnnotation is an annotation that, set to "true" on a HarvesterCluster, lets it and its
	// machines be deleted without removing anything on Harvester: the escape hatch for a cluster
	// whose Harvester is gone for good. What is left on Harvester must then be removed by hand.
	SkipHarvesterCleanupAnnotation = "harvester.infrastructure.cluster.x-k8s.io/skip-harvester-cleanup"

	// OwnerMarkAnnotation holds a HarvesterCluster's owner mark: set by the provider when it
	// first reconciles the cluster (16 hex characters, from the object's UID; 10 for a cluster an
	// earlier version marked), before anything
	// is made on Harvester, and part of every name and label it writes there for the cluster.
	// Two management clusters that share a Harvester namespace thus never take each other's
	// objects for their own, even for clusters of the same namespace and name. clusterctl move
	// carries it; the webhooks keep it through updates that leave it out and refuse to change it.
	// An empty value marks a cluster first reconciled by a version without marks, whose objects
	// keep their names.
	OwnerMarkAnnotation = "harvester.infrastructure.cluster.x-k8s.io/owner-mark"

	// LoadBalancerAnnotation names the control-plane load balancer the provider made for the
	// cluster on Harvester (set when it is made). It tells the provider's endpoint from one the
	// user set: a cluster that has it gets its load balancer back if it is deleted on Harvester.
	// clusterctl move carries it (status does not); the webhooks keep it through updates that
	// leave it out.
	LoadBalancerAnnotation = "harvester.infrastructure.cluster.x-k8s.io/control-plane-load-balancer"

	// GuestVolumesAnnotation records, comma-separated, the Harvester volumes the guest's CSI
	// driver made (status.guestVolumes shows the same list), for the cluster's deletion to delete
	// them when the guest is gone: clusterctl move carries annotations but not status, and the
	// driver puts no label on those volumes from which the list could be rebuilt. The webhooks keep
	// it through updates that leave it out.
	GuestVolumesAnnotation = "harvester.infrastructure.cluster.x-k8s.io/guest-volumes"

	// AddonsLabel is a label that, on a Cluster with the Cluster's own name as value, selects the
	// ClusterResourceSet that installs the guest's Harvester addons (the cluster templates set
	// it). Without it no addon reaches the guest, and the AddonsReady condition says so.
	AddonsLabel = "harvester.infrastructure.cluster.x-k8s.io/addons"

	// IdentitySecretKey is the key of the identity Secret that holds the Harvester kubeconfig.
	IdentitySecretKey = "kubeconfig"
)

// IPAMMode says how the control-plane load balancer gets its address.
// +kubebuilder:validation:Enum=pool;dhcp
type IPAMMode string

const (
	// IPAMPool takes the address from a Harvester IPPool.
	IPAMPool IPAMMode = "pool"
	// IPAMDHCP has Harvester lease the address from the network's DHCP server.
	IPAMDHCP IPAMMode = "dhcp"
)

// HarvesterClusterSpec is the desired state of a guest cluster's infrastructure on Harvester.
// +kubebuilder:validation:XValidation:rule="has(self.identityRef) != has(self.identitySecret)",message="set exactly one of identityRef and identitySecret"
type HarvesterClusterSpec struct {
	// identityRef names the Harvester identity: a HarvesterClusterIdentity the platform admin
	// made (its Secret in the provider's namespace; it must allow this object's namespace and
	// targetNamespace), or a Secret of this object's namespace whose `kubeconfig` key reaches
	// Harvester (label it `clusterctl.cluster.x-k8s.io/move` so that clusterctl move takes it
	// along). Exactly one of identityRef and identitySecret is set.
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

	// identitySecret names the Secret, in this object's namespace, whose `kubeconfig` key reaches
	// Harvester (directly or through a Rancher proxy URL); the same as identityRef of kind
	// Secret, kept for manifests written before identityRef.
	// +optional
	IdentitySecret SecretReference `json:"identitySecret,omitempty,omitzero"`

	// targetNamespace is the Harvester namespace that holds this cluster's VMs, load balancers,
	// cloud-init Secrets and guest credentials. Immutable. Namespaces of Kubernetes, Harvester,
	// Longhorn, Rancher (`cattle-*`) and Fleet (`fleet-*`) are refused; `default` is fine.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!(self in ['kube-system', 'kube-public', 'kube-node-lease', 'harvester-system', 'harvester-public', 'longhorn-system'])",message="is a system namespace of Kubernetes, Harvester or Longhorn"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('cattle-') && !self.startsWith('fleet-')",message="is a system namespace of Rancher (cattle-*) or Fleet (fleet-*)"
	TargetNamespace string `json:"targetNamespace"`

	// controlPlaneEndpoint is the address of the guest cluster's API server. Leave it empty and
	// the provider creates a Harvester load balancer and fills it in once; set it yourself and no
	// load balancer is made.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// loadBalancer configures the control-plane load balancer on Harvester.
	// +optional
	LoadBalancer LoadBalancerSpec `json:"loadBalancer,omitempty,omitzero"`

	// addons says which in-guest components this cluster gets credentials for. Immutable: a
	// ClusterResourceSet never uninstalls what it applied.
	// +optional
	Addons AddonsSpec `json:"addons,omitempty,omitzero"`

	// guestHarvesterAPI is the Harvester API endpoint the guest cluster's cloud provider and CSI
	// driver use. Needed when the identity's server is a Rancher proxy URL, because a Harvester
	// token is not valid there; when unset or its server is empty, the identity's own server and
	// CA are used.
	// +optional
	GuestHarvesterAPI *HarvesterAPIEndpoint `json:"guestHarvesterAPI,omitempty"`
}

// IdentityReference names a HarvesterClusterIdentity or a Secret of the object's namespace.
type IdentityReference struct {
	// kind is HarvesterClusterIdentity or Secret.
	// +required
	// +kubebuilder:validation:Enum=HarvesterClusterIdentity;Secret
	Kind string `json:"kind"`
	// name of the HarvesterClusterIdentity or Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretReference names a Secret in the namespace of the object that refers to it.
type SecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// LoadBalancerSpec configures the Harvester load balancer in front of the control plane.
type LoadBalancerSpec struct {
	// ipam is how the load balancer gets its address: `pool` (a Harvester IPPool, the default) or
	// `dhcp`. Immutable, as on Harvester.
	// +optional
	IPAM IPAMMode `json:"ipam,omitempty"`

	// ipPoolName pins the IPPool to allocate from (pool mode only). When empty, Harvester picks
	// the pool whose selector matches the load balancer's network, namespace and cluster, or the
	// global pool. With a HarvesterClusterIdentity the named pool must be the global pool or one
	// whose scope names the target namespace (condition reason ReferenceNotAllowed otherwise).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	IPPoolName string `json:"ipPoolName,omitempty"`

	// network is the Harvester VM network (`namespace/name` of its NetworkAttachmentDefinition)
	// the address is on, recorded as the load balancer's `loadbalancer.harvesterhci.io/network`
	// annotation. Harvester's load-balancer webhook (v1.5) replaces that annotation on load
	// balancers of VMs, so Harvester chooses the IPPool by namespace and project (or ipPoolName
	// names it), not by this network. With a HarvesterClusterIdentity it must be in the target
	// namespace or one of the identity's sharedNamespaces.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Network string `json:"network,omitempty"`
}

// AddonsSpec says which in-guest components get Harvester credentials.
type AddonsSpec struct {
	// cloudProvider grants the guest's cloud controller manager its Harvester credential
	// (a binding in the target namespace to `capi-harvester-guest-cloudprovider`: load
	// balancers, and reads of VMs and their instances). Defaults to true.
	// +optional
	CloudProvider *bool `json:"cloudProvider,omitempty"`

	// csi grants the guest's Harvester CSI driver a binding to `capi-harvester-guest-csi-volumes`
	// in the target namespace (volumes, hot-plug, snapshots, backups and restores), and to
	// `capi-harvester-guest-csi` (a StorageClass it names and the driver's Settings)
	// cluster-wide. Defaults to true.
	// +optional
	CSI *bool `json:"csi,omitempty"`
}

// HarvesterAPIEndpoint is a Harvester API server as seen from the guest cluster.
type HarvesterAPIEndpoint struct {
	// server is the https URL of Harvester's API, usually `https://<harvester-vip>:6443`. Empty
	// means the identity's own server and CA (the templates write it empty unless
	// HARVESTER_GUEST_API_SERVER is set).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Server string `json:"server,omitempty"`

	// caBundle is the PEM-encoded CA that signs the server's certificate. null is none: the
	// templates write null when HARVESTER_GUEST_API_CA_BUNDLE is unset (a byte field takes no
	// empty string), and a server-side apply of them must be accepted as a create is.
	// +optional
	// +nullable
	CABundle []byte `json:"caBundle,omitempty"`
}

// HarvesterClusterStatus is the observed state of a HarvesterCluster.
// +kubebuilder:validation:MinProperties=1
type HarvesterClusterStatus struct {
	// initialization reports the provisioning milestones of the CAPI contract.
	// +optional
	Initialization ClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// conditions describe the state of the HarvesterCluster; `Ready` summarises them.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// failureDomains are the Harvester zones (or hosts, when no host has a zone label) that
	// machines can be spread across.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// harvesterVersion is the version the Harvester cluster reports (its `server-version`
	// setting).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	HarvesterVersion string `json:"harvesterVersion,omitempty"`

	// loadBalancer is the control-plane load balancer on Harvester.
	// +optional
	LoadBalancer LoadBalancerStatus `json:"loadBalancer,omitempty,omitzero"`

	// guestVolumes are the volumes on Harvester (PersistentVolumeClaims in the target namespace)
	// that the Harvester CSI driver in the guest made for the guest's PersistentVolumes with
	// reclaim policy Delete, kept in step with the guest while it is reachable. Deleting the
	// cluster deletes them; volumes whose PersistentVolume says Retain are not listed and stay.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4096
	// +kubebuilder:validation:items:MaxLength=253
	GuestVolumes []string `json:"guestVolumes,omitempty"`
}

// ClusterInitializationStatus holds the provisioning milestones of a HarvesterCluster.
// +kubebuilder:validation:MinProperties=1
type ClusterInitializationStatus struct {
	// provisioned is true once the control-plane endpoint is known and the infrastructure is
	// ready for machines.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LoadBalancerStatus describes the control-plane load balancer on Harvester.
// +kubebuilder:validation:MinProperties=1
type LoadBalancerStatus struct {
	// name of the Harvester LoadBalancer object in the target namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// address Harvester allocated to it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Address string `json:"address,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=harvesterclusters,scope=Namespaced,categories=cluster-api,shortName=hvc
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this HarvesterCluster belongs to"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description="Whether the infrastructure is ready"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control-plane endpoint"
// +kubebuilder:printcolumn:name="Namespace",type="string",JSONPath=".spec.targetNamespace",description="Harvester namespace",priority=1
// +kubebuilder:printcolumn:name="Harvester",type="string",JSONPath=".status.harvesterVersion",description="Harvester version",priority=1
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",description="Why it is (not) ready",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// HarvesterCluster is the infrastructure of a Cluster API cluster on Harvester HCI.
type HarvesterCluster struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec HarvesterClusterSpec `json:"spec"`
	// +optional
	Status HarvesterClusterStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// HarvesterClusterList is a list of HarvesterClusters.
type HarvesterClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HarvesterCluster `json:"items"`
}

// GetConditions returns the conditions of the HarvesterCluster.
func (c *HarvesterCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the conditions of the HarvesterCluster.
func (c *HarvesterCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// CloudProviderEnabled reports whether the guest's cloud provider gets credentials.
func (s *AddonsSpec) CloudProviderEnabled() bool {
	return s.CloudProvider == nil || *s.CloudProvider
}

// Identity is the identity the spec names, identitySecret read as identityRef of kind Secret.
func (s *HarvesterClusterSpec) Identity() IdentityReference {
	if s.IdentityRef != nil {
		return *s.IdentityRef
	}
	return IdentityReference{Kind: "Secret", Name: s.IdentitySecret.Name}
}

// CSIEnabled reports whether the guest's CSI driver gets credentials.
func (s *AddonsSpec) CSIEnabled() bool { return s.CSI == nil || *s.CSI }

func init() {
	SchemeBuilder.Register(&HarvesterCluster{}, &HarvesterClusterList{})
}
