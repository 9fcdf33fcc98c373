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
	"crypto/rand"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
)

// testCluster is a guest cluster's objects in the management cluster.
type testCluster struct {
	Namespace, Name, Target string
	Cluster                 *clusterv1.Cluster
	HarvesterCluster        *infrav1.HarvesterCluster
	Guest                   *guest.Cluster
	Bootstrap               *corev1.Secret
}

func mgmt() client.Client { return testBed.Management.Client }

// guest names the cluster on Harvester, with the owner mark its HarvesterCluster recorded.
func (tc *testCluster) guest() naming.Guest {
	g, ok := naming.GuestOf(tc.HarvesterCluster, tc.Name)
	Expect(ok).To(BeTrue(), "the HarvesterCluster has recorded its owner mark")
	return g
}

func harvesterClient() client.Client { return testBed.Harvester.Client() }

// newTestCluster creates the namespaces (management and Harvester), the identity Secret (the
// restricted identity), the HarvesterCluster and Cluster, the guest control plane, and static bootstrap data, and waits
// for the cluster's infrastructure to be provisioned.
func newTestCluster(namespace, name string, sharedTarget ...string) *testCluster {
	kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
	Expect(err).NotTo(HaveOccurred())
	return newTestClusterWith(kubeconfig, namespace, name, sharedTarget...)
}

// newTestClusterWith is newTestCluster with the given identity kubeconfig.
func newTestClusterWith(kubeconfig []byte, namespace, name string, sharedTarget ...string) *testCluster {
	// Each test has its own namespace on Harvester too, so that LeakCheck sees only its objects.
	target := "h-" + namespace
	if len(sharedTarget) > 0 {
		target = sharedTarget[0]
	}
	tc := &testCluster{Namespace: namespace, Name: name, Target: target}
	Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
	// The guest (and its kubeconfig Secret) first, as a real control plane answers before CAPI
	// looks for it.
	var err error
	tc.Guest, err = testBed.AddGuest(ctx, namespace, name, false)
	Expect(err).NotTo(HaveOccurred())
	// At the test's end (after its own clean-ups, which run first): the Cluster is deleted
	// without waiting, as the suite's end would delete it, and the guest stops, as its control
	// plane would with its VMs. Kept until the suite's end, 35 tests' guests held about a
	// core and 8 GiB, and late tests' apiservers timed out starting.
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(mgmt().Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}))).To(Succeed())
		Expect(testBed.StopGuest(tc.Guest)).To(Succeed())
	})
	identity := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-identity",
			Labels: map[string]string{"clusterctl.cluster.x-k8s.io/move": ""}},
		Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig},
	}
	Expect(mgmt().Create(ctx, identity)).To(Succeed())
	tc.HarvesterCluster = &infrav1.HarvesterCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: infrav1.HarvesterClusterSpec{
			IdentitySecret:  infrav1.SecretReference{Name: identity.Name},
			TargetNamespace: target,
			LoadBalancer:    infrav1.LoadBalancerSpec{Network: "default/vlan10"},
		},
	}
	Expect(mgmt().Create(ctx, tc.HarvesterCluster)).To(Succeed())
	tc.Cluster = &clusterv1.Cluster{
		// The addons label, as the cluster templates set it.
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{infrav1.AddonsLabel: name}},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name,
			},
		},
	}
	Expect(mgmt().Create(ctx, tc.Cluster)).To(Succeed())

	// Bounded by progress: the suite's first clusters are made while the bed and the package
	// tests still load the machine, and a first connection to Harvester and a first load
	// balancer then took more than two minutes (CI, the RBAC spec first in its shard).
	waitProgressing("the cluster's infrastructure provisioned", tc.state, func(g Gomega) {
		g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed())
		g.Expect(tc.Cluster.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)))
	})
	Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), tc.HarvesterCluster)).To(Succeed())

	tc.Bootstrap = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bootstrap",
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{
			"value":  bootstrapData(namespace, name),
			"format": []byte("cloud-config"),
		},
	}
	Expect(mgmt().Create(ctx, tc.Bootstrap)).To(Succeed())
	return tc
}

func machineSpec() infrav1.HarvesterMachineSpec {
	return infrav1.HarvesterMachineSpec{
		CPU: 2, Memory: resource.MustParse("4Gi"),
		Disks: []infrav1.Disk{
			{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")},
			{Name: "data", StorageClassName: "harvester-longhorn", Size: resource.MustParse("10Gi")},
		},
		Networks:    []infrav1.Network{{NetworkName: "default/vlan10"}, {NetworkName: "default/vlan20"}},
		SSHKeyPairs: []string{"default/ops"},
	}
}

// machineDeployment creates a HarvesterMachineTemplate and a MachineDeployment of replicas.
func (tc *testCluster) machineDeployment(name, template string, replicas int32, spec infrav1.HarvesterMachineSpec) *clusterv1.MachineDeployment {
	Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &infrav1.HarvesterMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: template},
		Spec:       infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: spec}},
	}))).To(Succeed())
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: name},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: tc.Name,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": name}},
				Spec: clusterv1.MachineSpec{
					ClusterName: tc.Name,
					Version:     "v1.35.4",
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(tc.Bootstrap.Name)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachineTemplate", Name: template,
					},
				},
			},
		},
	}
	Expect(mgmt().Create(ctx, md)).To(Succeed())
	return md
}

// leakFree waits until nothing of the target namespace is left on Harvester, as long as what is
// left keeps going.
func leakFree(target string) {
	GinkgoHelper()
	var leaks []string
	waitProgressing("nothing of "+target+" left on Harvester", func() string { return fmt.Sprint(leaks) }, func(g Gomega) {
		var err error
		leaks, err = testBed.LeakCheck(ctx, target)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leaks).To(BeEmpty())
	})
}

// controlPlaneMachine creates a Machine labelled as control plane, with its HarvesterMachine: no
// control-plane provider runs in these tests, and CAPI counts the control plane as initialised
// once such a Machine has a Node.
func (tc *testCluster) controlPlaneMachine(name string) *clusterv1.Machine {
	return tc.controlPlaneMachineWith(name, machineSpec())
}

// controlPlaneMachineWith is controlPlaneMachine with a spec of the test's.
func (tc *testCluster) controlPlaneMachineWith(name string, spec infrav1.HarvesterMachineSpec) *clusterv1.Machine {
	Expect(mgmt().Create(ctx, &infrav1.HarvesterMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: tc.Name}},
		Spec:       spec,
	})).To(Succeed())
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: name, Labels: map[string]string{
			clusterv1.ClusterNameLabel: tc.Name, clusterv1.MachineControlPlaneLabel: "",
		}},
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
	return m
}

// bootstrapData is a machine's bootstrap cloud-config for the cluster namespace/name. Like a real
// bootstrap provider's (a join token, the cluster's CA), it is this cluster's alone: the node
// agent finds a VM's guest by the bootstrap data its user data carries, and two clusters of one
// name (in two namespaces or two management clusters) must not take each other's VMs as their
// Nodes.
func bootstrapData(namespace, name string) []byte {
	return []byte("#cloud-config\nwrite_files:\n- path: /etc/join.conf\n  content: cluster=" + namespace + "/" + name +
		" token=" + rand.Text() + "\nruncmd:\n- echo joining " + namespace + "/" + name + "\n")
}
