// Package harvester holds the services the management-side controllers call to make, read and
// delete what a HarvesterCluster and its machines own on Harvester: VMService (vms.go),
// LoadBalancerService (loadbalancer.go), GuestIdentityService (credentials.go),
// GuestVolumeService, and the cluster checks (cluster.go). They use three packages below them:
// naming (the names and labels of those objects), transport (connections to Harvester: the
// client factory, the request guard, request metrics, the kubeconfig policy and the Error every
// failure is) and build (the VM, cloud-init and network-data builders). What the guest's cloud
// controller manager shares with the provider is in pkg/guestcloud.
package harvester
