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

package harvestersim_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

var (
	sim *harvestersim.Harvester
	ctx = context.Background()
)

const ns = "guests"

func TestMain(m *testing.M) {
	var err error
	opts := harvestersim.DefaultOptions()
	// Pools selected as Harvester selects them once its webhook has rewritten a load balancer's
	// annotations: by namespace and guest cluster (the network only for node-driver guests).
	opts.IPPools = []harvestersim.IPPoolSpec{
		{Name: "guests", Subnet: "10.10.0.0/16", RangeStart: "10.10.100.10", RangeEnd: "10.10.100.59",
			Gateway: "10.10.0.1", Namespace: ns, GuestCluster: "none"},
		{Name: "tiny", Subnet: "10.30.0.0/24", RangeStart: "10.30.0.10", RangeEnd: "10.30.0.11",
			Gateway: "10.30.0.1", Namespace: "*", GuestCluster: "tiny", Priority: 10},
		{Name: "node-driver", Subnet: "10.50.0.0/24", RangeStart: "10.50.0.10", RangeEnd: "10.50.0.20",
			Gateway: "10.50.0.1", Network: "default/vlan20", Namespace: ns},
		{Name: "global", Subnet: "10.40.0.0/24", RangeStart: "10.40.0.10", RangeEnd: "10.40.0.99",
			Gateway: "10.40.0.1", Global: true},
	}
	sim, err = harvestersim.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := sim.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// vm builds a sample VM; mutate adjusts it.
func vm(name string, mutate func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
	v := harvestersim.SampleVM(ns, name, "")
	if mutate != nil {
		mutate(v)
	}
	return v
}

func getVMI(g Gomega, name string) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi)).To(Succeed())
	return vmi
}

// launcherSchedulingMessage is the message of the PodScheduled=False condition of the VMI's
// virt-launcher pod (empty while it has none).
func launcherSchedulingMessage(g Gomega, vmi string) string {
	pods := &corev1.PodList{}
	g.Expect(sim.Client().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Name == vmi {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return c.Message
				}
			}
		}
	}
	return ""
}

func podScheduledMessage(conds []kubevirtv1.VirtualMachineInstanceCondition) string {
	for _, c := range conds {
		if string(c.Type) == string(corev1.PodScheduled) && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

func hostOf(name string) *corev1.Node {
	node := &corev1.Node{}
	Expect(sim.Client().Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
	return node
}

// settles bounds the waits for what the simulated Harvester's controllers (and Harvester's and
// KubeVirt's own) do: seconds on an idle machine, much longer beside other work, so it is a bound
// only something stuck reaches.
const settles = 2 * time.Minute

func deleteVM(t *testing.T, name string) {
	t.Helper()
	g := NewWithT(t)
	v := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Expect(client.IgnoreNotFound(sim.Client().Delete(ctx, v))).To(Succeed())
	// KubeVirt's controllers and their finalizers take the VM away: seconds on an idle machine,
	// much longer on a loaded one, so the bound is one only a stuck deletion passes.
	g.Eventually(func() bool {
		return apierrors.IsNotFound(sim.Client().Get(ctx, client.ObjectKeyFromObject(v), v))
	}, settles).Should(BeTrue())
}

func TestVMRunsWithVolumesAddressesAndLabels(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, vm("run-1", nil))).To(Succeed())
	defer deleteVM(t, "run-1")

	// The PVC of the annotation exists and is bound.
	g.Eventually(func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "run-1-disk-0-abcde"}, pvc)).To(Succeed())
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
	}, settles).Should(Succeed())

	// The VMI runs on a host with the template's labels and the guest agent's addresses.
	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "run-1")
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
		g.Expect(vmi.Status.NodeName).To(HavePrefix("harvester-"))
		g.Expect(vmi.Labels).To(HaveKeyWithValue("app", "run-1"))
		g.Expect(vmi.Labels).To(HaveKeyWithValue("cluster", "test"))
		g.Expect(vmi.OwnerReferences).To(ContainElement(HaveField("Kind", "VirtualMachine")))
		g.Expect(vmi.Status.Interfaces).To(HaveLen(3), "two NICs of the spec and a guest-only CNI bridge")
		nic0, nic1 := vmi.Status.Interfaces[0], vmi.Status.Interfaces[1]
		g.Expect(nic0.Name).To(Equal("nic-0"))
		g.Expect(nic0.IP).To(HavePrefix("10.10."))
		g.Expect(nic0.IPs).To(ContainElement(HavePrefix("fe80::")), "the guest agent reports link-local addresses too")
		g.Expect(nic1.IP).To(HavePrefix("10.20."))
		g.Expect(nic1.IPs).To(ContainElement(HavePrefix("fd00:20::")), "dual stack on vlan20")
		g.Expect(vmi.Status.Interfaces[2].Name).To(BeEmpty())
		g.Expect(vmi.Status.Conditions).To(ContainElement(And(
			HaveField("Type", kubevirtv1.VirtualMachineInstanceAgentConnected), HaveField("Status", corev1.ConditionTrue))))
	}, settles).Should(Succeed())

	g.Eventually(func(g Gomega) {
		v := &kubevirtv1.VirtualMachine{}
		g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "run-1"}, v)).To(Succeed())
		g.Expect(v.Status.Ready).To(BeTrue())
		g.Expect(v.Status.PrintableStatus).To(Equal(kubevirtv1.VirtualMachineStatusRunning))
	}, settles).Should(Succeed())
}

