// Package build builds what a machine's VM is made of: the KubeVirt VirtualMachine in
// Harvester's conventions, the cloud-init user data (the bootstrap data merged with what every
// node needs and the user's own), the network data for static addresses, and the machine's
// capacity.
package build
