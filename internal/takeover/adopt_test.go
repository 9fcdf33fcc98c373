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
	"testing"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// A control-plane machine's VM as CAPHV v0.10 makes it (names, labels, volumes; docs/decisions/
// 0009), running, with its volumes, cloud-init Secret and the cluster's load balancer.
func harvesterWithCAPHV(t *testing.T) client.Client {
	scheme, err := guestcloud.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	caphvLabels := map[string]string{"harvesterhci.io/creator": "harvester", "harvesterhci.io/vmName": "prod-cp-x2kqz",
		"harvesterhci.io/vmNamePrefix": "prod-cp-x2kqz", LabelMachineType: "controlplane-prod"}
	template := &kubevirtv1.VirtualMachineInstanceTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: caphvLabels, Annotations: map[string]string{LabelMachineType: "controlplane-prod"}},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Hostname: "prod-cp-x2kqz",
			Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
				Disks: []kubevirtv1.Disk{{Name: "disk-0"}, {Name: "disk-1"}, {Name: "cloudinitdisk"}},
				Interfaces: []kubevirtv1.Interface{
					{Name: "nic-1", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}},
					{Name: "nic-2", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}},
				}}},
			Volumes: []kubevirtv1.Volume{
				{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "prod-cp-x2kqz-disk-0-qwe4r"}}}},
				{Name: "disk-1", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "prod-cp-x2kqz-disk-1-abc1d"}}}},
				{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{
					UserDataSecretRef: &corev1.LocalObjectReference{Name: "prod-cp-x2kqz" + CloudInitSuffix}, NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "prod-cp-x2kqz" + CloudInitSuffix}}}},
			},
		},
	}
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "prod-cp-x2kqz", UID: "0b7e0c4e-1111-4222-8333-444455556666", Labels: caphvLabels},
		Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways), Template: template},
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "prod-cp-x2kqz", Labels: caphvLabels},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "host-1", Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "nic-1", IP: "10.0.0.21", IPs: []string{"10.0.0.21"}, InterfaceName: "eth0"},
			{Name: "nic-2", IP: "10.1.0.21", IPs: []string{"10.1.0.21"}, InterfaceName: "eth1"},
		}},
	}
	lb := &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: LoadBalancerName("default", "prod")},
		Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.VM, IPAM: lbv1.DHCP,
			Listeners:             []lbv1.Listener{{Name: "api-server", Port: 6443, Protocol: corev1.ProtocolTCP, BackendPort: 6443}},
			BackendServerSelector: map[string][]string{LabelMachineType: {"controlplane-prod"}}},
		Status: lbv1.LoadBalancerStatus{Address: "10.0.0.7"},
	}
	objs := []client.Object{vm, vmi, lb,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "prod-cp-x2kqz" + CloudInitSuffix}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "unrelated"}},
	}
	for _, claim := range []string{"prod-cp-x2kqz-disk-0-qwe4r", "prod-cp-x2kqz-disk-1-abc1d"} {
		objs = append(objs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: claim}})
	}
	// A tracker without managed fields: the fake client's structured-merge-diff cannot walk
	// KubeVirt's VMI (status.runtimeUser is a uint64).
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	return fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).WithObjects(objs...).WithStatusSubresource(vmi, lb).Build()
}