func TestSchedulingFollowsAffinity(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)

	// A required zone lands the VMI in that zone.
	g.Expect(sim.Client().Create(ctx, vm("zone-b", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: harvestersim.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}},
			}}},
		}}
	}))).To(Succeed())
	defer deleteVM(t, "zone-b")
	g.Eventually(func(g Gomega) {
		g.Expect(getVMI(g, "zone-b").Status.NodeName).To(Equal("harvester-3"))
	}, settles).Should(Succeed())

	// Soft anti-affinity between siblings spreads them over the three hosts.
	for i := range 3 {
		name := fmt.Sprintf("spread-%d", i)
		g.Expect(sim.Client().Create(ctx, vm(name, func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.ObjectMeta.Labels["role"] = "spread"
			v.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:   harvestersim.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "spread"}},
				}}},
			}}
		}))).To(Succeed())
		defer deleteVM(t, name)
		// One at a time, as a MachineDeployment creates them: each sees the others placed.
		g.Eventually(func(g Gomega) { g.Expect(getVMI(g, name).Status.NodeName).NotTo(BeEmpty()) }, settles).Should(Succeed())
	}
	hosts := map[string]bool{}
	for i := range 3 {
		hosts[getVMI(g, fmt.Sprintf("spread-%d", i)).Status.NodeName] = true
	}
	g.Expect(hosts).To(HaveLen(3))
}

func TestUnschedulableVMWaitsForAHost(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, vm("zone-c", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: harvestersim.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-c"}}},
			}}},
		}}
	}))).To(Succeed())
	defer deleteVM(t, "zone-c")

	g.Eventually(func(g Gomega) {
		v := &kubevirtv1.VirtualMachine{}
		g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "zone-c"}, v)).To(Succeed())
		g.Expect(v.Status.PrintableStatus).To(Equal(kubevirtv1.VirtualMachineStatusUnschedulable))
		g.Expect(getVMI(g, "zone-c").Status.Phase).To(Equal(kubevirtv1.Scheduling))
	}, settles).Should(Succeed())

	// A host in that zone joins: the VMI is placed there without anyone touching it.
	g.Expect(sim.AddHost(ctx, harvestersim.Host{Name: "harvester-4", Zone: "zone-c", Region: "region-1"})).To(Succeed())
	defer func() {
		g.Expect(sim.Client().Delete(ctx, hostOf("harvester-4"))).To(Succeed())
	}()
	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "zone-c")
		g.Expect(vmi.Status.NodeName).To(Equal("harvester-4"))
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	}, settles).Should(Succeed())
}

func TestGuestClusterVMIsGetHostTopology(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, vm("guest", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.ObjectMeta.Labels[harvestersim.LabelCreator] = harvestersim.CreatorDockerMachineDriver
	}))).To(Succeed())
	defer deleteVM(t, "guest")
	g.Expect(sim.Client().Create(ctx, vm("plain", nil))).To(Succeed())
	defer deleteVM(t, "plain")

	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "guest")
		g.Expect(vmi.Status.NodeName).NotTo(BeEmpty())
		host := hostOf(vmi.Status.NodeName)
		g.Expect(vmi.Annotations).To(HaveKeyWithValue(harvestersim.LabelZone, host.Labels[harvestersim.LabelZone]))
		g.Expect(vmi.Annotations).To(HaveKeyWithValue(harvestersim.LabelRegion, "region-1"))
		g.Expect(vmi.Annotations).To(HaveKeyWithValue(harvestersim.LabelHostname, host.Name))
	}, settles).Should(Succeed())
	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "plain")
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
		g.Expect(vmi.Annotations).NotTo(HaveKey(harvestersim.LabelZone))
	}, settles).Should(Succeed())
}

