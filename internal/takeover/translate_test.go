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
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// A cluster as CAPHV v0.10's RKE2 DHCP template makes it, provisioned.
func caphvCluster() *Cluster {
	return &Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prod", UID: "6f1c9a52-1d7e-4d7a-9d0e-1f3b2c4d5e6f",
			Labels: map[string]string{clusterv1.ClusterNameLabel: "prod"}},
		Spec: ClusterSpec{
			Server:          "https://harvester.example:6443",
			IdentitySecret:  NamespacedName{Namespace: "default", Name: "hv-identity-secret"},
			TargetNamespace: "guests",
			LoadBalancerConfig: LoadBalancerConfig{IPAMType: "dhcp",
				Listeners: []Listener{{Name: "rke2-server", Port: 9345, Protocol: "TCP", BackendPort: 9345}}},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.7", Port: 6443},
		},
		Status: ClusterStatus{Ready: true},
	}
}

// A machine of CAPHV's templates: an image disk, a data disk, two networks (one unqualified),
// its key pair, affinity, UEFI with Secure Boot and a persistent TPM.
func caphvMachineSpec() *MachineSpec {
	return &MachineSpec{
		ProviderID: "harvester://0b7e0c4e-1111-4222-8333-444455556666",
		CPU:        4, Memory: "8Gi", SSHUser: "sles", SSHKeyPair: "default/ops",
		Volumes: []Volume{
			{VolumeType: "image", ImageName: "default/sles15-sp6", VolumeSize: ptr.To(resource.MustParse("40Gi")), BootOrder: 1},
			{VolumeType: "storageClass", StorageClass: "longhorn", VolumeSize: ptr.To(resource.MustParse("100Gi"))},
		},
		Networks: []string{"default/vlan10", "vlan20"},
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}}}}},
		Firmware: &MachineFirmware{EFI: true, SecureBoot: true},
		TPM:      &MachineTPM{Enabled: true, Persistent: true},
	}
}

// CAPHV's cluster becomes one this provider's webhooks accept, with CAPHV's load balancer
// recorded and the same owner mark every time (a take-over run again writes the same object).
func TestACAPHVClusterTranslates(t *testing.T) {
	g := NewWithT(t)
	out, refused := TranslateCluster(caphvCluster())
	g.Expect(refused).To(BeEmpty())
	g.Expect(out.Namespace + "/" + out.Name).To(Equal("default/prod"))
	g.Expect(out.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "prod"))
	g.Expect(out.Annotations).To(HaveKeyWithValue(infrav1.LoadBalancerAnnotation, "default-prod-lb"))
	again, _ := TranslateCluster(caphvCluster())
	g.Expect(again.Annotations[infrav1.OwnerMarkAnnotation]).To(Equal(out.Annotations[infrav1.OwnerMarkAnnotation]))
	g.Expect(out.Spec.IdentitySecret.Name).To(Equal("hv-identity-secret"))
	g.Expect(out.Spec.TargetNamespace).To(Equal("guests"))
	g.Expect(out.Spec.ControlPlaneEndpoint).To(Equal(clusterv1.APIEndpoint{Host: "10.0.0.7", Port: 6443}))
	g.Expect(out.Spec.LoadBalancer.IPAM).To(Equal(infrav1.IPAMDHCP))
	g.Expect(*out.Spec.Addons.CloudProvider || *out.Spec.Addons.CSI).To(BeFalse(), "the guest keeps CAPHV's cloud provider and CSI driver")

	w := &infrav1.HarvesterClusterWebhook{}
	g.Expect(w.Default(context.Background(), out)).To(Succeed())
	_, err := w.ValidateCreate(context.Background(), out)
	g.Expect(err).NotTo(HaveOccurred())

	pool := caphvCluster()
	pool.Spec.LoadBalancerConfig = LoadBalancerConfig{IPAMType: "pool", IPPoolRef: "shared"}
	out, refused = TranslateCluster(pool)
	g.Expect(refused).To(BeEmpty())
	g.Expect(out.Spec.LoadBalancer).To(Equal(infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMPool, IPPoolName: "shared"}))
}

// What this provider cannot take over is refused, each with the field and what to do.
func TestWhatCannotBeTakenOverIsRefused(t *testing.T) {
	for name, change := range map[string]func(c *Cluster){
		"spec.identitySecret.namespace": func(c *Cluster) { c.Spec.IdentitySecret.Namespace = "shared" },
		"spec.vmNetworkConfig": func(c *Cluster) {
			c.Spec.VMNetworkConfig = &VMNetworkConfig{IPPoolRef: "vms", Gateway: "10.0.0.1", SubnetMask: "255.255.255.0"}
		},
		"spec.loadBalancerConfig.ipPool": func(c *Cluster) {
			c.Spec.LoadBalancerConfig = LoadBalancerConfig{IPAMType: "pool", IPPool: IPPool{VMNetwork: "default/vlan10", Subnet: "10.0.0.0/24", Gateway: "10.0.0.1"}}
		},
		"spec.loadBalancerConfig.listeners[1]": func(c *Cluster) {
			c.Spec.LoadBalancerConfig.Listeners = append(c.Spec.LoadBalancerConfig.Listeners, Listener{Name: "ingress", Port: 443, Protocol: "TCP", BackendPort: 443})
		},
		"status.ready": func(c *Cluster) { c.Status.Ready = false },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := caphvCluster()
			change(c)
			out, refused := TranslateCluster(c)
			g.Expect(out).To(BeNil())
			g.Expect(refused).To(HaveLen(1))
			g.Expect(refused[0].Field).To(Equal(name))
			g.Expect(refused[0].Object).To(Equal("HarvesterCluster default/prod"))
			g.Expect(refused[0].Fix).NotTo(BeEmpty())
		})
	}
	g := NewWithT(t)
	long := caphvCluster()
	long.Name = strings.Repeat("x", 54) // "default-" and 54 characters, then the cut falls on "-lb"'s dash
	_, refused := TranslateCluster(long)
	g.Expect(refused).To(ContainElement(HaveField("Reason", ContainSubstring("not a DNS-1035 label"))), "CAPHV's name, cut to 63 characters, ends with '-'")
}

