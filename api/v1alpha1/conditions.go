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

// Condition types and reasons. Every reason names something a user can check or act on; the
// condition message carries the detail (never a secret). `Ready` (clusterv1.ReadyCondition)
// summarises the other conditions of an object, and `Paused` (clusterv1.PausedCondition)
// follows CAPI's pause.

// Conditions shared by HarvesterClusters and HarvesterMachines.
const (
	// ReadyReason is the reason of a condition that is true.
	ReadyReason = "Ready"

	// DeletingReason is used while the provider removes the object's Harvester resources.
	DeletingReason = "Deleting"
	// WaitingForMachinesDeletionReason (on the HarvesterCluster's Deleting condition): the
	// cluster's HarvesterMachines, which need the cluster's connection to clean up their VMs,
	// are not gone yet.
	WaitingForMachinesDeletionReason = "WaitingForMachinesDeletion"

	// HarvesterUnreachableReason: the Harvester API (or the Rancher proxy in front of it) did not
	// answer.
	HarvesterUnreachableReason = "HarvesterUnreachable"

	// CacheBudgetExceededReason: the objects the cluster's connection to Harvester caches passed
	// the connection's budget, or it held the most when all connections together passed the
	// manager's (most often objects a guest made in a target namespace): the connection is
	// stopped for a while.
	CacheBudgetExceededReason = "CacheBudgetExceeded"

	// UnauthorizedReason: Harvester refused the identity's credentials (401): expired, revoked
	// or wrong token.
	UnauthorizedReason = "Unauthorized"

	// ForbiddenReason: the identity lacks a permission it needs on Harvester (403).
	ForbiddenReason = "Forbidden"

	// HarvesterRefusedReason: Harvester's API answered a request with an error of its own (a
	// validating webhook, a quota, a conflict); the message quotes Harvester's Status.
	HarvesterRefusedReason = "HarvesterRefused"
)

// HarvesterCluster conditions.
const (
	// HarvesterAvailableCondition is true when the identity Secret holds a usable kubeconfig and
	// Harvester answers it with the rights the provider needs in the target namespace.
	HarvesterAvailableCondition = "HarvesterAvailable"

	// IdentitySecretNotFoundReason: the identity Secret does not exist.
	IdentitySecretNotFoundReason = "IdentitySecretNotFound"
	// IdentityNotFoundReason: the manager does not know its own namespace, where the Secrets of
	// HarvesterClusterIdentities live.
	IdentityNotFoundReason = "IdentityNotFound"
	// IdentityNotAllowedReason: the HarvesterClusterIdentity named in spec.identityRef does not
	// exist or does not allow this namespace (one message for both), or does not allow this
	// target namespace.
	IdentityNotAllowedReason = "IdentityNotAllowed"
	// InvalidKubeconfigReason: the identity Secret has no `kubeconfig` key or it does not parse.
	InvalidKubeconfigReason = "InvalidKubeconfig"
	// TargetNamespaceNotFoundReason: the target namespace does not exist on Harvester.
	TargetNamespaceNotFoundReason = "TargetNamespaceNotFound"

	// FailureDomainsReadyCondition is true once the failure domains were read from the hosts.
	FailureDomainsReadyCondition = "FailureDomainsReady"
	// ZonesReason: failure domains are Harvester's zones.
	ZonesReason = "Zones"
	// HostsReason: no host has a zone label, so each host is its own failure domain.
	HostsReason = "Hosts"

	// LoadBalancerReadyCondition is true once the control-plane endpoint is known.
	LoadBalancerReadyCondition = "LoadBalancerReady"
	// WaitingForAddressReason: the load balancer exists but has no address yet.
	WaitingForAddressReason = "WaitingForAddress"
	// IPPoolExhaustedReason: the IPPool has no free address. Also the reason of a
	// HarvesterMachine's IPAddressesReady when a Cluster API IPAM pool has none for its claim
	// (said by the IPAM provider on the claim, or read from the pool's status).
	IPPoolExhaustedReason = "IPPoolExhausted"
	// UserProvidedEndpointReason: spec.controlPlaneEndpoint was set by the user; no load balancer.
	UserProvidedEndpointReason = "UserProvidedEndpoint"
	// LoadBalancerRecreatedReason: the control-plane load balancer the provider made was deleted
	// on Harvester; the provider made it again and waits for its address (Harvester gives a
	// load balancer of the same name its former address back while that address is free).
	LoadBalancerRecreatedReason = "LoadBalancerRecreated"
	// EndpointMismatchReason: the control-plane load balancer's address is not the endpoint the
	// cluster was made with (a recreated load balancer whose former address was taken): the
	// guest's API is not reachable at its endpoint.
	EndpointMismatchReason = "EndpointMismatch"
	// LoadBalancerFailedReason: Harvester reports an error for the load balancer.
	LoadBalancerFailedReason = "LoadBalancerFailed"

	// GuestCredentialsReadyCondition is true when the guest's cloud provider and CSI driver have a
	// current Harvester token.
	GuestCredentialsReadyCondition = "GuestCredentialsReady"
	// GuestHarvesterAPIRequiredReason: the identity goes through a Rancher proxy and
	// spec.guestHarvesterAPI does not say how the guest reaches Harvester itself.
	GuestHarvesterAPIRequiredReason = "GuestHarvesterAPIRequired"
	// AddonsReadyCondition is true when the guest's addons (cloud-config, cloud controller
	// manager, CSI) are offered to the Cluster through its ClusterResourceSet.
	AddonsReadyCondition = "AddonsReady"
	// AddonsNotSelectedReason: the Cluster lacks the label that selects its ClusterResourceSet.
	AddonsNotSelectedReason = "AddonsNotSelected"
	// AddonsDisabledReason: spec.addons turns every addon off.
	AddonsDisabledReason = "AddonsDisabled"

	// TokenRequestFailedReason: Harvester refused to issue a token for the guest's
	// ServiceAccount.
	TokenRequestFailedReason = "TokenRequestFailed"

	// IdentityExpiringSoonCondition warns ahead of time that the identity's credential will
	// expire: true (a warning) when the identity Secret's kubeconfig carries a token or client
	// certificate that expires within the manager's --identity-expiry-warning, or has expired.
	// It is no part of Ready: the cluster still works until the credential expires.
	IdentityExpiringSoonCondition = "IdentityExpiringSoon"
	// IdentityExpiresSoonReason: the identity's credential expires within the warning period.
	IdentityExpiresSoonReason = "ExpiresSoon"
	// IdentityExpiredReason: the identity's credential has expired.
	IdentityExpiredReason = "Expired"
	// IdentityNotExpiringSoonReason: the identity's credential expires after the warning period.
	IdentityNotExpiringSoonReason = "NotExpiringSoon"
	// IdentityNoExpiryReason: the identity's credential says nothing of when it expires (a
	// legacy ServiceAccount token, a Rancher token).
	IdentityNoExpiryReason = "NoExpiry"
)