func TestLiveMigrationMovesTheVMIAndKeepsItsAddresses(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, vm("migrate", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.ObjectMeta.Labels[harvestersim.LabelCreator] = harvestersim.CreatorDockerMachineDriver
	}))).To(Succeed())
	defer deleteVM(t, "migrate")
	var before *kubevirtv1.VirtualMachineInstance
	g.Eventually(func(g Gomega) {
		before = getVMI(g, "migrate")
		g.Expect(before.Status.Interfaces).NotTo(BeEmpty())
		g.Expect(before.Status.Interfaces[0].IP).NotTo(BeEmpty())
	}, settles).Should(Succeed())

	vmim, err := sim.Migrate(ctx, ns, "migrate")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmim.Finalizers).To(ContainElement(kubevirtv1.VirtualMachineInstanceMigrationFinalizer), "KubeVirt's migration mutator")
	g.Eventually(func(g Gomega) {
		g.Expect(sim.Client().Get(ctx, client.ObjectKeyFromObject(vmim), vmim)).To(Succeed())
		g.Expect(vmim.Status.Phase).To(Equal(kubevirtv1.MigrationSucceeded))
		g.Expect(vmim.Finalizers).NotTo(ContainElement(kubevirtv1.VirtualMachineInstanceMigrationFinalizer), "lifted once over")
	}, settles).Should(Succeed())
	g.Eventually(func(g Gomega) {
		after := getVMI(g, "migrate")
		g.Expect(after.Status.NodeName).NotTo(Equal(before.Status.NodeName))
		g.Expect(after.Status.MigrationState).NotTo(BeNil())
		g.Expect(after.Status.MigrationState.SourceNode).To(Equal(before.Status.NodeName))
		g.Expect(after.Status.Interfaces[0].IP).To(Equal(before.Status.Interfaces[0].IP))
		g.Expect(after.Annotations).To(HaveKeyWithValue(harvestersim.LabelHostname, after.Status.NodeName))
	}, settles).Should(Succeed())
}

func TestVMDeletionCascades(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	v := vm("cascade", func(v *kubevirtv1.VirtualMachine) {
		v.Annotations[harvestersim.AnnotationRemovedPVCs] = "cascade-disk-0-abcde"
	})
	g.Expect(sim.Client().Create(ctx, v)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cascade-cloudinit",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: v.Name, UID: v.UID}}}}
	g.Expect(sim.Client().Create(ctx, secret)).To(Succeed())
	g.Expect(sim.Client().Create(ctx, vm("keeps-disk", nil))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(getVMI(g, "cascade").Status.Phase).To(Equal(kubevirtv1.Running)) }, settles).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(getVMI(g, "keeps-disk").Status.Phase).To(Equal(kubevirtv1.Running)) }, settles).Should(Succeed())
	// Harvester's VM controller deletes the listed volumes under a finalizer it adds after the
	// VM's creation; a VM deleted before that leaves them (the provider deletes its labelled
	// volumes itself once the VM is gone, so it does not depend on this).
	g.Eventually(func(g Gomega) {
		got := &kubevirtv1.VirtualMachine{}
		g.Expect(sim.Client().Get(ctx, client.ObjectKeyFromObject(v), got)).To(Succeed())
		g.Expect(got.Finalizers).To(ContainElement(harvestersim.FinalizerHarvesterVMCleanup))
	}, settles).Should(Succeed())

	deleteVM(t, "cascade")
	deleteVM(t, "keeps-disk")
	gone := func(obj client.Object) func() bool {
		return func() bool { return apierrors.IsNotFound(sim.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj)) }
	}
	g.Eventually(gone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cascade"}}), settles).Should(BeTrue())
	g.Eventually(gone(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cascade-disk-0-abcde"}}), settles).Should(BeTrue())
	g.Eventually(gone(secret), settles).Should(BeTrue())

	// Without the removal annotation Harvester keeps the volume: that is how volumes leak.
	kept := &corev1.PersistentVolumeClaim{}
	g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "keeps-disk-disk-0-abcde"}, kept)).To(Succeed())
	g.Expect(sim.Client().Delete(ctx, kept)).To(Succeed())
	g.Eventually(gone(kept), settles).Should(BeTrue(), "the pvc-protection finalizer is lifted once no VMI uses it")
}

func loadBalancer(name string, mutate func(*lbv1.LoadBalancer)) *lbv1.LoadBalancer {
	lb := &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}},
		Spec: lbv1.LoadBalancerSpec{
			WorkloadType: lbv1.VM, IPAM: lbv1.Pool,
			Listeners:             []lbv1.Listener{{Name: "apiserver", Port: 6443, Protocol: corev1.ProtocolTCP, BackendPort: 6443}},
			BackendServerSelector: map[string][]string{"app": {name}},
			HealthCheck:           &lbv1.HealthCheck{Port: 6443, SuccessThreshold: 1, FailureThreshold: 3, PeriodSeconds: 5, TimeoutSeconds: 3},
		},
	}
	if mutate != nil {
		mutate(lb)
	}
	return lb
}

