package harvester

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// The load balancer controller's annotations and values (harvester-load-balancer
// pkg/utils/const.go).
const (
	AnnotationLBNetwork   = "loadbalancer.harvesterhci.io/network"
	AnnotationLBProject   = "loadbalancer.harvesterhci.io/project"
	AnnotationLBNamespace = "loadbalancer.harvesterhci.io/namespace"
	AnnotationLBCluster   = "loadbalancer.harvesterhci.io/cluster"

	// AddressAskDHCP is the address of a dhcp load balancer that has no lease yet.
	AddressAskDHCP = "0.0.0.0"

	// APIServerPort is the guest API server's port behind the control-plane load balancer.
	APIServerPort = 6443
)

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// LoadBalancerName is the control-plane load balancer of the CAPI cluster namespace/name: a
// DNS label (Harvester makes a Service of the same name) that starts with a letter and ends
// with a hash of namespace/name, so that clusters of the same name in different namespaces
// never collide.
func LoadBalancerName(namespace, name string) string { return hashedLabelName("cp", namespace, name) }

// hashedLabelName is `<prefix>-<name, made a DNS label, at most 40 characters>-<10 hex of
// sha256(namespace/name)>`: readable, at most 57 characters, and unique per namespace/name.
func hashedLabelName(prefix, namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	base := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	return fmt.Sprintf("%s-%s-%s", prefix, base, hex.EncodeToString(sum[:])[:10])
}

// BuildControlPlaneLoadBalancer returns the Harvester load balancer in front of a cluster's
// control-plane VMs: listener 6443, TCP health check, backends selected by the labels the
// control-plane VMIs carry.
func BuildControlPlaneLoadBalancer(hc *infrav1.HarvesterCluster, clusterName string) *lbv1.LoadBalancer {
	id := ClusterID(hc.Namespace, clusterName)
	labels := ManagedLabels(hc.Namespace, clusterName)
	lb := &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   hc.Spec.TargetNamespace,
			Name:        LoadBalancerName(hc.Namespace, clusterName),
			Labels:      labels,
			Annotations: map[string]string{},
		},
		Spec: lbv1.LoadBalancerSpec{
			Description:  fmt.Sprintf("control plane of Cluster API cluster %s/%s", hc.Namespace, clusterName),
			WorkloadType: lbv1.VM,
			IPAM:         lbv1.Pool,
			IPPool:       hc.Spec.LoadBalancer.IPPoolName,
			Listeners: []lbv1.Listener{{
				Name: "apiserver", Port: APIServerPort, Protocol: corev1.ProtocolTCP, BackendPort: APIServerPort,
			}},
			BackendServerSelector: map[string][]string{
				LabelCluster: {id},
				LabelRole:    {RoleControlPlane},
			},
			HealthCheck: &lbv1.HealthCheck{Port: APIServerPort, SuccessThreshold: 1, FailureThreshold: 3, PeriodSeconds: 5, TimeoutSeconds: 3},
		},
	}
	if hc.Spec.LoadBalancer.IPAM == infrav1.IPAMDHCP {
		lb.Spec.IPAM = lbv1.DHCP
	}
	if hc.Spec.LoadBalancer.Network != "" {
		lb.Annotations[AnnotationLBNetwork] = hc.Spec.LoadBalancer.Network
	}
	return lb
}

// LoadBalancerAddress returns the address a vm-type load balancer serves on, or "".
func LoadBalancerAddress(lb *lbv1.LoadBalancer) string {
	if lb.Status.Address != "" && lb.Status.Address != AddressAskDHCP {
		return lb.Status.Address
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
