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

package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// Labels the provider puts on what it creates on Harvester. VMs carry them on the object and on
// spec.template.metadata, so their VMIs (which Harvester's load balancer selects and our watches
// follow) carry them too.
const (
	// LabelManagedBy marks objects this provider created; its caches see only those.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "cluster-api-provider-harvester"

	// LabelCluster identifies the guest cluster (see Guest.ID): unique even for clusters of the
	// same name in different namespaces, or in different management clusters.
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
	LabelHarvesterCreator = "harvesterhci.io/creator"
	HarvesterCreatorValue = "docker-machine-driver-harvester"

	// LabelMaintainModeStrategy is what Harvester's maintenance mode does with a VM it can
	// migrate (Migrate, or a Shutdown* strategy that stops it without draining the guest); the
	// provider writes Migrate.
	LabelMaintainModeStrategy = "harvesterhci.io/maintain-mode-strategy"

	// AnnotationEnableCPUAndMemoryHotplug tells Harvester's VM mutator that the VM's CPUs and
	// memory may change while it runs: it then keeps the VM's maxSockets and guest memory.
	AnnotationEnableCPUAndMemoryHotplug = "harvesterhci.io/enableCPUAndMemoryHotplug"
	MaintainModeMigrate                 = "Migrate"

	// AnnotationStoppedForHost marks a VM the provider stopped for its host's maintenance (the
	// value names the host); AnnotationRunStrategyBeforeStop keeps the run strategy to restore.
	AnnotationStoppedForHost        = "harvester.infrastructure.cluster.x-k8s.io/stopped-for-host"
	AnnotationRunStrategyBeforeStop = "harvester.infrastructure.cluster.x-k8s.io/run-strategy-before-stop"
	// AnnotationHarvesterRunStrategy is Harvester's record, on a VM, of its last run strategy
	// other than Halted, which Harvester keeps to restart a VM it halted (Harvester v1.8.0
	// util.AnnotationRunStrategy, written by its VM controller, read by its maintenance
	// controller).
	AnnotationHarvesterRunStrategy = "harvesterhci.io/vmRunStrategy"
)

// AnnotationMachine is an annotation that, on a VM and its VMI, holds the whole name of their HarvesterMachine, which
// LabelMachine cannot hold when it is longer than a label value.
const AnnotationMachine = "harvester.infrastructure.cluster.x-k8s.io/machine-name"

// Harvester annotations the provider writes or reads.
const (
	AnnotationVolumeClaimTemplates = "harvesterhci.io/volumeClaimTemplates"
	AnnotationRemovedPVCs          = "harvesterhci.io/removedPersistentVolumeClaims"
	AnnotationImageID              = "harvesterhci.io/imageId"
	AnnotationReservedMemory       = "harvesterhci.io/reservedMemory"
	AnnotationSSHNames             = "harvesterhci.io/sshNames"
	AnnotationDiskNames            = "harvesterhci.io/diskNames"
)

// Guest names one guest cluster on Harvester: its CAPI cluster (namespace and name in the
// management cluster) and the owner mark its HarvesterCluster recorded when it was first
// reconciled (infrav1.OwnerMarkAnnotation). The mark tells apart clusters of the same namespace
// and name in two management clusters that share a Harvester namespace: every name and label
// the provider writes on Harvester for the cluster includes it. Clusters first reconciled
// before marks existed have the empty mark, and keep the names they had then.
type Guest struct {
	Namespace, Name string
	Mark            string
}

// GuestOf returns the guest cluster a HarvesterCluster stands for, given its CAPI cluster's
// name. ok is false while its owner mark is not known: a HarvesterCluster without the
// annotation and without the provider's finalizer has nothing on Harvester yet, and the
// cluster reconciler records a mark before it makes anything. One without the annotation that
// carries the finalizer was made by a version before marks, and has the empty mark.
func GuestOf(hc *infrav1.HarvesterCluster, clusterName string) (g Guest, ok bool) {
	g = Guest{Namespace: hc.Namespace, Name: clusterName}
	if mark, found := hc.Annotations[infrav1.OwnerMarkAnnotation]; found {
		g.Mark = mark
		return g, true
	}
	return g, slices.Contains(hc.Finalizers, infrav1.ClusterFinalizer)
}

// NewOwnerMark is the owner mark of a HarvesterCluster first reconciled with this UID: 16 hex
// characters of its hash, unique to the object and so to its management cluster. It is kept
// in an annotation, which clusterctl move carries while the UID changes.
func NewOwnerMark(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:])[:OwnerMarkLength]
}

