// Package harvester holds everything that talks to a Harvester cluster, shared by the
// management-side controllers and the in-guest cloud provider.
package harvester

import (
	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// AddToScheme registers the Harvester kinds this project reads and writes: Kubernetes' own,
// KubeVirt's VirtualMachine(Instance), Harvester's images, keypairs and settings, and the
// load balancer's LoadBalancer and IPPool.
func AddToScheme(scheme *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		kubevirtv1.AddToScheme,
		harvesterv1.AddToScheme,
		lbv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	return nil
}

// NewScheme returns a scheme with every kind AddToScheme registers.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	return scheme, AddToScheme(scheme)
}
