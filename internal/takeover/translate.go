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

package takeover

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// Refusal is why an object cannot be taken over, and what the user can do.
type Refusal struct {
	// Object is `<Kind> <namespace>/<name>`; Field the field path, when one field is the cause.
	Object, Field string
	Reason, Fix   string
}

func (r Refusal) String() string {
	s := r.Object
	if r.Field != "" {
		s += " " + r.Field
	}
	return s + ": " + r.Reason + " (" + r.Fix + ")"
}

// refusals collects the refusals of one object.
type refusals struct {
	object string
	list   []Refusal
}

func (r *refusals) add(field, reason, fix string) {
	r.list = append(r.list, Refusal{Object: r.object, Field: field, Reason: reason, Fix: fix})
}

// rfc1035 tells whether a name is a DNS-1035 label, which every load balancer's name must be.
func rfc1035(name string) bool { return len(validation.IsDNS1035Label(name)) == 0 }

// TranslateCluster makes this provider's HarvesterCluster of CAPHV's, or says why it cannot.
// The result keeps the namespace, name, labels and endpoint; it records CAPHV's control-plane
// load balancer (infrav1.LoadBalancerAnnotation) and an owner mark derived from CAPHV's object's
// UID, so that a take-over run again writes the same one. The guest keeps the cloud provider and
// CSI driver CAPHV's templates installed, with the credential CAPHV made: this provider's addons
// are off (spec.addons cannot change once set).
func TranslateCluster(in *Cluster) (*infrav1.HarvesterCluster, []Refusal) {
	r := &refusals{object: "HarvesterCluster " + in.Namespace + "/" + in.Name}
	s := &in.Spec
	if s.IdentitySecret.Namespace != "" && s.IdentitySecret.Namespace != in.Namespace {
		r.add("spec.identitySecret.namespace", fmt.Sprintf("the identity Secret is in namespace %s; this provider reads it from the cluster's namespace %s only, so that a tenant cannot name another's credential", s.IdentitySecret.Namespace, in.Namespace),
			fmt.Sprintf("copy Secret %s/%s into namespace %s and point spec.identitySecret at the copy", s.IdentitySecret.Namespace, s.IdentitySecret.Name, in.Namespace))
	}
	if s.VMNetworkConfig != nil {
		r.add("spec.vmNetworkConfig", "the VMs' static addresses come from CAPHV's own allocator, which this provider does not have (it claims addresses through Cluster API IPAM)",
			"keep this cluster on CAPHV, or replace its machines with DHCP ones before the take-over")
	}
	if s.LoadBalancerConfig.IPPoolRef == "" && s.LoadBalancerConfig.IPPool.Subnet != "" || hasCondition(in.Status.Conditions, "CustomIPPoolCreated") {
		r.add("spec.loadBalancerConfig.ipPool", "CAPHV made the load balancer's IP pool and would delete it with the cluster; this provider makes no pools and would leave it",
			"keep this cluster on CAPHV")
	}
	for i, l := range s.LoadBalancerConfig.Listeners {
		if l.Port == 9345 && l.BackendPort == 9345 && strings.EqualFold(l.Protocol, "TCP") {
			continue // RKE2's supervisor port: this provider's load balancer of an RKE2 cluster has it
		}
		r.add(fmt.Sprintf("spec.loadBalancerConfig.listeners[%d]", i), fmt.Sprintf("listener %s (%d/%s) is not one this provider's load balancer has (6443, and 9345 for RKE2)", l.Name, l.Port, l.Protocol),
			"keep this cluster on CAPHV, or remove the listener from the spec before the take-over")
	}
	ipam := infrav1.IPAMPool
	switch s.LoadBalancerConfig.IPAMType {
	case "dhcp":
		ipam = infrav1.IPAMDHCP
	case "pool":
	default:
		r.add("spec.loadBalancerConfig.ipamType", fmt.Sprintf("%q is neither dhcp nor pool", s.LoadBalancerConfig.IPAMType), "correct it on CAPHV first")
	}
	if s.TargetNamespace == "" {
		r.add("spec.targetNamespace", "empty", "correct it on CAPHV first")
	}
	if s.ControlPlaneEndpoint.Host == "" || !in.Status.Ready {
		r.add("status.ready", "the cluster's control-plane endpoint is not provisioned yet", "let CAPHV finish provisioning it, or delete the cluster")
	}
	lb := LoadBalancerName(in.Namespace, in.Name)
	if !rfc1035(lb) {
		r.add("", fmt.Sprintf("CAPHV's load balancer name %q is not a DNS-1035 label", lb), "keep this cluster on CAPHV")
	}
	if len(r.list) > 0 {
		return nil, r.list
	}
	out := &infrav1.HarvesterCluster{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: in.Namespace, Name: in.Name, Labels: maps.Clone(in.Labels),
			Annotations: map[string]string{
				infrav1.OwnerMarkAnnotation:    naming.NewOwnerMark(in.UID),
				infrav1.LoadBalancerAnnotation: lb,
			},
		},
		Spec: infrav1.HarvesterClusterSpec{
			IdentitySecret:       infrav1.SecretReference{Name: s.IdentitySecret.Name},
			TargetNamespace:      s.TargetNamespace,
			ControlPlaneEndpoint: s.ControlPlaneEndpoint,
			LoadBalancer:         infrav1.LoadBalancerSpec{IPAM: ipam, IPPoolName: s.LoadBalancerConfig.IPPoolRef},
			Addons:               infrav1.AddonsSpec{CloudProvider: ptr.To(false), CSI: ptr.To(false)},
		},
	}
	return out, nil
}

