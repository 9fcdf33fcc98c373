package harvester

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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
	// LabelMachine holds MachineLabelValue of the machine's name: the name itself when it fits a
	// label value, else the VM's hashed name. AnnotationMachine always holds the whole name.
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

// AnnotationMachine, on a VM and its VMI, holds the whole name of their HarvesterMachine, which
// LabelMachine cannot hold when it is longer than a label value.
const AnnotationMachine = "harvester.infrastructure.cluster.x-k8s.io/machine-name"

// AnnotationManagementNetwork on a VMI names its management interface (the machine's
// `management` NIC) when that is not the first: the guest's cloud provider reads it, so the
// node's InternalIP is the address the machine reports.
const AnnotationManagementNetwork = "harvester.infrastructure.cluster.x-k8s.io/management-network"

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
	return hashedName(s, s, max)
}

// hashedName is a prefix of base, "-" and 10 hex characters of the hash of key, at most max
// characters (just the hash when no prefix is left). The hash covers all of key, so that names
// that share a long prefix stay distinct.
func hashedName(key, base string, max int) string {
	sum := sha256.Sum256([]byte(key))
	suffix := hex.EncodeToString(sum[:])[:10]
	if len(base) > max-len(suffix)-1 {
		base = base[:max-len(suffix)-1]
	}
	if base = strings.TrimRight(base, "-."); base == "" {
		return suffix
	}
	return base + "-" + suffix
}

// VMName is the name of a machine's VM on Harvester, and its hostname. A KubeVirt VM's name
// becomes its VMI's and its virt-launcher pod's, and the guest's hostname, so it must be a
// DNS-1123 label of at most 63 characters; a machine's name may be a DNS subdomain of up to 253
// (CAPI names machines after their MachineDeployment, which can be long). Refusing such a
// machine would wedge its MachineSet, so a name that is not a label becomes its label-safe
// start and a hash of the whole name: stable across reconciles, distinct per machine. A name
// that is a label (every name that worked before) stays as it is.
func VMName(machine string) string {
	if len(validation.IsDNS1123Label(machine)) == 0 {
		return machine
	}
	base := strings.TrimLeft(notDNSLabel.ReplaceAllString(strings.ToLower(machine), "-"), "-")
	return hashedName(machine, base, validation.DNS1123LabelMaxLength)
}

// MachineLabelValue is the value of LabelMachine for a machine: its name when that is a valid
// label value (at most 63 characters), else its VM's name, which always is one.
func MachineLabelValue(machine string) string {
	if len(validation.IsValidLabelValue(machine)) == 0 {
		return machine
	}
	return VMName(machine)
}

// MachineOf returns the namespace and name of the HarvesterMachine a VM or VMI was made for, from
// AnnotationMachine (the whole name) or, on objects made before it existed, LabelMachine.
func MachineOf(obj metav1.Object) (namespace, name string, ok bool) {
	namespace = obj.GetLabels()[LabelMachineNamespace]
	name = obj.GetAnnotations()[AnnotationMachine]
	if name == "" {
		name = obj.GetLabels()[LabelMachine]
	}
	return namespace, name, namespace != "" && name != ""
}

// ManagedLabels are the labels every object of a guest cluster carries.
func ManagedLabels(clusterNamespace, clusterName string) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelCluster:   ClusterID(clusterNamespace, clusterName),
	}
}