func getLB(g Gomega, name string) *lbv1.LoadBalancer {
	lb := &lbv1.LoadBalancer{}
	g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, lb)).To(Succeed())
	return lb
}

func getPool(g Gomega, name string) *lbv1.IPPool {
	pool := &lbv1.IPPool{}
	g.Expect(sim.Client().Get(ctx, client.ObjectKey{Name: name}, pool)).To(Succeed())
	return pool
}

func deleteLB(t *testing.T, name string) {
	t.Helper()
	g := NewWithT(t)
	lb := &lbv1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Expect(client.IgnoreNotFound(sim.Client().Delete(ctx, lb))).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(sim.Client().Get(ctx, client.ObjectKeyFromObject(lb), lb)) }, settles).Should(BeTrue())
}

func readyCondition(lb *lbv1.LoadBalancer) lbv1.Condition {
	for _, c := range lb.Status.Conditions {
		if c.Type == lbv1.LoadBalancerReady {
			return c
		}
	}
	return lbv1.Condition{}
}

func TestLoadBalancerGetsAPoolAddressBySelectorAndKeepsIt(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	// The client asks for a network; Harvester's webhook empties it for a VM load balancer and
	// records the namespace, so the pool is chosen by its namespace scope.
	lb := loadBalancer("cp", func(lb *lbv1.LoadBalancer) { lb.Annotations[harvestersim.AnnotationLBNetwork] = "default/vlan10" })
	g.Expect(sim.Client().Create(ctx, lb)).To(Succeed())
	g.Expect(lb.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationLBNetwork, ""))
	g.Expect(lb.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationLBNamespace, ns))

	var ip string
	g.Eventually(func(g Gomega) {
		got := getLB(g, "cp")
		g.Expect(got.Status.AllocatedAddress.IPPool).To(Equal("guests"))
		ip = got.Status.AllocatedAddress.IP
		g.Expect(ip).To(HavePrefix("10.10.100."))
		g.Expect(got.Status.AllocatedAddress.Mask).To(Equal("255.255.0.0"))
		g.Expect(got.Status.AllocatedAddress.Gateway).To(Equal("10.10.0.1"))
		g.Expect(got.Status.Address).To(Equal(ip))
		// No VM behind it yet: not ready, but the address is known.
		g.Expect(readyCondition(got).Status).To(Equal(corev1.ConditionFalse))
		g.Expect(readyCondition(got).Message).To(Equal("no running backend servers"))
	}, settles).Should(Succeed())
	g.Expect(getPool(g, "guests").Status.Allocated).To(HaveKeyWithValue(ip, ns+"/cp"))

	// A running VM that matches the selector becomes a backend. Harvester's prober probes every
	// period (5 s here) and reports each result; a report whose EndpointSlice update loses a race
	// is made again at the next period, so Ready can take a few periods.
	g.Expect(sim.Client().Create(ctx, vm("cp", nil))).To(Succeed())
	defer deleteVM(t, "cp")
	g.Eventually(func(g Gomega) {
		got := getLB(g, "cp")
		g.Expect(got.Status.BackendServers).To(HaveLen(1))
		g.Expect(readyCondition(got).Status).To(Equal(corev1.ConditionTrue))
	}, settles).Should(Succeed())

	// Deleting releases the address into the pool's history; the same name gets it back.
	deleteLB(t, "cp")
	pool := getPool(g, "guests")
	g.Expect(pool.Status.Allocated).NotTo(HaveKey(ip))
	g.Expect(pool.Status.AllocatedHistory).To(HaveKeyWithValue(ip, ns+"/cp"))

	other := loadBalancer("other", func(lb *lbv1.LoadBalancer) { lb.Annotations[harvestersim.AnnotationLBNetwork] = "default/vlan10" })
	g.Expect(sim.Client().Create(ctx, other)).To(Succeed())
	defer deleteLB(t, "other")
	g.Eventually(func(g Gomega) { g.Expect(getLB(g, "other").Status.AllocatedAddress.IP).NotTo(BeEmpty()) }, settles).Should(Succeed())
	g.Expect(getLB(g, "other").Status.AllocatedAddress.IP).NotTo(Equal(ip), "a remembered address goes to its old owner only")

	g.Expect(sim.Client().Create(ctx, loadBalancer("cp", func(lb *lbv1.LoadBalancer) {
		lb.Annotations[harvestersim.AnnotationLBNetwork] = "default/vlan10"
	}))).To(Succeed())
	defer deleteLB(t, "cp")
	g.Eventually(func(g Gomega) { g.Expect(getLB(g, "cp").Status.AllocatedAddress.IP).To(Equal(ip)) }, settles).Should(Succeed())
}