// HarvesterMachine conditions.
const (
	// VirtualMachineReadyCondition is true when the machine's VM runs and reports its address.
	VirtualMachineReadyCondition = "VirtualMachineReady"

	// WaitingForClusterInfrastructureReason: the HarvesterCluster is not provisioned yet.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForBootstrapDataReason: the bootstrap provider has not written its Secret yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// UnsupportedBootstrapFormatReason: the bootstrap data is in a format the provider cannot
	// deliver.
	UnsupportedBootstrapFormatReason = "UnsupportedBootstrapFormat"

	// UserDataConflictReason: the machine's userData sets a key of the bootstrap data to
	// another value, or the bootstrap data's format takes no cloud-config; the message names the
	// key (never a value). No VM is made until the spec changes.
	UserDataConflictReason = "UserDataConflict"
	// ImageNotFoundReason: a disk's VirtualMachineImage does not exist.
	ImageNotFoundReason = "ImageNotFound"
	// ReferenceNotAllowedReason: an image, key pair or network is in a Harvester namespace the
	// cluster's HarvesterClusterIdentity does not share (its sharedNamespaces).
	ReferenceNotAllowedReason = "ReferenceNotAllowed"
	// ImageNotImportedReason: a disk's VirtualMachineImage has not finished importing.
	ImageNotImportedReason = "ImageNotImported"
	// KeyPairNotFoundReason: a named KeyPair does not exist.
	KeyPairNotFoundReason = "KeyPairNotFound"
	// NetworkNotFoundReason: a named VM network does not exist.
	NetworkNotFoundReason = "NetworkNotFound"
	// NameTakenReason: a VM with the machine's name exists on Harvester and is not ours.
	NameTakenReason = "NameTaken"
	// VMDeletedReason: the machine's VM was deleted outside the provider after the machine was
	// provisioned. Terminal: a new VM would have another UID than the immutable providerID, a
	// stale bootstrap token and fresh volumes; the Machine must be replaced (a
	// MachineHealthCheck on InfrastructureReady=False, or a user deleting it, does).
	VMDeletedReason = "VMDeleted"
	// VMCreatingReason: the VM was created and its volumes are being prepared.
	VMCreatingReason = "Creating"
	// VMStartingReason: the VM is scheduled and booting.
	VMStartingReason = "Starting"
	// VMUnschedulableReason: no Harvester host can take the VM (none in its failure domain,
	// none with a free device it asks for, ...); the message quotes the scheduler. The VM starts
	// by itself once a host can take it.
	VMUnschedulableReason = "Unschedulable"
	// VMStoppedReason: the VM is not running.
	VMStoppedReason = "Stopped"
	// WaitingForIPReason: the VM runs but its management NIC has no address yet (is
	// qemu-guest-agent installed in the image?).
	WaitingForIPReason = "WaitingForIP"
	// VMFailedReason: KubeVirt reports the VM as failed.
	VMFailedReason = "Failed"

	// StoppedForHostMaintenanceReason: the provider stopped the VM, after draining its guest
	// node, to move it off a host Harvester empties (spec.hostMaintenance.policy
	// DrainAndRestart); it starts again on another host.
	StoppedForHostMaintenanceReason = "StoppedForHostMaintenance"

	// HostMaintenanceCondition is true while the machine's VM is moved off a Harvester host that
	// is emptied (maintenance mode, an upgrade, a drain or a cordon); it is not part of Ready.
	HostMaintenanceCondition = "HostMaintenance"
	// NoHostMaintenanceReason: the VM's host is not being emptied (the condition is false).
	NoHostMaintenanceReason = "NoHostMaintenance"
	// MigratingReason: the VM live-migrates to another host; the guest node stays up.
	MigratingReason = "Migrating"
	// MigrationBlockedReason: the VM's host is emptied, the machine's policy is LiveMigrate and
	// KubeVirt says the VM cannot migrate (its message says why): the host's drain waits.
	MigrationBlockedReason = "MigrationBlocked"
	// WaitingForDrainLimitReason: other machines of the same MachineDeployment (more than its
	// maxUnavailable) or of the control plane (one at a time) are being moved off their hosts.
	WaitingForDrainLimitReason = "WaitingForDrainLimit"
	// DrainingNodeReason: the provider drains the guest's Node (CAPI's drain: evictions honour
	// PodDisruptionBudgets); the message says what is left.
	DrainingNodeReason = "DrainingNode"
	// StoppedForHostReason: the guest node is drained and the VM stops to leave its host.
	StoppedForHostReason = "StoppedForHost"
	// RestartingReason: the VM starts again on another host; the condition clears once the
	// guest node is Ready, and the provider uncordons it.
	RestartingReason = "Restarting"
	// HaltedByHarvesterReason: Harvester stopped the VM itself (forced maintenance stops every
	// VM it cannot migrate at once, with no drain of the guest node); the provider starts it
	// again on another host.
	HaltedByHarvesterReason = "HaltedByHarvester"

	// ResourcesUpToDateCondition, on a machine made with maxCPU or maxMemory, is true when its
	// running VM has the CPUs and memory of its spec (which Cluster API's in-place updates, or
	// the user, may raise up to the maximums); it is not part of Ready. A failed resize is
	// reported here, never left as a half-changed VM without a word.
	ResourcesUpToDateCondition = "ResourcesUpToDate"
	// ResizingReason: the provider asked KubeVirt for the spec's CPUs and memory; KubeVirt adds
	// them to the running VM through a live migration (the message says how far).
	ResizingReason = "Resizing"
	// ResizeNeedsRestartReason: KubeVirt cannot make the change while the VM runs (its
	// RestartRequired condition, quoted); the machine keeps its old size until it is replaced
	// or its VM restarts.
	ResizeNeedsRestartReason = "RestartRequired"
	// ResizeRefusedReason: Harvester or KubeVirt refused the VM's new size (the message quotes
	// the refusal).
	ResizeRefusedReason = "ResizeRefused"

	// IPAddressesReadyCondition is true when every NIC that takes addresses from IP pools has
	// them (or no NIC does).
	IPAddressesReadyCondition = "IPAddressesReady"
	// NoIPPoolsReason: no NIC takes addresses from IP pools (the condition is true).
	NoIPPoolsReason = "NoIPPools"
	// WaitingForIPAddressReason: an IPAddressClaim has no address yet; is an IPAM provider for
	// the pool's kind installed, and does the pool exist?
	WaitingForIPAddressReason = "WaitingForIPAddress"
	// IPAddressClaimFailedReason: the IPAM provider reports the claim as failed (the message
	// quotes it), or the address it gave is unusable.
	IPAddressClaimFailedReason = "IPAddressClaimFailed"
)
