package harvestersim

// The load balancer's vocabulary (harvester-load-balancer pkg/utils/const.go and
// pkg/controller/loadbalancer/controller.go), for the tests. The load balancer itself is
// Harvester's own (harvesterlb.go).
const (
	AnnotationLBNetwork   = "loadbalancer.harvesterhci.io/network"
	AnnotationLBProject   = "loadbalancer.harvesterhci.io/project"
	AnnotationLBNamespace = "loadbalancer.harvesterhci.io/namespace"
	AnnotationLBCluster   = "loadbalancer.harvesterhci.io/cluster"

	// AddressAskDHCP is the allocated address of a dhcp load balancer whose address is leased
	// by someone else (kube-vip on the host for workloadType vm, in the guest for cluster).
	AddressAskDHCP = "0.0.0.0"
)
