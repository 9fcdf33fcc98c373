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

// Package realharvester is the opt-in end-to-end suite against a real Harvester:
// `make e2e-harvester HARVESTER_KUBECONFIG=... HARVESTER_NETWORK=... HARVESTER_IMAGE=...`.
// The management cluster is the same envtest apiserver with CAPI's core controllers and this
// provider's as in the simulated suites; only the Harvester is real. Without
// HARVESTER_KUBECONFIG it is skipped, which is how `make test` runs it.
package realharvester

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// settings are what the suite needs to know about the Harvester under test.
type settings struct {
	kubeconfig []byte // an admin's: the suite sets up the restricted identity itself
	network    string // namespace/name of a VM network with a matching IP pool (or DHCP)
	image      string // namespace/name of a cloud image with cloud-init and qemu-guest-agent
	ipam       string // pool (default) or dhcp
}

func settingsFromEnv(t *testing.T) settings {
	path := os.Getenv("HARVESTER_KUBECONFIG")
	if path == "" {
		t.Skip("no HARVESTER_KUBECONFIG: the suite against a real Harvester is opt-in (make e2e-harvester)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading HARVESTER_KUBECONFIG: %v", err)
	}
	s := settings{kubeconfig: data, network: os.Getenv("HARVESTER_NETWORK"), image: os.Getenv("HARVESTER_IMAGE"),
		ipam: os.Getenv("HARVESTER_LB_IPAM")}
	if s.network == "" || s.image == "" {
		t.Fatal("HARVESTER_NETWORK and HARVESTER_IMAGE (namespace/name) are required with HARVESTER_KUBECONFIG")
	}
	if s.ipam == "" {
		s.ipam = string(infrav1.IPAMPool)
	}
	return s
}

// The cluster-level assertions of the simulated suites, on a real Harvester, under the
// restricted identity: connection and version, failure domains, a control-plane load balancer
// with an address as the endpoint, the guest's credential issued, a VM that boots and reports
// its addresses, and nothing left after deletion. (No guest cluster: the VM's bootstrap data
// only echoes; kubeadm and the CCM are covered by the simulated suites.)
func TestRealHarvester(t *testing.T) {
	run(t, settingsFromEnv(t))
}

// The suite's own code runs in `make test` too, against the simulated Harvester through an
// admin kubeconfig, so that it does not rot between the runs someone makes on real hardware.
func TestSuiteOnTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, err := harvestersim.Start(ctx, harvestersim.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(sim.Stop()).To(Succeed()) })
	kubeconfig, err := sim.Env.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	run(t, settings{kubeconfig: kubeconfig, network: "default/vlan10", image: "default/ubuntu-24.04", ipam: string(infrav1.IPAMPool)})
}

