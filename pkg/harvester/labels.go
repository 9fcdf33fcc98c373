package harvester

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Labels the provider puts on what it creates on Harvester. VMs carry them on the object and on
// spec.template.metadata, so their VMIs (which Harvester's load balancer selects and our watches
// follow) carry them too.
const (
	// LabelManagedBy marks objects this provider created; its caches see only those.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "cluster-api-provider-harvester"

	// LabelCluster identifies the guest cluster (see ClusterID): unique per management cluster
	// even for clusters of the same name in different namespaces.
	LabelCluster = "harvester.infrastructure.cluster.x-k8s.io/cluster"
	// LabelMachine and LabelMachineNamespace name the HarvesterMachine a VM belongs to.
	LabelMachine          = "harvester.infrastructure.cluster.x-k8s.io/machine"
	LabelMachineNamespace = "harvester.infrastructure.cluster.x-k8s.io/machine-namespace"
	// LabelRole is RoleControlPlane or RoleWorker.
	LabelRole = "harvester.infrastructure.cluster.x-k8s.io/role"

	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"

	// Harvester's labels for guest-cluster VMs: with them Harvester keeps the host's topology
	// on the VMIs and its load balancer finds a guest cluster's network.
	LabelHarvesterCreator      = "harvesterhci.io/creator"
	HarvesterCreatorValue      = "docker-machine-driver-harvester"
	LabelHarvesterGuestCluster = "guestcluster.harvesterhci.io/name"
)

// Harvester annotations the provider writes or reads.
const (
	AnnotationVolumeClaimTemplates = "harvesterhci.io/volumeClaimTemplates"
	AnnotationRemovedPVCs          = "harvesterhci.io/removedPersistentVolumeClaims"
	AnnotationImageID              = "harvesterhci.io/imageId"
	AnnotationReservedMemory       = "harvesterhci.io/reservedMemory"
	AnnotationSSHNames             = "harvesterhci.io/sshNames"
	AnnotationDiskNames            = "harvesterhci.io/diskNames"
)

// ClusterID is the value of LabelCluster for the CAPI cluster namespace/name: `<ns>.<name>` when
// it fits a label value, else a shortened form with a hash, so that it stays unique.
func ClusterID(namespace, name string) string {
	return boundedName(namespace+"."+name, 63)
}

// boundedName returns s if it has at most max characters, else a prefix of s and 10 hex
// characters of its hash, max characters in all, ending with an alphanumeric character.
func boundedName(s string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:])[:10]
	prefix := strings.TrimRight(s[:max-len(suffix)-1], "-.")
	return prefix + "-" + suffix
}

// ManagedLabels are the labels every object of a guest cluster carries.
func ManagedLabels(clusterNamespace, clusterName string) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelCluster:   ClusterID(clusterNamespace, clusterName),
	}
}