// After the take-over labels a machine's VM and its cluster's load balancer, the provider's
// own code reads them as its: the VM as the machine's, its volumes found for its disks, the
// running instance's addresses on the translated NICs, and the instance selected by the load
// balancer, with nothing of the VM's spec changed but its template's labels.
func TestAdoptedObjectsAreTheProvidersOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := harvesterWithCAPHV(t)
	guest := naming.Guest{Namespace: "default", Name: "prod", Mark: naming.NewOwnerMark("6f1c9a52-1d7e-4d7a-9d0e-1f3b2c4d5e6f")}
	m := &AdoptedMachine{Namespace: "default", Name: "prod-cp-x2kqz", ControlPlane: true, ProviderID: "harvester://0b7e0c4e-1111-4222-8333-444455556666",
		Labels: map[string]string{"cluster.x-k8s.io/control-plane-name": "prod-cp"}}

	vm, shape, err := ReadVM(ctx, h, "guests", m)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shape).To(Equal(&MachineVM{Disks: []string{"disk-0", "disk-1"}, NICs: []string{"nic-1", "nic-2"}}))
	before := vm.Spec.DeepCopy()
	for range 2 { // a second run changes nothing
		g.Expect(AdoptMachine(ctx, h, guest, vm, m)).To(Succeed())
		g.Expect(h.Get(ctx, client.ObjectKeyFromObject(vm), vm)).To(Succeed())
	}
	g.Expect(AdoptLoadBalancer(ctx, h, guest, "guests", "default-prod-lb")).To(Succeed())

	spec, refused := TranslateMachineSpec("HarvesterMachine default/prod-cp-x2kqz", "guests", caphvMachineSpec(), shape)
	g.Expect(refused).To(BeEmpty())
	hm := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prod-cp-x2kqz", UID: "new-uid"}, Spec: *spec}
	g.Expect(build.OwnedBy(vm.Labels, guest, hm)).To(BeTrue())
	g.Expect(build.OwnedBy(vm.Spec.Template.ObjectMeta.Labels, guest, hm)).To(BeTrue())
	ns, name, ok := naming.MachineOf(vm)
	g.Expect([]any{ns, name, ok}).To(Equal([]any{"default", "prod-cp-x2kqz", true}))
	g.Expect(vm.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/control-plane-name", "prod-cp"))
	g.Expect(vm.Labels).To(HaveKeyWithValue(LabelMachineType, "controlplane-prod"), "CAPHV's labels stay")
	after := vm.Spec.DeepCopy()
	after.Template.ObjectMeta = before.Template.ObjectMeta
	g.Expect(after).To(Equal(before), "only the template's labels and annotations change")

	for i := range spec.Disks {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: build.VolumeClaimOf(vm, hm, spec.DiskName(i))}, pvc)).To(Succeed())
		g.Expect(build.OwnedBy(pvc.Labels, guest, hm)).To(BeTrue(), pvc.Name)
	}
	secret := &corev1.Secret{}
	g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: "prod-cp-x2kqz-cloud-init"}, secret)).To(Succeed())
	g.Expect(build.OwnedBy(secret.Labels, guest, hm)).To(BeTrue())
	g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: "unrelated"}, secret)).To(Succeed())
	g.Expect(secret.Labels).To(BeEmpty())

	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(h.Get(ctx, client.ObjectKeyFromObject(vm), vmi)).To(Succeed())
	g.Expect(guest.Owns(vmi)).To(BeTrue(), "the connection's cache selects instances by these labels")
	addresses := guestcloud.MachineAddresses(vmi, build.NetworkNames(spec), vm.Name)
	g.Expect(addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.21"}))

	lb := &lbv1.LoadBalancer{}
	g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: "default-prod-lb"}, lb)).To(Succeed())
	g.Expect(guest.Owns(lb)).To(BeTrue())
	g.Expect(lb.Status.Address).To(Equal("10.0.0.7"))
	g.Expect(lb.Spec.Listeners).To(HaveLen(1))
	selector := labels.Everything()
	for k, values := range lb.Spec.BackendServerSelector {
		for _, v := range values {
			req, err := labels.NewRequirement(k, "=", []string{v})
			g.Expect(err).NotTo(HaveOccurred())
			selector = selector.Add(*req)
		}
	}
	g.Expect(selector.Matches(labels.Set(vmi.Labels))).To(BeTrue(), "the running control-plane instance stays a backend")
	g.Expect(selector.Matches(labels.Set(build.MachineLabels(&build.VMInput{Machine: hm, Guest: guest, Role: naming.RoleControlPlane})))).To(BeTrue(),
		"so do the control-plane VMs the provider makes")
}

// A VM made anew outside CAPHV (another UID than the machine's providerID) is not taken over.
func TestAVMThatIsNotTheMachinesIsRefused(t *testing.T) {
	g := NewWithT(t)
	m := &AdoptedMachine{Namespace: "default", Name: "prod-cp-x2kqz", ProviderID: "harvester://ffffffff-1111-4222-8333-444455556666"}
	_, _, err := ReadVM(context.Background(), harvesterWithCAPHV(t), "guests", m)
	g.Expect(err).To(MatchError(ContainSubstring("made anew outside CAPHV")))
}