func TestLoadBalancerWithoutMatchingPoolUsesTheGlobalPool(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, loadBalancer("global", guestLB("nobody")))).To(Succeed())
	defer deleteLB(t, "global")
	g.Eventually(func(g Gomega) {
		got := getLB(g, "global")
		g.Expect(got.Status.AllocatedAddress.IPPool).To(Equal("global"))
		g.Expect(got.Status.AllocatedAddress.IP).To(HavePrefix("10.40.0."))
	}, settles).Should(Succeed())
}

// guestLB makes a load balancer a guest cluster's (workloadType cluster), as a CCM makes them.
func guestLB(cluster string) func(*lbv1.LoadBalancer) {
	return func(lb *lbv1.LoadBalancer) {
		lb.Spec.WorkloadType, lb.Spec.BackendServerSelector, lb.Spec.HealthCheck = lbv1.Cluster, nil, nil
		lb.Annotations[harvestersim.AnnotationLBCluster] = cluster
	}
}

// Harvester's webhook takes a guest load balancer's network from the first node-driver VM of
// its cluster (name prefix, creator label), which then selects the pool.
func TestGuestLoadBalancerNetworkComesFromNodeDriverVMs(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, vm("rke-pool1-abc", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.ObjectMeta.Labels["harvesterhci.io/creator"] = "docker-machine-driver-harvester"
		v.Spec.Template.Spec.Networks[0].Multus.NetworkName = "default/vlan20"
	}))).To(Succeed())
	defer deleteVM(t, "rke-pool1-abc")
	// The webhook reads VMIs from its informer's cache: the VMI running (as the cluster's nodes
	// are by the time its CCM makes a load balancer) has long been there.
	g.Eventually(func(g Gomega) {
		g.Expect(getVMI(g, "rke-pool1-abc").Status.Phase).To(Equal(kubevirtv1.Running))
	}, settles).Should(Succeed())

	lb := loadBalancer("rke-svc", guestLB("rke"))
	g.Expect(sim.Client().Create(ctx, lb)).To(Succeed())
	defer deleteLB(t, "rke-svc")
	g.Expect(lb.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationLBNetwork, "default/vlan20"))
	g.Eventually(func(g Gomega) {
		g.Expect(getLB(g, "rke-svc").Status.AllocatedAddress.IPPool).To(Equal("node-driver"))
	}, settles).Should(Succeed())
}

func TestExhaustedPoolIsReportedAndRecovers(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	onTiny := guestLB("tiny")
	for _, name := range []string{"tiny-1", "tiny-2", "tiny-3"} {
		g.Expect(sim.Client().Create(ctx, loadBalancer(name, onTiny))).To(Succeed())
		defer deleteLB(t, name)
		g.Eventually(func(g Gomega) { g.Expect(getLB(g, name).Status.Conditions).NotTo(BeEmpty()) }, settles).Should(Succeed())
	}
	third := getLB(g, "tiny-3")
	g.Expect(third.Status.AllocatedAddress.IP).To(BeEmpty())
	g.Expect(readyCondition(third).Status).To(Equal(corev1.ConditionFalse))
	g.Expect(readyCondition(third).Message).To(Equal("no IP addresses available in range set: 10.30.0.10-10.30.0.11"))
	g.Expect(getPool(g, "tiny").Status.Available).To(BeZero())

	// Freeing an address serves the waiting load balancer, by watch.
	deleteLB(t, "tiny-1")
	g.Eventually(func(g Gomega) { g.Expect(getLB(g, "tiny-3").Status.AllocatedAddress.IP).To(Equal("10.30.0.10")) }, settles).Should(Succeed())
}

