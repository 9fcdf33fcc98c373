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

package guestcloud

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"maps"
	"regexp"
	"strings"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The vocabulary of the Harvester cloud provider for guest Services of type LoadBalancer. It is
// the upstream harvester-cloud-provider's, so that Services written for it work unchanged.
const (
	cloudProviderPrefix = "cloudprovider.harvesterhci.io/"

	// AnnotationServiceIPAM is `pool` (the default) or `dhcp`; it cannot change once the load
	// balancer exists.
	AnnotationServiceIPAM = cloudProviderPrefix + "ipam"
	// AnnotationServiceNetwork is copied to the load balancer, where Harvester's IP pool
	// selection reads it.
	AnnotationServiceNetwork = cloudProviderPrefix + "network"
	// AnnotationServiceProject and AnnotationServiceNamespace are the upstream cloud provider's
	// and are not copied: they would let a guest user ask Harvester's pool selection for
	// another namespace's or project's pool. The load balancer's own namespace (and the Rancher
	// project Harvester's webhook finds for it) is what selects a pool.
	AnnotationServiceProject   = cloudProviderPrefix + "project"
	AnnotationServiceNamespace = cloudProviderPrefix + "namespace"
	// AnnotationServicePrimaryService (`namespace/name`) makes a Service share the address of
	// another one instead of having a load balancer of its own.
	AnnotationServicePrimaryService = cloudProviderPrefix + "primary-service"
	// AnnotationServiceShareWithNamespaces, on a primary Service, lists (comma-separated) the
	// other namespaces whose Services may share its address; Services of its own namespace may
	// always. Ours: the upstream cloud provider has no such consent.
	AnnotationServiceShareWithNamespaces = cloudProviderPrefix + "share-with-namespaces"
	// LabelServicePrimaryService is the label the cloud provider puts on a Service that shares
	// another's address (a secondary Service), valued PrimaryServiceLabelValue of the primary, so
	// that the Services sharing one address can be selected; a primary Service has none. The
	// upstream cloud provider sets it the same way (same key as the annotation).
	LabelServicePrimaryService = cloudProviderPrefix + "primary-service"
	// AnnotationServiceHealthCheckPrefix starts the health-check annotations of the cloud
	// provider before v0.2.0; Harvester ignores health checks of guest-cluster load balancers.
	AnnotationServiceHealthCheckPrefix = cloudProviderPrefix + "healthcheck-"

	// AnnotationKubeVIPLoadBalancerIPs tells kube-vip in the guest which address to announce for
	// a Service; AddressAskDHCP asks it to lease one by DHCP.
	AnnotationKubeVIPLoadBalancerIPs = "kube-vip.io/loadbalancerIPs"

	// Labels of the load balancers of guest Services: the guest cluster (LabelValue of the
	// CCM's --cluster-name) and the Service.
	LabelLBCluster          = cloudProviderPrefix + "cluster"
	LabelLBServiceNamespace = cloudProviderPrefix + "serviceNamespace"
	LabelLBServiceName      = cloudProviderPrefix + "serviceName"

	// serviceLBBaseLength is how much of `<cluster>-<namespace>-<name>-` a name keeps before its
	// 8 hex digits of checksum, as upstream: at most 63 characters in all.
	serviceLBBaseLength = 55
)

