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

// Package harvester holds the services the management-side controllers call to make, read and
// delete what a HarvesterCluster and its machines own on Harvester: VMService (vms.go),
// LoadBalancerService (loadbalancer.go), GuestIdentityService (credentials.go),
// GuestVolumeService, a machine's resize (ReconcileSize, resize.go) and the cluster checks
// (cluster.go). They use three packages below them:
// naming (the names and labels of those objects), transport (connections to Harvester: the
// client factory, the request guard, request metrics, the kubeconfig policy and the Error every
// failure is) and build (the VM, cloud-init and network-data builders). What the guest's cloud
// controller manager shares with the provider is in pkg/guestcloud.
package harvester