func TestDHCPLoadBalancers(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	// A guest's (cluster) load balancer: kube-vip in the guest leases the address.
	g.Expect(sim.Client().Create(ctx, loadBalancer("guest-svc", func(lb *lbv1.LoadBalancer) {
		lb.Spec.WorkloadType, lb.Spec.IPAM, lb.Spec.BackendServerSelector, lb.Spec.HealthCheck = lbv1.Cluster, lbv1.DHCP, nil, nil
	}))).To(Succeed())
	defer deleteLB(t, "guest-svc")
	// A vm load balancer: Harvester leases the address itself.
	g.Expect(sim.Client().Create(ctx, loadBalancer("vm-dhcp", func(lb *lbv1.LoadBalancer) { lb.Spec.IPAM = lbv1.DHCP }))).To(Succeed())
	defer deleteLB(t, "vm-dhcp")

	g.Eventually(func(g Gomega) {
		got := getLB(g, "guest-svc")
		g.Expect(got.Status.AllocatedAddress.IP).To(Equal(harvestersim.AddressAskDHCP))
		g.Expect(got.Status.Address).To(BeEmpty())
		g.Expect(readyCondition(got).Status).To(Equal(corev1.ConditionTrue))
	}, settles).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getLB(g, "guest-svc").Status.AllocatedAddress.IP).To(Equal(harvestersim.AddressAskDHCP))
	}, 500*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := getLB(g, "vm-dhcp")
		g.Expect(got.Status.AllocatedAddress.IP).To(Equal(harvestersim.AddressAskDHCP))
		g.Expect(got.Status.Address).To(HavePrefix("10.10.200."))
	}, settles).Should(Succeed())
}

// providerClient is a client of the simulated Harvester as the provider's restricted identity,
// through the fault proxy.
func providerClient(g Gomega) client.Client {
	kubeconfig, err := sim.ProviderKubeconfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	scheme, err := harvestersim.Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func TestProviderIdentityIsRestricted(t *testing.T) {
	g := NewWithT(t)
	c := providerClient(g)
	g.Expect(c.List(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace(ns))).To(Succeed())
	g.Expect(c.List(ctx, &corev1.NodeList{})).To(Succeed())

	err := c.List(ctx, &rbacv1.ClusterRoleList{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	err = c.Delete(ctx, hostOf("harvester-1"))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	err = c.Create(ctx, &lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "mine"}})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
}

func TestAPIFaults(t *testing.T) {
	g := NewWithT(t)
	c := providerClient(g)
	defer sim.Faults.Clear()

	sim.Faults.FailRequests("virtualmachines", "list", http.StatusInternalServerError, 2)
	for range 2 {
		err := c.List(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace(ns))
		g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "got %v", err)
	}
	g.Expect(c.List(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace(ns))).To(Succeed(), "only two requests fail")
	g.Expect(c.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace(ns))).To(Succeed(), "other resources are not affected")

	sim.Faults.ErrorRate("persistentvolumeclaims", 0.5, http.StatusServiceUnavailable)
	failed := 0
	for range 40 {
		if err := c.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace(ns)); err != nil {
			g.Expect(apierrors.IsServiceUnavailable(err)).To(BeTrue(), "got %v", err)
			failed++
		}
	}
	g.Expect(failed).To(BeNumerically("~", 20, 12))
	sim.Faults.Clear()

	sim.Faults.Latency("keypairs", 300*time.Millisecond)
	start := time.Now()
	g.Expect(c.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace(ns))).To(Succeed())
	fast := time.Since(start)
	start = time.Now()
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "ops"}, &harvesterv1.KeyPair{})).To(Succeed())
	g.Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
	g.Expect(fast).To(BeNumerically("<", 300*time.Millisecond))
}

func TestOutageAndRevokedIdentity(t *testing.T) {
	g := NewWithT(t)
	c := providerClient(g)
	g.Expect(sim.StopAPI()).To(Succeed())
	err := c.List(ctx, &corev1.NodeList{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("connection refused"))
	g.Expect(sim.StartAPI(ctx)).To(Succeed())
	g.Expect(c.List(ctx, &corev1.NodeList{})).To(Succeed(), "the same client works again once the API is back")

	g.Expect(sim.RevokeProviderIdentity(ctx)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsUnauthorized(c.List(ctx, &corev1.NodeList{})) }, settles).Should(BeTrue())
	kubeconfig, err := sim.RestoreProviderIdentity(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsUnauthorized(c.List(ctx, &corev1.NodeList{}))).To(BeTrue(), "old tokens stay revoked")
	g.Expect(string(kubeconfig)).To(ContainSubstring(sim.APIServerURL()))
	g.Expect(providerClient(g).List(ctx, &corev1.NodeList{})).To(Succeed())
}

func TestVMIWithoutGuestAgentNeverGetsAnIP(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	sim.Faults.NeverAssignIP(ns, "silent")
	defer sim.Faults.Clear()
	g.Expect(sim.Client().Create(ctx, vm("silent", nil))).To(Succeed())
	defer deleteVM(t, "silent")
	g.Eventually(func(g Gomega) { g.Expect(getVMI(g, "silent").Status.Phase).To(Equal(kubevirtv1.Running)) }, settles).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, iface := range getVMI(g, "silent").Status.Interfaces {
			g.Expect(iface.IP).To(BeEmpty())
		}
	}, time.Second).Should(Succeed())
}