var (
	notDNSLabelChars  = regexp.MustCompile(`[^a-z0-9-]+`)
	notLabelValueChar = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// ServiceLoadBalancerName is the name of the Harvester load balancer of a guest Service, as the
// upstream cloud provider names it: `<cluster>-<namespace>-<name>-` cut to 55 characters, then
// 8 hex digits of the CRC-32 of that whole base and the Service's UID (so a re-created Service
// gets a new load balancer).
//
// A cluster name made of lower-case letters, digits and `-` only is treated exactly as upstream
// treats it: when it is not a DNS-1035 label (it starts with a digit, ends with `-` or is longer
// than 63 characters) it gets an `a` in front. So a guest that ran the upstream cloud provider
// finds its load balancers under the same names. Upstream cannot create load balancers for other
// cluster names (Harvester refuses names that are not DNS-1035 labels), so for those this
// provider is free to choose: characters a DNS label cannot hold (the `.` of our cluster IDs
// `<namespace>.<name>`, upper case, `_`) become `-`, and an `a` goes in front when the result
// does not start with a letter. This is how names have been made since the first version, so no
// existing load balancer of ours is renamed.
func ServiceLoadBalancerName(cluster, namespace, name string, uid types.UID) string {
	var base string
	// Upstream's naming for Services as the apiserver admits them (their namespace and name are
	// DNS labels); anything else gets the sanitised form below, so the result is always a label.
	if upstreamClusterName(cluster) && !notDNSLabelChars.MatchString(namespace+name) {
		if len(validation.IsDNS1035Label(cluster)) > 0 {
			cluster = "a" + cluster
		}
		base = cluster + "-" + namespace + "-" + name + "-"
	} else {
		base = notDNSLabelChars.ReplaceAllString(strings.ToLower(cluster+"-"+namespace+"-"+name+"-"), "-")
		if base[0] < 'a' || base[0] > 'z' {
			base = "a" + base
		}
	}
	sum := crc32.ChecksumIEEE([]byte(base + string(uid)))
	if len(base) > serviceLBBaseLength {
		base = base[:serviceLBBaseLength]
	}
	return fmt.Sprintf("%s%08x", base, sum)
}

// upstreamClusterName reports whether a cluster name is one the upstream cloud provider can name
// load balancers after: not empty, only lower-case letters, digits and `-`.
func upstreamClusterName(cluster string) bool {
	return cluster != "" && !notDNSLabelChars.MatchString(cluster)
}

// PrimaryServiceLabelValue is the value of LabelServicePrimaryService on the Services that share
// the address of the primary Service namespace/name: `<namespace>.<name>`, as upstream writes it
// (LabelValue of it when that is too long for a label).
func PrimaryServiceLabelValue(namespace, name string) string {
	return LabelValue(namespace + "." + name)
}

// LabelValue returns s when it is a valid label value, else a valid one made of its valid
// characters and a hash of s, at most 63 characters.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:])[:10]
	prefix := notLabelValueChar.ReplaceAllString(s, "-")
	if len(prefix) > validation.LabelValueMaxLength-len(suffix)-1 {
		prefix = prefix[:validation.LabelValueMaxLength-len(suffix)-1]
	}
	if prefix = strings.Trim(prefix, "-_."); prefix == "" {
		return suffix
	}
	return prefix + "-" + suffix
}

// ServiceIPAM reads a Service's AnnotationServiceIPAM: pool when absent.
func ServiceIPAM(svc *corev1.Service) (lbv1.IPAM, error) {
	switch v := svc.Annotations[AnnotationServiceIPAM]; v {
	case "", string(lbv1.Pool):
		return lbv1.Pool, nil
	case string(lbv1.DHCP):
		return lbv1.DHCP, nil
	default:
		return "", fmt.Errorf("annotation %s of Service %s/%s is %q: it must be %q or %q",
			AnnotationServiceIPAM, svc.Namespace, svc.Name, v, lbv1.Pool, lbv1.DHCP)
	}
}

// LoadBalancerIPAM is a load balancer's IPAM mode; Harvester takes an empty one as pool.
func LoadBalancerIPAM(lb *lbv1.LoadBalancer) lbv1.IPAM {
	if lb.Spec.IPAM == lbv1.DHCP {
		return lbv1.DHCP
	}
	return lbv1.Pool
}

// BuildServiceLoadBalancer returns the Harvester load balancer (in namespace) of a guest Service
// of the cluster named cluster: workloadType cluster, so Harvester only allocates its address and
// kube-vip in the guest serves it; listeners from the Service's ports (backend = node port) for
// the record; backends selected by Harvester's guest-cluster label, which our VMs carry; no
// health check, which Harvester applies to vm-type load balancers only.
func BuildServiceLoadBalancer(namespace, cluster string, svc *corev1.Service, ipam lbv1.IPAM) *lbv1.LoadBalancer {
	lb := &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      ServiceLoadBalancerName(cluster, svc.Namespace, svc.Name, svc.UID),
			Labels: map[string]string{
				LabelLBCluster:          LabelValue(cluster),
				LabelLBServiceNamespace: svc.Namespace,
				LabelLBServiceName:      svc.Name,
			},
			Annotations: map[string]string{AnnotationLBCluster: cluster},
			Finalizers:  []string{FinalizerHarvesterLBController},
		},
		Spec: lbv1.LoadBalancerSpec{
			Description:           fmt.Sprintf("Service %s/%s of guest cluster %s", svc.Namespace, svc.Name, cluster),
			WorkloadType:          lbv1.Cluster,
			IPAM:                  ipam,
			BackendServerSelector: map[string][]string{LabelHarvesterGuestCluster: {LabelValue(cluster)}},
		},
	}
	for _, p := range svc.Spec.Ports {
		lb.Spec.Listeners = append(lb.Spec.Listeners, lbv1.Listener{
			Name: p.Name, Port: p.Port, Protocol: p.Protocol, BackendPort: p.NodePort,
		})
	}
	// Only the network, and only when the Service sets it: Harvester's webhook fills in the
	// namespace and project from the load balancer's own namespace, and it would be a fight to
	// clear them. The Service's project and namespace annotations are not copied (see their
	// constants).
	if v := svc.Annotations[AnnotationServiceNetwork]; v != "" {
		lb.Annotations[AnnotationLBNetwork] = v
	}
	return lb
}

