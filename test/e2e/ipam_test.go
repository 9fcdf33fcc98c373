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

package e2e

import (
	"net/netip"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// The in-cluster IPAM provider (v1.1.0, its own binary) allocates the addresses; the
// provider's manager (the shipped binary) claims them and writes the guests' network-data.
var _ = Describe("Static IPs through CAPI IPAM", Ordered, func() {
	var ipam *bed.IPAMProvider
	BeforeAll(func() {
		var err error
		ipam, err = testBed.StartIPAMProvider(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(ipam.Stop()).To(Succeed()) })
	})
	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			if log, err := ipam.Log(); err == nil {
				GinkgoWriter.Printf("IPAM provider log:\n%s\n", log)
			}
		}
	})

	It("gives a MachineDeployment's machines pool addresses, reports exhaustion, reuses and never duplicates them, and releases them", func() {
		tc := newTestCluster("ipam", "ipam")
		// A control plane, so that CAPI reaches the guest, matches Machines to Nodes and a
		// rollout can count its new machines as available.
		tc.controlPlaneMachine("ipam-cp-0")
		waitProgressing("the control plane initialised", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed())
			g.Expect(conditions.IsTrue(tc.Cluster, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
		})
		// Four addresses for three replicas, so that a fifth machine finds the pool exhausted.
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
			"kind":       "InClusterIPPool",
			"metadata":   map[string]any{"namespace": tc.Namespace, "name": "nodes"},
			"spec": map[string]any{
				"addresses": []any{"10.10.0.10-10.10.0.13"},
				"prefix":    int64(24),
				"gateway":   "10.10.0.1",
			},
		}}
		Expect(mgmt().Create(ctx, pool)).To(Succeed())
		inPool := func(a string) bool {
			ip, err := netip.ParseAddr(a)
			return err == nil && netip.MustParseAddr("10.10.0.10").Compare(ip) <= 0 && ip.Compare(netip.MustParseAddr("10.10.0.13")) <= 0
		}

		spec := machineSpec()
		spec.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
		spec.Networks[0].Nameservers = []string{"10.10.0.53"}

		By("a machine without a guest agent (an air-gapped site's) is provisioned from its claimed address, and releases it when deleted")
		testBed.Harvester.Faults.NeverAssignIP(tc.Target, "ipam-early")
		agentless := *spec.DeepCopy()
		agentless.GuestAgent = infrav1.GuestAgentNone
		early, earlyMachine := tc.workerMachine("ipam-early", agentless)
		waitProgressing("the agentless machine provisioned from its claimed address", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(early), early)).To(Succeed())
			g.Expect(early.Status.IPAddresses).To(HaveLen(1))
			ip := strings.TrimSuffix(early.Status.IPAddresses[0].Address, "/24")
			g.Expect(inPool(ip)).To(BeTrue())
			g.Expect(early.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ip}))
			vmi := &kubevirtv1.VirtualMachineInstance{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: early.Name}, vmi)).To(Succeed())
			g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
			g.Expect(vmi.Status.Interfaces).NotTo(ContainElement(HaveField("IP", Not(BeEmpty()))), "the guest reported nothing")
			g.Expect(early.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%v", early.Status.Conditions)
			g.Expect(conditions.IsTrue(early, infrav1.VirtualMachineReadyCondition)).To(BeTrue(), "%v", early.Status.Conditions)
		})
		userData := &corev1.Secret{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: naming.CloudInitSecretName(early.Name)}, userData)).To(Succeed())
		Expect(string(userData.Data["userdata"])).NotTo(ContainSubstring("qemu-guest-agent"), "guestAgent: None installs and starts nothing")
		Expect(mgmt().Delete(ctx, earlyMachine)).To(Succeed())
		waitProgressing("the agentless machine deleted and its address released", tc.state, func(g Gomega) {
			err := mgmt().Get(ctx, client.ObjectKeyFromObject(early), early)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the HarvesterMachine is gone")
			claims := &ipamv1.IPAddressClaimList{}
			g.Expect(mgmt().List(ctx, claims, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty(), "its claim is released")
			addrs := &ipamv1.IPAddressList{}
			g.Expect(mgmt().List(ctx, addrs, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(addrs.Items).To(BeEmpty(), "and so is its address")
		})

		md := tc.machineDeployment("workers", "ipam-v1", 3, spec)

		// machines returns the MachineDeployment's HarvesterMachines and fails when two live
		// claims hold the same address, whatever else is going on.
		machines := func(g Gomega) []infrav1.HarvesterMachine {
			addrs := &ipamv1.IPAddressList{}
			g.Expect(mgmt().List(ctx, addrs, client.InNamespace(tc.Namespace))).To(Succeed())
			seen := map[string]string{}
			for _, a := range addrs.Items {
				g.Expect(seen).NotTo(HaveKey(a.Spec.Address), "IPAddresses %s and %s hold the same address", a.Name, seen[a.Spec.Address])
				seen[a.Spec.Address] = a.Name
				g.Expect(inPool(a.Spec.Address)).To(BeTrue(), a.Spec.Address)
			}
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace), client.HasLabels{clusterv1.MachineDeploymentNameLabel})).To(Succeed())
			held := map[string]string{}
			for _, hm := range hms.Items {
				for _, a := range hm.Status.IPAddresses {
					g.Expect(held).NotTo(HaveKey(a.Address), "machines %s and %s hold the same address", hm.Name, held[a.Address])
					held[a.Address] = hm.Name
				}
			}
			return hms.Items
		}
		address := func(hm infrav1.HarvesterMachine) string {
			Expect(hm.Status.IPAddresses).To(HaveLen(1))
			return strings.TrimSuffix(hm.Status.IPAddresses[0].Address, "/24")
		}
		provisionedAddresses := func(g Gomega, n int, cpu int32) map[string]string {
			out := map[string]string{}
			for _, hm := range machines(g) {
				if hm.Spec.CPU != cpu || !ptr.Deref(hm.Status.Initialization.Provisioned, false) {
					continue
				}
				g.Expect(hm.Status.IPAddresses).To(HaveLen(1))
				out[hm.Name] = strings.TrimSuffix(hm.Status.IPAddresses[0].Address, "/24")
			}
			g.Expect(out).To(HaveLen(n))
			return out
		}

		By("waiting for three machines, each with its own pool address")
		var first map[string]string
		waitProgressing("three machines provisioned with pool addresses", tc.state, func(g Gomega) { first = provisionedAddresses(g, 3, 2) })

		By("checking claims, VMs, network-data and what the guests configured")
		hms := &infrav1.HarvesterMachineList{}
		Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace), client.HasLabels{clusterv1.MachineDeploymentNameLabel})).To(Succeed())
		Expect(hms.Items).To(HaveLen(3))
		for _, hm := range hms.Items {
			ip := address(hm)
			claimed := hm.Status.IPAddresses[0]
			Expect(claimed.Interface).To(Equal("nic-0"))
			Expect(claimed.Pool).To(Equal("InClusterIPPool/nodes"))
			Expect(claimed.Gateway).To(Equal("10.10.0.1"))
			Expect(conditions.IsTrue(&hm, infrav1.IPAddressesReadyCondition)).To(BeTrue())
			Expect(hm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ip}))

			claim := &ipamv1.IPAddressClaim{}
			Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: claimed.Claim}, claim)).To(Succeed())
			Expect(metav1.IsControlledBy(claim, &hm)).To(BeTrue(), "the claim is owned by its HarvesterMachine")
			Expect(claim.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, tc.Name))
			Expect(claim.Spec.ClusterName).To(Equal(tc.Name))
			Expect(claim.Spec.PoolRef).To(Equal(ipamv1.IPPoolReference{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}))

			vm := &kubevirtv1.VirtualMachine{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Name}, vm)).To(Succeed())
			ifaces := vm.Spec.Template.Spec.Domain.Devices.Interfaces
			Expect(ifaces[0].MacAddress).To(Equal(claimed.MACAddress), "the VM pins the MAC the network-data matches")
			Expect(ifaces[0].MacAddress).To(Equal(build.StaticMAC(hm.Namespace, hm.Name, "nic-0")))
			Expect(ifaces[1].MacAddress).NotTo(BeEmpty(), "every NIC is pinned, so that the DHCP one is matched too")

			secret := &corev1.Secret{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: naming.CloudInitSecretName(hm.Name)}, secret)).To(Succeed())
			var nd struct {
				Version   int `json:"version"`
				Ethernets map[string]struct {
					Match       map[string]string   `json:"match"`
					Addresses   []string            `json:"addresses"`
					Routes      []map[string]string `json:"routes"`
					Nameservers map[string][]string `json:"nameservers"`
					DHCP4       bool                `json:"dhcp4"`
				} `json:"ethernets"`
			}
			Expect(yaml.Unmarshal(secret.Data["networkdata"], &nd)).To(Succeed())
			Expect(nd.Version).To(Equal(2))
			Expect(nd.Ethernets["nic-0"].Match).To(HaveKeyWithValue("macaddress", claimed.MACAddress))
			Expect(nd.Ethernets["nic-0"].Addresses).To(Equal([]string{ip + "/24"}))
			Expect(nd.Ethernets["nic-0"].Routes).To(ConsistOf(map[string]string{"to": "0.0.0.0/0", "via": "10.10.0.1"}))
			Expect(nd.Ethernets["nic-0"].Nameservers).To(HaveKeyWithValue("addresses", []string{"10.10.0.53"}))
			Expect(nd.Ethernets["nic-1"].DHCP4).To(BeTrue())
			Expect(nd.Ethernets["nic-1"].Match).To(HaveKeyWithValue("macaddress", ifaces[1].MacAddress))

			// The simulated guest applies the network-data as cloud-init does: matched by MAC
			// (once it has booted: the machine is provisioned with its claimed addresses first).
			Eventually(func(g Gomega) {
				vmi := &kubevirtv1.VirtualMachineInstance{}
				g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(vm), vmi)).To(Succeed())
				g.Expect(vmi.Status.Interfaces).NotTo(BeEmpty())
				g.Expect(vmi.Status.Interfaces[0].IP).To(Equal(ip))
			}).Should(Succeed())
		}

		By("scaling to five: the pool has four addresses, the fifth machine reports it exhausted and gets no VM")
		scale := func(n int32) {
			Eventually(func(g Gomega) {
				g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
				md.Spec.Replicas = ptr.To(n)
				g.Expect(mgmt().Update(ctx, md)).To(Succeed())
			}).Should(Succeed())
		}
		scale(5)
		waitProgressing("a fourth machine provisioned and a fifth finding the pool exhausted", tc.state, func(g Gomega) {
			provisionedAddresses(g, 4, 2)
			var exhausted []infrav1.HarvesterMachine
			for _, hm := range machines(g) {
				if c := conditions.Get(&hm, infrav1.IPAddressesReadyCondition); c != nil && c.Reason == infrav1.IPPoolExhaustedReason {
					exhausted = append(exhausted, hm)
				}
			}
			g.Expect(exhausted).To(HaveLen(1))
			hm := exhausted[0]
			c := conditions.Get(&hm, infrav1.IPAddressesReadyCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("InClusterIPPool nodes has no free address (4 in use of 4)"))
			g.Expect(conditions.GetReason(&hm, clusterv1.ReadyCondition)).NotTo(Equal(infrav1.ReadyReason))
			g.Expect(conditions.GetReason(&hm, infrav1.VirtualMachineReadyCondition)).To(Equal(infrav1.IPPoolExhaustedReason))
			g.Expect(hm.Status.IPAddresses).To(BeEmpty())
			err := harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Name}, &kubevirtv1.VirtualMachine{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no VM without its address")
		})

		By("scaling back to three")
		scale(3)
		var before map[string]string
		waitProgressing("the scale-down to three", tc.state, func(g Gomega) {
			before = provisionedAddresses(g, 3, 2)
			g.Expect(machines(g)).To(HaveLen(3))
		})
		for name, ip := range first {
			if a, ok := before[name]; ok {
				Expect(a).To(Equal(ip), "a machine keeps its address")
			}
		}

		By("rolling out a new template (network-config version 1): new machines take the addresses the old ones release")
		spec4 := spec
		spec4.CPU = 4
		spec4.NetworkConfigVersion = 1
		Expect(mgmt().Create(ctx, &infrav1.HarvesterMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: "ipam-v2"},
			Spec:       infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: spec4}},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
			md.Spec.Template.Spec.InfrastructureRef.Name = "ipam-v2"
			g.Expect(mgmt().Update(ctx, md)).To(Succeed())
		}).Should(Succeed())
		var after map[string]string
		waitProgressing("the rollout to the new template", tc.state, func(g Gomega) {
			after = provisionedAddresses(g, 3, 4)
			g.Expect(machines(g)).To(HaveLen(3), "the old machines are gone")
		})
		released := map[string]bool{}
		for _, ip := range before {
			released[ip] = true
		}
		reused := 0
		for name, ip := range after {
			Expect(before).NotTo(HaveKey(name))
			if released[ip] {
				reused++
			}
		}
		for name, ip := range after {
			secret := &corev1.Secret{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: naming.CloudInitSecretName(name)}, secret)).To(Succeed())
			Expect(string(secret.Data["networkdata"])).To(And(ContainSubstring("version: 1"), ContainSubstring("address: "+ip+"/24")))
			Eventually(func(g Gomega) {
				vmi := &kubevirtv1.VirtualMachineInstance{}
				g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: name}, vmi)).To(Succeed())
				g.Expect(vmi.Status.Interfaces[0].IP).To(Equal(ip), "the simulated guest configures its address from version 1 as cloud-init does")
			}).Should(Succeed())
		}
		// Four addresses, three old machines and a surge of one: at most one new machine can
		// have the address no old machine held.
		Expect(reused).To(BeNumerically(">=", 2), "addresses released by the old machines are given to new ones: before %v, after %v", before, after)

		By("deleting the cluster: every claim and address is released")
		deleteCluster(tc)
		Eventually(func(g Gomega) {
			claims := &ipamv1.IPAddressClaimList{}
			g.Expect(mgmt().List(ctx, claims, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty())
			addrs := &ipamv1.IPAddressList{}
			g.Expect(mgmt().List(ctx, addrs, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(addrs.Items).To(BeEmpty())
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
			free, _, _ := unstructured.NestedInt64(pool.Object, "status", "ipAddresses", "free")
			g.Expect(free).To(Equal(int64(4)))
		}).Should(Succeed())
		leakFree(tc.Target)
	})

	It("reports a missing pool, a kind no IPAM provider serves and a claim name taken, and continues once the pool exists", func() {
		tc := newTestCluster("ipam-refs", "ipam-refs")
		withPool := func(group, kind, name string) infrav1.HarvesterMachineSpec {
			spec := machineSpec()
			spec.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: group, Kind: kind, Name: name}}
			return spec
		}
		// A claim of the name the third machine's claim would have, made by someone else.
		foreign := &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: build.IPAddressClaimName("claim-taken", "nic-0", 0)},
			Spec: ipamv1.IPAddressClaimSpec{ClusterName: tc.Name,
				PoolRef: ipamv1.IPPoolReference{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "elsewhere"}},
		}
		Expect(mgmt().Create(ctx, foreign)).To(Succeed())

		missing, _ := tc.workerMachine("pool-missing", withPool(infrav1.IPAMAPIGroup, "InClusterIPPool", "late"))
		unserved, _ := tc.workerMachine("kind-unserved", withPool("ipam.example.com", "MetalPool", "rack-1"))
		taken, _ := tc.workerMachine("claim-taken", withPool(infrav1.IPAMAPIGroup, "InClusterIPPool", "late"))
		condition := func(g Gomega, hm *infrav1.HarvesterMachine) *metav1.Condition {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hm), hm)).To(Succeed())
			c := conditions.Get(hm, infrav1.IPAddressesReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			err := harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Name}, &kubevirtv1.VirtualMachine{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no VM without its addresses")
			return c
		}
		Eventually(func(g Gomega) {
			c := condition(g, missing)
			g.Expect(c.Reason).To(Equal(infrav1.WaitingForIPAddressReason))
			g.Expect(c.Message).To(ContainSubstring("InClusterIPPool late (the pool does not exist)"))
			c = condition(g, unserved)
			g.Expect(c.Reason).To(Equal(infrav1.WaitingForIPAddressReason))
			g.Expect(c.Message).To(ContainSubstring("no IPAM provider serves kind MetalPool in ipam.example.com"))
			c = condition(g, taken)
			g.Expect(c.Reason).To(Equal(infrav1.IPAddressClaimFailedReason))
			g.Expect(c.Message).To(ContainSubstring("IPAddressClaim claim-taken-nic-0-0 exists and is not this machine's"))
		}).Should(Succeed())
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
		Expect(metav1.GetControllerOf(foreign)).To(BeNil(), "the foreign claim is left as it was")

		By("the in-cluster provider's own webhook refuses a malformed pool")
		err := mgmt().Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
			"kind":       "InClusterIPPool",
			"metadata":   map[string]any{"namespace": tc.Namespace, "name": "late"},
			"spec":       map[string]any{"addresses": []any{"10.20.0.300"}, "prefix": int64(24), "gateway": "10.20.0.1"},
		}})
		Expect(err).To(MatchError(ContainSubstring("provided address is not a valid IP, range, nor CIDR")))

		By("creating the missing pool: the machine gets its address and is provisioned")
		Expect(mgmt().Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
			"kind":       "InClusterIPPool",
			"metadata":   map[string]any{"namespace": tc.Namespace, "name": "late"},
			"spec":       map[string]any{"addresses": []any{"10.20.0.10-10.20.0.19"}, "prefix": int64(24), "gateway": "10.20.0.1"},
		}})).To(Succeed())
		waitProgressing("the machine provisioned from the new pool", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(missing), missing)).To(Succeed())
			g.Expect(conditions.IsTrue(missing, infrav1.IPAddressesReadyCondition)).To(BeTrue())
			g.Expect(missing.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
			g.Expect(missing.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "10.20.0.10"}))
		})

		By("a NIC with an IPv4 pool and a cluster-scoped IPv6 pool gets one address of each")
		global := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
			"kind":       "GlobalInClusterIPPool",
			"metadata":   map[string]any{"name": "ipam-refs-v6"},
			"spec":       map[string]any{"addresses": []any{"fd00:20::10-fd00:20::1f"}, "prefix": int64(64), "gateway": "fd00:20::1"},
		}}
		Expect(mgmt().Create(ctx, global)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt().Delete(ctx, global))).To(Succeed()) })
		dualSpec := withPool(infrav1.IPAMAPIGroup, "InClusterIPPool", "late")
		dualSpec.Networks[0].AddressesFromPools = append(dualSpec.Networks[0].AddressesFromPools,
			infrav1.IPPoolReference{APIGroup: infrav1.IPAMAPIGroup, Kind: "GlobalInClusterIPPool", Name: "ipam-refs-v6"})
		dual, _ := tc.workerMachine("dual-stack", dualSpec)
		waitProgressing("the dual-stack machine provisioned", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(dual), dual)).To(Succeed())
			g.Expect(dual.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
			g.Expect(dual.Status.IPAddresses).To(HaveLen(2))
			g.Expect(dual.Status.IPAddresses[0].Address).To(Equal("10.20.0.11/24"))
			g.Expect(dual.Status.IPAddresses[1].Address).To(Equal("fd00:20::10/64"))
			g.Expect(dual.Status.IPAddresses[1].Pool).To(Equal("GlobalInClusterIPPool/ipam-refs-v6"))
		})
		secret := &corev1.Secret{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: naming.CloudInitSecretName(dual.Name)}, secret)).To(Succeed())
		var nd struct {
			Ethernets map[string]struct {
				Addresses []string            `json:"addresses"`
				Routes    []map[string]string `json:"routes"`
			} `json:"ethernets"`
		}
		Expect(yaml.Unmarshal(secret.Data["networkdata"], &nd)).To(Succeed())
		Expect(nd.Ethernets["nic-0"].Addresses).To(Equal([]string{"10.20.0.11/24", "fd00:20::10/64"}))
		Expect(nd.Ethernets["nic-0"].Routes).To(ConsistOf(
			map[string]string{"to": "0.0.0.0/0", "via": "10.20.0.1"},
			map[string]string{"to": "::/0", "via": "fd00:20::1"}))
		// The machine is provisioned with its claimed addresses before the guest has booted and
		// reports them on the VMI.
		Eventually(func(g Gomega) {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: dual.Name}, vmi)).To(Succeed())
			g.Expect(vmi.Status.Interfaces).NotTo(BeEmpty())
			g.Expect(vmi.Status.Interfaces[0].IPs).To(ContainElements("10.20.0.11", "fd00:20::10"))
		}).Should(Succeed())
		Expect(dual.Status.Addresses).To(ContainElements(
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "10.20.0.11"},
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "fd00:20::10"}))

		deleteCluster(tc)
		Expect(mgmt().Delete(ctx, foreign)).To(Succeed())
		Eventually(func(g Gomega) {
			claims := &ipamv1.IPAddressClaimList{}
			g.Expect(mgmt().List(ctx, claims, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty())
		}).Should(Succeed())
		leakFree(tc.Target)
	})
})

// workerMachine creates a HarvesterMachine of spec and a worker Machine that owns it.
func (tc *testCluster) workerMachine(name string, spec infrav1.HarvesterMachineSpec) (*infrav1.HarvesterMachine, *clusterv1.Machine) {
	hm := &infrav1.HarvesterMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: tc.Name}},
		Spec:       spec,
	}
	Expect(mgmt().Create(ctx, hm)).To(Succeed())
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: tc.Name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: tc.Name,
			Version:     "v1.35.4",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(tc.Bootstrap.Name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachine", Name: name,
			},
		},
	}
	Expect(mgmt().Create(ctx, m)).To(Succeed())
	return hm, m
}