func run(t *testing.T, s settings) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(10 * time.Minute)
	g.SetDefaultEventuallyPollingInterval(2 * time.Second)
	ctx := context.Background()

	admin, err := adminClient(s.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	// A namespace of its own on Harvester, so that the leak check sees only this run's objects.
	target := "capi-e2e-" + rand.String(5)
	g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}})).To(Succeed())
	t.Cleanup(func() { _ = admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}}) })
	identity, err := restrictedIdentity(ctx, admin, s.kubeconfig, target)
	g.Expect(err).NotTo(HaveOccurred())

	mgmt, err := testenv.StartManagement()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mgmt.Stop() })
	clusterCache, err := testenv.AddCAPICore(ctx, mgmt)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if s, ok := clusterCache.(interface{ Shutdown() }); ok {
			s.Shutdown()
		}
	})
	g.Expect(controllers.Setup(ctx, mgmt.Manager, controllers.Options{
		ClusterConcurrency: 2, MachineConcurrency: 2, HarvesterQPS: 20, HarvesterBurst: 30, SkipNameValidation: true,
	})).To(Succeed())
	g.Expect(mgmt.StartManager(ctx)).To(Succeed())
	c := mgmt.Client

	const namespace, name = "e2e", "real"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-identity"},
		Data:       map[string][]byte{infrav1.IdentitySecretKey: identity},
	})).To(Succeed())
	hc := &infrav1.HarvesterCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: infrav1.HarvesterClusterSpec{
			IdentitySecret:  infrav1.SecretReference{Name: name + "-identity"},
			TargetNamespace: target,
			LoadBalancer:    infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMMode(s.ipam), Network: s.network},
		},
	}
	g.Expect(c.Create(ctx, hc)).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name}},
	}
	g.Expect(c.Create(ctx, cluster)).To(Succeed())

	t.Log("the cluster's infrastructure: connection, failure domains, load balancer, credentials")
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
		g.Expect(ptr.Deref(hc.Status.Initialization.Provisioned, false)).To(BeTrue(), "conditions: %v", hc.Status.Conditions)
	}).Should(Succeed())
	g.Expect(hc.Status.HarvesterVersion).NotTo(BeEmpty())
	g.Expect(hc.Status.FailureDomains).NotTo(BeEmpty())
	g.Expect(hc.Spec.ControlPlaneEndpoint.Host).NotTo(BeEmpty())
	g.Expect(conditions.IsTrue(hc, infrav1.GuestCredentialsReadyCondition)).To(BeTrue())

	t.Log("a machine: its VM boots and reports addresses")
	bootstrap := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Type:       clusterv1.ClusterSecretType,
		Data: map[string][]byte{"format": []byte("cloud-config"),
			"value": []byte("#cloud-config\nruncmd:\n- echo capi-harvester-e2e\n")},
	}
	g.Expect(c.Create(ctx, bootstrap)).To(Succeed())
	hm := &infrav1.HarvesterMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-0", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec: infrav1.HarvesterMachineSpec{CPU: 2, Memory: resource.MustParse("4Gi"),
			Disks:    []infrav1.Disk{{Image: s.image, Size: resource.MustParse("20Gi")}},
			Networks: []infrav1.Network{{NetworkName: s.network}}},
	}
	g.Expect(c.Create(ctx, hm)).To(Succeed())
	g.Expect(c.Create(ctx, &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-0", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec: clusterv1.MachineSpec{ClusterName: name, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap.Name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachine", Name: hm.Name}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(hm), hm)).To(Succeed())
		g.Expect(ptr.Deref(hm.Status.Initialization.Provisioned, false)).To(BeTrue(), "conditions: %v", hm.Status.Conditions)
	}).Should(Succeed())
	g.Expect(hm.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
	g.Expect(hm.Status.Addresses).NotTo(BeEmpty())

	t.Log("deleting the Cluster leaves nothing on Harvester")
	g.Expect(c.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
	}).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		leaks, err := bed.LeakCheck(ctx, admin, target)
		g.Expect(err).NotTo(HaveOccurred())
		// Harvester gives every namespace a default ServiceAccount (the simulator does not).
		for _, leak := range leaks {
			g.Expect(leak).To(Equal("ServiceAccount " + target + "/default"))
		}
	}).Should(Succeed())
}

func adminClient(kubeconfig []byte) (client.Client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("HARVESTER_KUBECONFIG: %w", err)
	}
	scheme, err := guestcloud.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// restrictedIdentity applies the provider's documented identity (config/harvester:
// provider-identity.yaml, admission-policies.yaml, and target-namespace.yaml in target) and
// returns a kubeconfig for it, on the admin kubeconfig's server: the provider runs with exactly
// the rights users give it.
func restrictedIdentity(ctx context.Context, admin client.Client, adminKubeconfig []byte, target string) ([]byte, error) {
	var sa *corev1.ServiceAccount
	for _, f := range []struct{ file, namespace string }{
		{"provider-identity.yaml", ""}, {"admission-policies.yaml", ""}, {"target-namespace.yaml", target},
	} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "harvester", f.file))
		if err != nil {
			return nil, err
		}
		objs, err := testenv.DecodeObjects(data)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if f.namespace != "" {
				o.SetNamespace(f.namespace)
			}
			if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
			}
			if o.GetKind() == "ServiceAccount" {
				sa = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName()}}
			}
		}
	}
	if sa == nil {
		return nil, fmt.Errorf("provider-identity.yaml has no ServiceAccount")
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := admin.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("requesting a token for %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	raw, err := clientcmd.Load(adminKubeconfig)
	if err != nil {
		return nil, err
	}
	current := raw.Contexts[raw.CurrentContext]
	if current == nil || raw.Clusters[current.Cluster] == nil {
		return nil, fmt.Errorf("HARVESTER_KUBECONFIG has no current context")
	}
	server := raw.Clusters[current.Cluster]
	if strings.Contains(server.Server, "/k8s/clusters/") {
		return nil, fmt.Errorf("HARVESTER_KUBECONFIG goes through Rancher (%s): a Harvester token is not valid there; use Harvester's own kubeconfig", server.Server)
	}
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"harvester": {Server: server.Server, CertificateAuthorityData: server.CertificateAuthorityData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{sa.Name: {Token: tr.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"harvester": {Cluster: "harvester", AuthInfo: sa.Name}},
		CurrentContext: "harvester",
	})
}
