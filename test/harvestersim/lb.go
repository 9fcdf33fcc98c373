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