func TestImageImportIsAKnob(t *testing.T) {
	g := NewWithT(t)
	g.Expect(sim.AddImage(ctx, "default", "importing", false)).To(Succeed())
	img := &harvesterv1.VirtualMachineImage{}
	g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: "importing"}, img)).To(Succeed())
	g.Expect(imported(img)).To(Equal(corev1.ConditionUnknown))
	g.Expect(sim.SetImageImported(ctx, "default", "importing", true)).To(Succeed())
	g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: "importing"}, img)).To(Succeed())
	g.Expect(imported(img)).To(Equal(corev1.ConditionTrue))
	g.Expect(strings.HasPrefix(img.Status.StorageClassName, "longhorn-")).To(BeTrue())
}

func imported(img *harvesterv1.VirtualMachineImage) corev1.ConditionStatus {
	for _, c := range img.Status.Conditions {
		if c.Type == harvesterv1.ImageImported {
			return c.Status
		}
	}
	return ""
}

// A VMI asking for a passthrough device or vGPU lands only on a host whose allocatable lists
// that resource and has one free; until then it is unschedulable, saying which resource lacks.
func TestDevicesScheduleOnlyWhereAHostHasThem(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	const gpu = "nvidia.com/NVIDIA_A2-4Q"
	const nic = "intel.com/I350_GIGABIT_NETWORK_CONNECTION"
	withDevices := func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.Spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "gpu-0", DeviceName: gpu}}
		v.Spec.Template.Spec.Domain.Devices.HostDevices = []kubevirtv1.HostDevice{{Name: "hostdevice-0", DeviceName: nic}}
	}
	g.Expect(sim.Client().Create(ctx, vm("gpu-a", withDevices))).To(Succeed())
	defer deleteVM(t, "gpu-a")
	// KubeVirt copies the launcher pod's PodScheduled=False condition to the VMI once (its
	// condition manager adds a condition only when the VMI has none) and keeps that first message;
	// the pod carries the scheduler's latest one.
	unschedulable := func(name, missing string) {
		g.Eventually(func(g Gomega) {
			vmi := getVMI(g, name)
			g.Expect(vmi.Status.NodeName).To(BeEmpty())
			g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Scheduling))
			g.Expect(podScheduledMessage(vmi.Status.Conditions)).To(ContainSubstring("Insufficient "))
			g.Expect(launcherSchedulingMessage(g, name)).To(ContainSubstring("Insufficient " + missing))
		}, settles).Should(Succeed())
	}
	unschedulable("gpu-a", gpu)
	unschedulable("gpu-a", nic)

	// A host with the vGPU but not the NIC does not do; one with both does.
	g.Expect(sim.AddHost(ctx, harvestersim.Host{Name: "harvester-gpu-1", Zone: "zone-a", Region: "region-1",
		Devices: map[string]int{gpu: 1}})).To(Succeed())
	defer func() { g.Expect(sim.Client().Delete(ctx, hostOf("harvester-gpu-1"))).To(Succeed()) }()
	g.Eventually(func(g Gomega) {
		message := launcherSchedulingMessage(g, "gpu-a")
		reasons := strings.Split(message[strings.Index(message, ": ")+2:], "; ")
		g.Expect(reasons).To(ContainElement("harvester-gpu-1: Insufficient "+nic), "the host with the vGPU lacks only the NIC")
	}, settles).Should(Succeed())
	g.Expect(sim.AddHost(ctx, harvestersim.Host{Name: "harvester-gpu-2", Zone: "zone-a", Region: "region-1",
		Devices: map[string]int{gpu: 1, nic: 1}})).To(Succeed())
	defer func() { g.Expect(sim.Client().Delete(ctx, hostOf("harvester-gpu-2"))).To(Succeed()) }()
	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "gpu-a")
		g.Expect(vmi.Status.NodeName).To(Equal("harvester-gpu-2"))
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	}, settles).Should(Succeed())

	// The host's one NIC is taken: a second such VM waits until the first goes.
	g.Expect(sim.Client().Create(ctx, vm("gpu-b", withDevices))).To(Succeed())
	defer deleteVM(t, "gpu-b")
	unschedulable("gpu-b", nic)
	deleteVM(t, "gpu-a")
	g.Eventually(func(g Gomega) {
		g.Expect(getVMI(g, "gpu-b").Status.NodeName).To(Equal("harvester-gpu-2"))
	}, settles).Should(Succeed())
}