// CAPHV names as its name helper does.
func TestCAPHVsLoadBalancerName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(LoadBalancerName("default", "prod")).To(Equal("default-prod-lb"))
	g.Expect(LoadBalancerName("1-team", "Prod_EU.1")).To(Equal("a-1-team-prod-eu-1-lb"))
	g.Expect(LoadBalancerName("team-a", strings.Repeat("p", 70))).To(HaveLen(63))
}

// A machine's spec keeps its VM's shape: the disks and NICs under the VM's names (so the
// provider finds the volumes and reads the addresses), one socket of cpu cores as CAPHV made it,
// and passes this provider's webhook.
func TestACAPHVMachineTranslates(t *testing.T) {
	g := NewWithT(t)
	spec, refused := TranslateMachineSpec("HarvesterMachine default/prod-cp-x2kqz", "guests", caphvMachineSpec(),
		&MachineVM{Disks: []string{"disk-0", "disk-1"}, NICs: []string{"nic-1", "nic-2"}})
	g.Expect(refused).To(BeEmpty())
	g.Expect(spec.ProviderID).To(Equal("harvester://0b7e0c4e-1111-4222-8333-444455556666"))
	g.Expect(spec.CPU).To(Equal(int32(4)))
	g.Expect(spec.MaxCPU).To(BeZero(), "no hot-plug: the provider never resizes the VM it took over")
	g.Expect(spec.MaxMemory).To(BeNil())
	g.Expect(spec.CPUTopology().Sockets).To(Equal(uint32(1)))
	g.Expect(spec.Disks).To(HaveLen(2))
	g.Expect(spec.Disks[0]).To(Equal(infrav1.Disk{Name: "disk-0", Image: "default/sles15-sp6", Size: resource.MustParse("40Gi"), Bus: infrav1.DiskBusVirtio, BootOrder: ptr.To[int32](1)}))
	g.Expect(spec.Disks[1].StorageClassName).To(Equal("longhorn"))
	g.Expect(spec.Networks).To(Equal([]infrav1.Network{{Name: "nic-1", NetworkName: "default/vlan10"}, {Name: "nic-2", NetworkName: "guests/vlan20"}}))
	g.Expect(spec.SSHKeyPairs).To(Equal([]string{"default/ops"}))
	g.Expect(spec.Affinity.NodeAffinity).To(Equal(caphvMachineSpec().NodeAffinity))
	g.Expect(spec.Firmware).To(Equal(infrav1.Firmware{BootMode: infrav1.BootModeEFI, SecureBoot: true, TPM: true, PersistentTPM: true}))
	g.Expect(spec.RunStrategy).To(Equal(infrav1.RunStrategyAlways))

	m := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prod-cp-x2kqz"}, Spec: *spec}
	w := &infrav1.HarvesterMachineWebhook{}
	g.Expect(w.Default(context.Background(), m)).To(Succeed())
	_, err := w.ValidateCreate(context.Background(), m)
	g.Expect(err).NotTo(HaveOccurred())

	// A template's machines are yet to be made: named as this provider names them.
	tmpl, refused := TranslateMachineSpec("HarvesterMachineTemplate default/prod-cp", "guests", caphvMachineSpec(), nil)
	g.Expect(refused).To(BeEmpty())
	g.Expect(tmpl.Disks[1].Name).To(Equal("disk-1"))
	g.Expect(tmpl.Networks[0].Name).To(Equal("nic-1"))
}

func TestMachinesThatCannotBeTakenOverAreRefused(t *testing.T) {
	vm := &MachineVM{Disks: []string{"disk-0", "disk-1"}, NICs: []string{"nic-1", "nic-2"}}
	for field, change := range map[string]func(s *MachineSpec, vm *MachineVM){
		"spec.networkConfig": func(s *MachineSpec, _ *MachineVM) {
			s.NetworkConfig = &map[string]any{"address": "10.0.0.21/24", "gateway": "10.0.0.1"}
		},
		"spec.volumes":               func(_ *MachineSpec, vm *MachineVM) { vm.Disks = vm.Disks[:1] },
		"spec.networks":              func(_ *MachineSpec, vm *MachineVM) { vm.NICs = append(vm.NICs, "nic-3") },
		"spec.volumes[1].volumeSize": func(s *MachineSpec, _ *MachineVM) { s.Volumes[1].VolumeSize = nil },
		"spec.memory":                func(s *MachineSpec, _ *MachineVM) { s.Memory = "eight gigs" },
	} {
		t.Run(field, func(t *testing.T) {
			g := NewWithT(t)
			s, v := caphvMachineSpec(), &MachineVM{Disks: append([]string(nil), vm.Disks...), NICs: append([]string(nil), vm.NICs...)}
			change(s, v)
			out, refused := TranslateMachineSpec("HarvesterMachine default/m", "guests", s, v)
			g.Expect(out).To(BeNil())
			g.Expect(refused).To(ContainElement(HaveField("Field", field)))
		})
	}
}