// MachineVM is what a take-over knows of a machine's VM on Harvester: the names of its disks
// (its volumes backed by claims, in order) and of its NICs, which the translated spec must use
// so that the provider finds its volumes and reads its addresses.
type MachineVM struct {
	Disks, NICs []string
}

// TranslateMachineSpec makes this provider's HarvesterMachineSpec of CAPHV's, for a machine
// whose VM has the given disks and NICs (vm nil: a template's, whose machines are yet to be
// made, named as this provider names them). targetNamespace qualifies CAPHV's unqualified
// network names. object names the translated object in refusals.
func TranslateMachineSpec(object, targetNamespace string, in *MachineSpec, vm *MachineVM) (*infrav1.HarvesterMachineSpec, []Refusal) {
	r := &refusals{object: object}
	if in.NetworkConfig != nil || in.VMNetworkConfig != nil {
		r.add("spec.networkConfig", "the VM's static address comes from CAPHV's own allocator or is written into its network-data, which this provider does not take over",
			"keep this cluster on CAPHV, or replace the machine with a DHCP one first")
	}
	memory, err := resource.ParseQuantity(in.Memory)
	if err != nil {
		r.add("spec.memory", fmt.Sprintf("%q is not a quantity", in.Memory), "correct it on CAPHV first")
	}
	if vm != nil && len(vm.Disks) != len(in.Volumes) {
		r.add("spec.volumes", fmt.Sprintf("the spec has %d volumes, the VM %d disks", len(in.Volumes), len(vm.Disks)), "the VM was changed outside CAPHV; keep this cluster on CAPHV")
	}
	if vm != nil && len(vm.NICs) != len(in.Networks) {
		r.add("spec.networks", fmt.Sprintf("the spec has %d networks, the VM %d NICs", len(in.Networks), len(vm.NICs)), "the VM was changed outside CAPHV; keep this cluster on CAPHV")
	}
	out := &infrav1.HarvesterMachineSpec{
		ProviderID:  in.ProviderID,
		CPU:         in.CPU,
		Memory:      memory,
		RunStrategy: infrav1.RunStrategyAlways, // CAPHV's
		GuestAgent:  infrav1.GuestAgentInstall, // CAPHV installs and starts qemu-guest-agent
	}
	if in.SSHKeyPair != "" {
		out.SSHKeyPairs = []string{in.SSHKeyPair}
	}
	for i, v := range in.Volumes {
		path := fmt.Sprintf("spec.volumes[%d]", i)
		d := infrav1.Disk{Name: fmt.Sprintf("disk-%d", i), Bus: infrav1.DiskBusVirtio}
		if vm != nil && i < len(vm.Disks) {
			d.Name = vm.Disks[i]
		}
		switch v.VolumeType {
		case "image":
			d.Image = v.ImageName
		case "storageClass":
			d.StorageClassName = v.StorageClass
		default:
			r.add(path+".volumeType", fmt.Sprintf("%q is neither image nor storageClass", v.VolumeType), "correct it on CAPHV first")
		}
		if v.VolumeSize == nil {
			r.add(path+".volumeSize", "no size", "set the volume's size on CAPHV first")
		} else {
			d.Size = *v.VolumeSize
		}
		if v.BootOrder > 0 {
			d.BootOrder = ptr.To(int32(v.BootOrder)) //nolint:gosec // a boot order is small
		}
		out.Disks = append(out.Disks, d)
	}
	for i, n := range in.Networks {
		nic := infrav1.Network{Name: fmt.Sprintf("nic-%d", i+1), NetworkName: n} // CAPHV's names count from 1
		if vm != nil && i < len(vm.NICs) {
			nic.Name = vm.NICs[i]
		}
		if !strings.Contains(n, "/") {
			nic.NetworkName = targetNamespace + "/" + n // Multus reads a bare name in the VM's namespace
		}
		out.Networks = append(out.Networks, nic)
	}
	if in.NodeAffinity != nil || in.WorkloadAffinity != nil {
		out.Affinity = &corev1.Affinity{NodeAffinity: in.NodeAffinity, PodAffinity: in.WorkloadAffinity}
	}
	if f := in.Firmware; f != nil && f.EFI {
		out.Firmware.BootMode = infrav1.BootModeEFI
		out.Firmware.SecureBoot = f.SecureBoot
	}
	if t := in.TPM; t != nil && t.Enabled {
		out.Firmware.TPM, out.Firmware.PersistentTPM = true, t.Persistent
	}
	if len(r.list) > 0 {
		return nil, r.list
	}
	return out, nil
}

func hasCondition(conditions []metav1.Condition, t string) bool {
	for _, c := range conditions {
		if c.Type == t && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}
