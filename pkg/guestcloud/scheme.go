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

// Package guestcloud is what the provider and the in-guest cloud controller manager share about
// a guest on Harvester: the providerID, the scheme of Harvester's kinds, the vocabulary and
// building of the load balancers made for a guest's Services, and a node's addresses from its
// VM. It is a leaf: it imports no Cluster API and nothing of controller-runtime, so the guest's
// CCM links neither (TestTheCCMLinksNoClusterAPI in cloudprovider).
package guestcloud

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

// ProviderIDPrefix starts every providerID the provider and its cloud provider report:
// `harvester://<VM UID>`, the same form as the upstream Harvester cloud provider. The API has the
// same constant (api/v1alpha1.ProviderIDPrefix; a test keeps them equal).
const ProviderIDPrefix = "harvester://"

// The load balancer controller's annotations and values (harvester-load-balancer
// pkg/utils/const.go).
const (
	AnnotationLBNetwork   = "loadbalancer.harvesterhci.io/network"
	AnnotationLBProject   = "loadbalancer.harvesterhci.io/project"
	AnnotationLBNamespace = "loadbalancer.harvesterhci.io/namespace"
	AnnotationLBCluster   = "loadbalancer.harvesterhci.io/cluster"

	// AddressAskDHCP is the address of a dhcp load balancer that has no lease yet.
	AddressAskDHCP = "0.0.0.0"
)

// LabelHarvesterGuestCluster is Harvester's label of a guest cluster's VMs: with it Harvester's
// load balancer finds a guest cluster's network.
const LabelHarvesterGuestCluster = "guestcluster.harvesterhci.io/name"

// AnnotationManagementNetwork on a VMI names its management interface (the machine's
// `management` NIC) when that is not the first, which only VMs made by earlier versions of the
// provider have (it now puts the management NIC first): the guest's cloud provider still reads
// it, so such a node's InternalIP is the address the machine reports.
const AnnotationManagementNetwork = "harvester.infrastructure.cluster.x-k8s.io/management-network"