// UpdateServiceLoadBalancer brings an existing load balancer to what desired (from
// BuildServiceLoadBalancer) asks, leaving what others set (status, other labels and
// annotations, an IP pool, the IPAM, which cannot change); it reports whether anything changed.
func UpdateServiceLoadBalancer(existing, desired *lbv1.LoadBalancer) bool {
	before := existing.DeepCopy()
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	maps.Copy(existing.Labels, desired.Labels)
	if existing.Annotations == nil {
		existing.Annotations = map[string]string{}
	}
	maps.Copy(existing.Annotations, desired.Annotations)
	existing.Spec.Description = desired.Spec.Description
	existing.Spec.WorkloadType = desired.Spec.WorkloadType
	existing.Spec.Listeners = desired.Spec.Listeners
	existing.Spec.BackendServerSelector = desired.Spec.BackendServerSelector
	return !equality.Semantic.DeepEqual(before.ObjectMeta, existing.ObjectMeta) ||
		!equality.Semantic.DeepEqual(before.Spec, existing.Spec)
}

// ServiceLoadBalancerAddress is the address kube-vip must announce for the Service of a load
// balancer: the pool address once Harvester allocated it, AddressAskDHCP for dhcp (kube-vip
// leases the address itself), "" while there is none.
func ServiceLoadBalancerAddress(lb *lbv1.LoadBalancer) string {
	if LoadBalancerIPAM(lb) == lbv1.DHCP {
		return AddressAskDHCP
	}
	for _, a := range []string{lb.Status.AllocatedAddress.IP, lb.Status.Address} {
		if a != "" && a != AddressAskDHCP {
			return a
		}
	}
	return ""
}

// LoadBalancerProblem returns the message of a load balancer's Ready condition when it is not
// ready, or "".
func LoadBalancerProblem(lb *lbv1.LoadBalancer) string {
	for _, c := range lb.Status.Conditions {
		if c.Type == lbv1.LoadBalancerReady && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// FinalizerHarvesterLBController is the finalizer Harvester's load balancer controller puts on
// every load balancer; its handler releases the load balancer's pool address. The provider and
// the CCM create their load balancers with it already set: harvester-load-balancer v1.5.0 adds
// it with a write of its own after its first pass, and when that pass failed (a conflict booking
// the address in the pool) its retry can read the load balancer from before that write, lose the
// write of the address it has just booked, and then refuse its own booking for good
// ("duplicate allocation is not allowed"; seen in the test bed, which runs that controller). With
// the finalizer there from the start, nothing but the controller's own status write changes the
// new load balancer, and its address is guarded from the moment it is booked. Harvester's
// controller removes it when it has released the address.
const FinalizerHarvesterLBController = "wrangler.cattle.io/harvester-lb-controller"

// PoolAddressUnguarded reports whether a load balancer holds an address of an IP pool that
// Harvester's controller has not yet put its finalizer on. Deleting it then leaves the address
// allocated in the pool for good: harvester-load-balancer v1.5.0 allocates the address (and
// records it in status) before it adds its finalizer, and releases it only in that finalizer's
// handler. Whoever deletes a load balancer waits until this is false (for load balancers made
// without the finalizer: by an earlier release, or by the upstream cloud provider).
func PoolAddressUnguarded(lb *lbv1.LoadBalancer) bool {
	if lb.Status.AllocatedAddress.IPPool == "" {
		return false
	}
	for _, f := range lb.Finalizers {
		if f == FinalizerHarvesterLBController {
			return false
		}
	}
	return true
}

// SharingAllowed tells whether a Service of namespace may share primary's address: one of the
// primary's namespace may, another only when the primary lists it in
// AnnotationServiceShareWithNamespaces (the primary's owner consents).
func SharingAllowed(primary *corev1.Service, namespace string) bool {
	if primary.Namespace == namespace {
		return true
	}
	for _, ns := range strings.Split(primary.Annotations[AnnotationServiceShareWithNamespaces], ",") {
		if strings.TrimSpace(ns) == namespace {
			return true
		}
	}
	return false
}
