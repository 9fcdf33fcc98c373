// Package harvester talks to a Harvester cluster for the management-side controllers: the
// connections (client factory, request guard, request metrics), the builders of a machine's VM,
// cloud-init and network data, and the services that make and delete what a HarvesterCluster
// and its machines own on Harvester. What the guest's cloud controller manager shares with it is
// in pkg/guestcloud.
package harvester