// Harvester's VM mutator sets requests from the overcommit setting and the guest memory from the
// memory limit, less a reservation: the annotation's, or 100Mi when the guest-memory overhead
// ratio is off (Harvester v1.8's default ratio, 1.5, reserves nothing); its validator refuses a
// reservation not below the limit.
func TestVMMutatorSetsRequestsAndGuestMemoryAsHarvester(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	sized := func(name, reserved string) *kubevirtv1.VirtualMachine {
		return vm(name, func(v *kubevirtv1.VirtualMachine) {
			v.Spec.Template.Spec.Domain.Resources.Limits = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}
			v.Spec.Template.Spec.Domain.Memory = nil
			if reserved != "" {
				v.Annotations["harvesterhci.io/reservedMemory"] = reserved
			}
		})
	}
	guestOf := func(name string) (guest, request, cpuRequest string) {
		v := &kubevirtv1.VirtualMachine{}
		g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, v)).To(Succeed())
		d := v.Spec.Template.Spec.Domain
		g.Expect(d.Memory).NotTo(BeNil())
		g.Expect(d.CPU.MaxSockets).To(BeEquivalentTo(1))
		return d.Memory.Guest.String(), d.Resources.Requests.Memory().String(), d.Resources.Requests.Cpu().String()
	}

	g.Expect(sim.Client().Create(ctx, sized("mem-default", ""))).To(Succeed())
	defer deleteVM(t, "mem-default")
	guest, request, cpu := guestOf("mem-default")
	g.Expect(guest).To(Equal("2Gi"), "the default overhead ratio reserves nothing")
	g.Expect(request).To(Equal("1365Mi"), "2Gi x 100 / 150, rounded down to MiB")
	g.Expect(cpu).To(Equal("200m"), "2 x 100 / 1000")

	g.Expect(sim.Client().Create(ctx, sized("mem-reserved", "256Mi"))).To(Succeed())
	defer deleteVM(t, "mem-reserved")
	guest, _, _ = guestOf("mem-reserved")
	g.Expect(guest).To(Equal("1792Mi"))

	ratio := &harvesterv1.Setting{}
	g.Expect(sim.Client().Get(ctx, client.ObjectKey{Name: harvestersim.SettingOverheadRatio}, ratio)).To(Succeed())
	ratio.Value = "0"
	g.Expect(sim.Client().Update(ctx, ratio)).To(Succeed())
	defer func() {
		g.Expect(sim.Client().Get(ctx, client.ObjectKey{Name: harvestersim.SettingOverheadRatio}, ratio)).To(Succeed())
		ratio.Value = ""
		g.Expect(sim.Client().Update(ctx, ratio)).To(Succeed())
	}()
	g.Expect(sim.Client().Create(ctx, sized("mem-legacy", ""))).To(Succeed())
	defer deleteVM(t, "mem-legacy")
	guest, _, _ = guestOf("mem-legacy")
	g.Expect(guest).To(Equal("1948Mi"), "the ratio off: 100Mi reserved")

	err := sim.Client().Create(ctx, sized("mem-refused", "2Gi"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("reservedMemory can't be equal or greater than limits.memory"))
}

// KubeVirt's own admission runs: its VMI mutator defaults what KubeVirt defaults (the machine
// type) and puts its finalizer on the VMI, which goes once the VM is deleted; its validator refuses
// what KubeVirt refuses and Harvester's webhook lets through; and only KubeVirt's service accounts
// may change a VMI's spec.
func TestKubeVirtAdmissionDefaultsAndRefuses(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, vm("kv-defaults", nil))).To(Succeed())
	defer deleteVM(t, "kv-defaults")
	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "kv-defaults")
		g.Expect(vmi.Finalizers).To(ContainElement(kubevirtv1.VirtualMachineInstanceFinalizer))
		g.Expect(vmi.Spec.Domain.Machine).NotTo(BeNil())
		g.Expect(vmi.Spec.Domain.Machine.Type).To(Equal("q35"))
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	}, settles).Should(Succeed())

	vmi := getVMI(NewWithT(t), "kv-defaults")
	changed := vmi.DeepCopy()
	changed.Spec.Hostname = "changed"
	err := sim.Client().Patch(ctx, changed, client.MergeFrom(vmi))
	g.Expect(err).To(MatchError(ContainSubstring("update of VMI object is restricted")))

	err = sim.Client().Create(ctx, vm("kv-refused", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.Spec.Domain.CPU.IsolateEmulatorThread = true
	}))
	g.Expect(err).To(MatchError(ContainSubstring("IsolateEmulatorThread should be only set in combination with DedicatedCPUPlacement")))
}