// OwnerMarkLength is the length of the marks NewOwnerMark makes; LegacyOwnerMarkLength that of
// the marks earlier versions made, which clusters marked then keep.
const (
	OwnerMarkLength       = 16
	LegacyOwnerMarkLength = 10
)

// idHashLength is how many hex characters of a hash shorten the ID of a cluster whose name is
// too long for it, with a mark of OwnerMarkLength: 96 bits, so that no one can search for a name
// and mark whose ID is another cluster's. Clusters with the empty or a legacy mark keep the
// 10 characters (40 bits) their IDs were made with.
const idHashLength = 24

// ID is the value of LabelCluster for the guest cluster, and its cloud provider's
// --cluster-name: `<namespace>.<name>-<mark>` (`<namespace>.<name>` for the empty mark),
// shortened with a hash when it does not fit a label value, so that it stays unique.
func (g Guest) ID() string {
	base := g.Namespace + "." + g.Name
	switch {
	case g.Mark == "":
		return BoundedName(base, 63)
	case len(base) <= 63-len(g.Mark)-1:
		return base + "-" + g.Mark
	case len(g.Mark) == LegacyOwnerMarkLength:
		// The mark alone would not tell apart two long names of one management cluster.
		return hashedName(base+"/"+g.Mark, base, 63)
	default:
		return hashedNameOf(base+"/"+g.Mark, base, 63, idHashLength)
	}
}

// Labels are the labels every object of the guest cluster carries.
func (g Guest) Labels() map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelCluster:   g.ID(),
	}
}

// Owns tells whether an object on Harvester carries the guest cluster's labels.
func (g Guest) Owns(obj metav1.Object) bool {
	l := obj.GetLabels()
	return l[LabelManagedBy] == ManagedByValue && l[LabelCluster] == g.ID()
}

// hashKey is what the hashes in the guest's object names cover.
func (g Guest) hashKey() string {
	if g.Mark == "" {
		return g.Namespace + "/" + g.Name
	}
	return g.Namespace + "/" + g.Name + "/" + g.Mark
}

// BoundedName returns s if it has at most limit characters, else a prefix of s and 10 hex
// characters of its hash, limit characters in all, ending with an alphanumeric character.
func BoundedName(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return hashedName(s, s, limit)
}

// hashedName is a prefix of base, "-" and 10 hex characters of the hash of key, at most limit
// characters (just the hash when no prefix is left). The hash covers all of key, so that names
// that share a long prefix stay distinct.
func hashedName(key, base string, limit int) string { return hashedNameOf(key, base, limit, 10) }

// hashedNameOf is hashedName with n hex characters of the hash.
func hashedNameOf(key, base string, limit, n int) string {
	sum := sha256.Sum256([]byte(key))
	suffix := hex.EncodeToString(sum[:])[:n]
	if len(base) > limit-len(suffix)-1 {
		base = base[:limit-len(suffix)-1]
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

// ServiceAccountName is the ServiceAccount of the guest cluster's cloud provider and CSI driver
// on Harvester, unique per guest cluster (see LoadBalancerName).
func (g Guest) ServiceAccountName() string {
	return hashedLabelName("guest", g.Name, g.hashKey())
}

// LoadBalancerName is the guest cluster's control-plane load balancer: a DNS label (Harvester
// makes a Service of the same name) that starts with a letter and ends with a hash of the
// cluster's namespace, name and owner mark, so that clusters of the same name in different
// namespaces or management clusters never collide.
func (g Guest) LoadBalancerName() string { return hashedLabelName("cp", g.Name, g.hashKey()) }

// hashedLabelName is `<prefix>-<name, made a DNS label, at most 40 characters>-<10 hex of
// sha256(key)>`: readable, at most 57 characters, and unique per key.
func hashedLabelName(prefix, name, key string) string {
	sum := sha256.Sum256([]byte(key))
	base := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	return fmt.Sprintf("%s-%s-%s", prefix, base, hex.EncodeToString(sum[:])[:10])
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// CSIBindingName is the ClusterRoleBinding of a guest's CSI driver to CSIClusterRole:
// cluster-scoped, so it names the target namespace and ServiceAccount (through a hash) and never
// collides.
func CSIBindingName(targetNamespace, serviceAccount string) string {
	sum := sha256.Sum256([]byte(targetNamespace + "/" + serviceAccount))
	return "capi-harvester-csi-reads-" + hex.EncodeToString(sum[:])[:16]
}

// CloudInitSecretName is the Secret on Harvester that holds a machine's cloud-init data.
func CloudInitSecretName(machine string) string { return BoundedName(machine+"-cloudinit", 253) }
