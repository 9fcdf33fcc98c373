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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// providerIdentityClient is a Harvester client with the identity config/harvester documents,
// read through the manager's own kubeconfig policy.
func providerIdentityClient() client.Client {
	kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
	Expect(err).NotTo(HaveOccurred())
	cfg, err := transport.KubeconfigPolicy{}.RESTConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	// A request that never ends fails the spec that made it, not the whole suite's timeout.
	cfg.Timeout = time.Minute
	scheme, err := harvestersim.Scheme()
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func expectForbidden(err error, what string) {
	GinkgoHelper()
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: got %v", what, err)
}

var _ = Describe("The provider's Harvester identity", func() {
	It("writes, reads secrets and mints tokens only in namespaces it is bound in", func() {
		c := providerIdentityClient()
		const bound, unbound = "identity-bound", "identity-unbound"
		Expect(testBed.Harvester.AddTargetNamespace(ctx, bound)).To(Succeed())
		Expect(client.IgnoreAlreadyExists(harvesterClient().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unbound}}))).To(Succeed())

		for _, ns := range []string{bound, unbound} {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone"}}
			Expect(client.IgnoreAlreadyExists(harvesterClient().Create(ctx, sa))).To(Succeed())
			Expect(client.IgnoreAlreadyExists(harvesterClient().Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someones-secret"}, StringData: map[string]string{"k": "v"},
			}))).To(Succeed())
		}
		attempts := func(ns string) map[string]error {
			return map[string]error{
				"create Secret": c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}),
				"read Secret":   c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "someones-secret"}, &corev1.Secret{}),
				"mint a token": c.SubResource("token").Create(ctx,
					&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone"}}, &authenticationv1.TokenRequest{}),
				// KubeVirt's admission refuses a VM without a run strategy.
				"create VM": c.Create(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
					Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyHalted), Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
						Domain: minimalDomain(),
					}}}}),
				"list VMs": c.List(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace(ns)),
				"create load balancer": c.Create(ctx, &lbv1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
					// One listener: Harvester's webhook refuses a load balancer without one.
					Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.VM, IPAM: lbv1.DHCP,
						Listeners: []lbv1.Listener{{Name: "https", Port: 443, BackendPort: 6443, Protocol: corev1.ProtocolTCP}}}}),
				"bind the cloud-provider role": c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: harvester.CloudProviderRole},
					Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "someone"}}}),
			}
		}
		By("being denied everything in a namespace without the admin's RoleBinding")
		for what, err := range attempts(unbound) {
			expectForbidden(err, what)
		}
		By("being allowed the same in a target namespace (so the denials above are RBAC's, not the requests')")
		// The apiserver's RBAC follows the RoleBinding AddTargetNamespace made through a watch. A
		// create repeated after it went through finds its object: authorised, and admitted.
		Eventually(func(g Gomega) {
			for what, err := range attempts(bound) {
				g.Expect(client.IgnoreAlreadyExists(err)).NotTo(HaveOccurred(), what)
			}
		}).Should(Succeed())
		By("never reading Secrets of other namespaces, nor binding roles other than the guests'")
		expectForbidden(c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "anything"}, &corev1.Secret{}), "read a kube-system Secret")
		expectForbidden(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: bound, Name: "admin"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: bound, Name: "someone"}}}), "bind cluster-admin")

		By("managing only its own CSI bindings cluster-wide (admission policy)")
		ours := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: naming.CSIBindingName(bound, "someone")},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: harvester.CSIClusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: bound, Name: "someone"}}}
		Expect(c.Create(ctx, ours)).To(Succeed())
		Expect(c.Delete(ctx, ours)).To(Succeed())
		foreign := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: harvester.CSIClusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: bound, Name: "someone"}}}
		Expect(c.Create(ctx, foreign)).To(MatchError(ContainSubstring("capi-harvester-csi-")))
		Expect(harvesterClient().Create(ctx, foreign)).To(Succeed())
		Expect(c.Delete(ctx, foreign)).To(MatchError(ContainSubstring("capi-harvester-csi-")), "an admin's binding is not the provider's to delete")
		Expect(harvesterClient().Delete(ctx, foreign)).To(Succeed())
		toUser := ours.DeepCopy()
		toUser.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "mallory"}}
		Expect(c.Create(ctx, toUser)).To(MatchError(ContainSubstring("only bind")))
		By("no longer binding Harvester's CSI role cluster-wide, but removing such a binding of an earlier version")
		wide := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: harvester.LegacyCSIBindingName(bound, "someone")},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "harvesterhci.io:csi-driver"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: bound, Name: "someone"}}}
		expectForbidden(c.Create(ctx, wide), "bind Harvester's CSI role cluster-wide")
		Expect(harvesterClient().Create(ctx, wide)).To(Succeed())
		Expect(c.Delete(ctx, wide)).To(Succeed())
	})
})

var _ = Describe("A guest cluster's Harvester credential", func() {
	It("cannot draw addresses from another tenant's pool, and a legitimate load balancer is still served", func() {
		tc := newTestCluster("pool-isolation", "tenant-a")
		var kubeconfig []byte
		var token string
		Eventually(func(g Gomega) { kubeconfig, token, _ = guestCredential(g, tc) }).Should(Succeed())
		c := guestClient(kubeconfig, token)
		own := tc.guest().ID()

		By("a pool scoped to another tenant's guest cluster, in every namespace")
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: "tenant-b-only", Subnet: "10.99.0.0/24", RangeStart: "10.99.0.10", RangeEnd: "10.99.0.20",
			Namespace: "*", GuestCluster: "other.tenant-b", Priority: 100,
		})).To(Succeed())
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: "tenant-a-services", Subnet: "10.98.0.0/24", RangeStart: "10.98.0.10", RangeEnd: "10.98.0.20",
			Namespace: tc.Target, GuestCluster: own, Priority: testBed.Harvester.UniquePriority(),
		})).To(Succeed())
		DeferCleanup(func() {
			for _, name := range []string{"tenant-b-only", "tenant-a-services"} {
				Expect(harvesterClient().Delete(ctx, &lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
			}
		})
		guestLB := func(name string, edit func(lb *lbv1.LoadBalancer)) *lbv1.LoadBalancer {
			lb := &lbv1.LoadBalancer{
				ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: name, Annotations: map[string]string{harvestersim.AnnotationLBCluster: own}},
				Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.Cluster, IPAM: lbv1.Pool,
					Listeners: []lbv1.Listener{{Name: "http", Port: 80, BackendPort: 30080, Protocol: corev1.ProtocolTCP}}},
			}
			edit(lb)
			return lb
		}
		for _, a := range []struct {
			what     string
			messages []string // any of them: the apiserver reports one of the policies that deny
			edit     func(lb *lbv1.LoadBalancer)
		}{
			{"naming the pool in spec.ipPool", []string{"spec.ipPool"}, func(lb *lbv1.LoadBalancer) { lb.Spec.IPPool = "tenant-b-only" }},
			// '*' is not the guest's own name either: both policies deny it, in no set order.
			{"matching every pool with a '*' cluster", []string{"match every IP pool", "may only name itself"}, func(lb *lbv1.LoadBalancer) {
				lb.Annotations[harvestersim.AnnotationLBCluster] = "*"
			}},
			{"claiming to be the other tenant's cluster", []string{"may only name itself"}, func(lb *lbv1.LoadBalancer) {
				lb.Annotations[harvestersim.AnnotationLBCluster] = "other.tenant-b"
			}},
			{"naming no cluster at all", []string{"may only name itself"}, func(lb *lbv1.LoadBalancer) {
				delete(lb.Annotations, harvestersim.AnnotationLBCluster)
			}},
			// Harvester's controller takes an address already in the status as allocated: the
			// other tenant's pool and any address in it, another cluster's VIP say.
			{"forging an allocated address in the status", []string{"status"}, func(lb *lbv1.LoadBalancer) {
				lb.Status.AllocatedAddress = lbv1.AllocatedAddress{IPPool: "tenant-b-only", IP: "10.99.0.15"}
			}},
			{"forging only the address of the status", []string{"status"}, func(lb *lbv1.LoadBalancer) {
				lb.Status.Address = "10.99.0.15"
			}},
		} {
			By("refusing " + a.what)
			var anyOf []gomegatypes.GomegaMatcher
			for _, m := range a.messages {
				anyOf = append(anyOf, ContainSubstring(m))
			}
			err := c.Create(ctx, guestLB("attack", a.edit))
			Expect(err).To(HaveOccurred(), a.what)
			Expect(err.Error()).To(Or(anyOf...), a.what)
		}

		By("leaving another workload of the namespace alone (the upstream cloud provider, say): its own RBAC says what it may do, not the guests' policies")
		other, otherDone := otherWorkloadClient(tc.Target, rbacv1.PolicyRule{
			APIGroups: []string{"loadbalancer.harvesterhci.io"}, Resources: []string{"loadbalancers"}, Verbs: []string{"get", "create", "delete"},
		})
		unrelated := guestLB("unrelated", func(lb *lbv1.LoadBalancer) {
			lb.Spec.IPPool = "tenant-a-services"
			lb.Annotations[harvestersim.AnnotationLBCluster] = "*"
		})
		// A dry run goes through admission (the policies) and stores nothing: no address is taken
		// from the tenant's pool for it.
		Expect(other.Create(ctx, unrelated, client.DryRunAll)).To(Succeed(), "a pool and a '*' cluster, which only the provider's guests may not choose")
		otherDone()
		By("refusing the same change as an update of a legitimate load balancer")
		lb := guestLB("legit", func(*lbv1.LoadBalancer) {})
		Expect(c.Create(ctx, lb)).To(Succeed())
		Eventually(func(g Gomega) {
			latest := &lbv1.LoadBalancer{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lb), latest)).To(Succeed())
			latest.Spec.IPPool = "tenant-b-only"
			g.Expect(c.Update(ctx, latest)).To(MatchError(ContainSubstring("spec.ipPool")))
		}).Should(Succeed())
		By("refusing a changed status once Harvester allocated one, and an update that keeps it")
		Eventually(func(g Gomega) {
			latest := &lbv1.LoadBalancer{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lb), latest)).To(Succeed())
			g.Expect(latest.Status.AllocatedAddress.IP).NotTo(BeEmpty())
			forged := latest.DeepCopy()
			forged.Status.AllocatedAddress = lbv1.AllocatedAddress{IPPool: "tenant-b-only", IP: "10.99.0.15"}
			g.Expect(c.Update(ctx, forged)).To(MatchError(ContainSubstring("status")))
			latest.Spec.Description = "changed by the guest"
			g.Expect(c.Update(ctx, latest)).To(Succeed())
		}).Should(Succeed())

		By("serving the legitimate one from a pool it may use, never from the other tenant's")
		Eventually(func(g Gomega) {
			g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(lb), lb)).To(Succeed())
			g.Expect(lb.Status.AllocatedAddress.IP).NotTo(BeEmpty())
			g.Expect(lb.Status.AllocatedAddress.IPPool).To(Equal("tenant-a-services"))
		}).Should(Succeed())
		Expect(c.Delete(ctx, lb)).To(Succeed())
		deleteCluster(tc)
		leakFree(tc.Target)
	})
})

var _ = Describe("A target namespace the admin has not bound the identity in", func() {
	It("is reported as such, and works once bound", func() {
		const namespace, name = "unbound-target", "unbound"
		target := "h-" + namespace
		Expect(client.IgnoreAlreadyExists(harvesterClient().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}}))).To(Succeed())
		kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		hc := hostileCluster(namespace, name, kubeconfig)
		Eventually(func(g Gomega) {
			c := conditionOf(g, hc, infrav1.HarvesterAvailableCondition)
			g.Expect(c.Reason).To(Equal(infrav1.ForbiddenReason))
			g.Expect(c.Message).To(ContainSubstring("target-namespace.yaml"))
		}).Should(Succeed())

		By("working once the admin binds it, with the commands of docs/harvester-identity.md")
		admin, err := testBed.Harvester.Env.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		adminPath := filepath.Join(GinkgoT().TempDir(), "harvester-admin.yaml")
		Expect(os.WriteFile(adminPath, admin, 0o600)).To(Succeed())
		runDocumented(documentedBlock("harvester-identity.md", "set-up"), testenv.RepoRoot(),
			"KUBECONFIG="+adminPath, "TARGET_NAMESPACE="+target)
		Eventually(func(g Gomega) {
			c := conditionOf(g, hc, infrav1.HarvesterAvailableCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		By("a token and a kubeconfig for the identity, with the docs' commands: it may create VMs in the bound namespace")
		dir := GinkgoT().TempDir()
		out := runDocumented(documentedBlock("harvester-identity.md", "token")+documentedBlock("harvester-identity.md", "write-kubeconfig"), dir,
			"KUBECONFIG="+adminPath, "HARVESTER_API="+testBed.Harvester.Env.Config.Host, "TARGET_NAMESPACE="+target)
		Expect(strings.TrimSpace(out)).To(HaveSuffix("yes"))
		written, err := clientcmd.LoadFromFile(filepath.Join(dir, "harvester.kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		Expect(written.Clusters["harvester"].Server).To(Equal(testBed.Harvester.Env.Config.Host))
		Expect(written.Clusters["harvester"].CertificateAuthorityData).NotTo(BeEmpty(), "the CA is inline")
		Expect(written.AuthInfos["capi-harvester-provider"].Token).NotTo(BeEmpty(), "the token is inline")
		By("a token that lives as long as its Secret, filled by Kubernetes' token controller, with the docs' commands: it may create VMs too")
		legacyDir := GinkgoT().TempDir()
		out = runDocumented(documentedBlock("harvester-identity.md", "legacy-token")+documentedBlock("harvester-identity.md", "write-kubeconfig"), legacyDir,
			"KUBECONFIG="+adminPath, "HARVESTER_API="+testBed.Harvester.Env.Config.Host, "TARGET_NAMESPACE="+target)
		Expect(strings.TrimSpace(out)).To(HaveSuffix("yes"))
		legacy, err := clientcmd.LoadFromFile(filepath.Join(legacyDir, "harvester.kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		Expect(legacy.AuthInfos["capi-harvester-provider"].Token).NotTo(Or(BeEmpty(), Equal(written.AuthInfos["capi-harvester-provider"].Token)),
			"the Secret's token, not the TokenRequest one")
		tokenSecret := &corev1.Secret{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: "capi-harvester", Name: "capi-harvester-provider-token"}, tokenSecret)).To(Succeed())
		Expect(string(tokenSecret.Data["token"])).To(Equal(legacy.AuthInfos["capi-harvester-provider"].Token))
		Expect(harvesterClient().Delete(ctx, tokenSecret)).To(Succeed())

		By("the kubeconfig goes into a Secret of the cluster's namespace that clusterctl move carries, with the docs' commands")
		management, err := testBed.Management.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "management.yaml"), management, 0o600)).To(Succeed())
		runDocumented(documentedBlock("harvester-identity.md", "identity-secret"), dir,
			"KUBECONFIG="+filepath.Join(dir, "management.yaml"), "NAMESPACE="+namespace)
		secret := &corev1.Secret{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: namespace, Name: "harvester-identity"}, secret)).To(Succeed())
		Expect(secret.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
		Expect(clientcmd.Load(secret.Data[infrav1.IdentitySecretKey])).To(HaveField("AuthInfos", HaveKey("capi-harvester-provider")))
		Expect(mgmt().Delete(ctx, secret)).To(Succeed())

		Expect(mgmt().Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)) }).Should(BeTrue())
		leakFree(target)
	})
})

var _ = Describe("A guest cluster's CSI credential", func() {
	// Harvester's harvesterhci.io:csi-driver role allows `patch` on VMs and every verb on
	// snapshots, file systems and remote backups and restores. Bound cluster-wide (as Harvester's
	// own kubeconfig generator does it) it reaches every tenant; the provider binds instead the
	// driver's own calls (capi-harvester-guest-csi-volumes) in the target namespace only, and
	// admission policies keep a guest to hot-plugging volumes into its own VMs and restoring its
	// own backups.
	It("hot-plugs volumes into its own VMs only, and reaches no other namespace", func() {
		tc := newTestCluster("csi-reach", "csi-reach")
		var kubeconfig []byte
		var token string
		Eventually(func(g Gomega) { kubeconfig, token, _ = guestCredential(g, tc) }).Should(Succeed())
		c := guestClient(kubeconfig, token)

		By("being allowed what the CSI driver does in its namespace, and nothing of it elsewhere (RBAC)")
		can := func(verb, group, resource, namespace string) bool {
			GinkgoHelper()
			resource, subresource, _ := strings.Cut(resource, "/")
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: subresource, Namespace: namespace},
			}}
			Expect(c.Create(ctx, review)).To(Succeed())
			return review.Status.Allowed
		}
		for _, r := range []struct{ verb, group, resource string }{
			{"patch", "kubevirt.io", "virtualmachines"},
			{"create", "", "persistentvolumeclaims"},
			{"create", "snapshot.storage.k8s.io", "volumesnapshots"},
			{"create", "harvesterhci.io", "volumeremotebackups"},
			{"create", "harvesterhci.io", "volumeremoterestores"},
			{"create", "loadbalancer.harvesterhci.io", "loadbalancers"},
		} {
			Expect(can(r.verb, r.group, r.resource, tc.Target)).To(BeTrue(), "%s %s in its own namespace", r.verb, r.resource)
			for _, other := range []string{"default", "h-someone-else", "harvester-system"} {
				Expect(can(r.verb, r.group, r.resource, other)).To(BeFalse(), "%s %s in %s", r.verb, r.resource, other)
			}
		}
		Expect(can("get", "storage.k8s.io", "storageclasses", "")).To(BeTrue(), "the driver reads a StorageClass it names")
		By("and refused, even in its namespace, what Harvester's own roles grant but neither its CCM nor its CSI driver calls")
		for _, r := range []struct{ verb, group, resource, namespace string }{
			{"update", "subresources.kubevirt.io", "virtualmachines/addvolume", tc.Target},
			{"update", "subresources.kubevirt.io", "virtualmachineinstances/removevolume", tc.Target},
			{"update", "kubevirt.io", "virtualmachines", tc.Target},
			{"update", "", "persistentvolumeclaims/status", tc.Target},
			{"watch", "", "persistentvolumeclaims", tc.Target},
			{"get", "", "pods", tc.Target},
			{"update", "harvesterhci.io", "networkfilesystems", "harvester-system"},
			{"list", "harvesterhci.io", "volumeremotebackups", ""},
			{"list", "storage.k8s.io", "storageclasses", ""},
		} {
			Expect(can(r.verb, r.group, r.resource, r.namespace)).To(BeFalse(), "%s %s in %q", r.verb, r.resource, r.namespace)
		}

		By("restoring a volume only from a backup of its own namespace (Harvester's own validator takes any)")
		restore := func(c client.Client, namespace, from string) error {
			vrr := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "harvesterhci.io/v1beta1", "kind": "VolumeRemoteRestore",
				"metadata": map[string]any{"namespace": namespace, "name": "restored"},
				"spec":     map[string]any{"type": "lh", "from": from},
			}}
			return c.Create(ctx, vrr, client.DryRunAll)
		}
		const foreign = "may restore only backups of its own namespace"
		Expect(restore(c, tc.Target, "h-someone-else/nightly")).To(MatchError(ContainSubstring(foreign)), "another namespace's backup")
		for _, from := range []string{tc.Target + "/nightly", "nightly"} {
			// Harvester's validator may still refuse it (the backup does not exist), not the policy.
			if err := restore(c, tc.Target, from); err != nil {
				Expect(err.Error()).NotTo(ContainSubstring(foreign), "a backup of its own namespace, as %q", from)
			}
		}

		By("making volumes only as the CSI driver does: no image's class, no existing volume")
		volume := func(edit func(*corev1.PersistentVolumeClaim)) error {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: "pvc-guest"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					VolumeMode:  ptr.To(corev1.PersistentVolumeBlock),
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			edit(pvc)
			return c.Create(ctx, pvc, client.DryRunAll)
		}
		for what, edit := range map[string]func(*corev1.PersistentVolumeClaim){
			"a legacy image class": func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr.To("longhorn-ubuntu-noble") },
			"an image class":       func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr.To("lh-0f3a9c2e") },
			"an existing volume":   func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeName = "pvc-of-someone-else" },
			"the provider's label": func(p *corev1.PersistentVolumeClaim) {
				p.Labels = map[string]string{naming.LabelManagedBy: naming.ManagedByValue}
			},
			"a cluster label": func(p *corev1.PersistentVolumeClaim) {
				p.Labels = map[string]string{naming.LabelCluster: tc.guest().ID()}
			},
			"an image class by the old annotation": func(p *corev1.PersistentVolumeClaim) {
				p.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "lh-0f3a9c2e"}
			},
			"no class at all": func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr.To("") },
			"a clone of a volume": func(p *corev1.PersistentVolumeClaim) {
				p.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "pvc-of-another-guest"}
			},
			"a selected volume": func(p *corev1.PersistentVolumeClaim) {
				p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "b"}}
			},
		} {
			err := volume(edit)
			Expect(err).To(HaveOccurred(), what)
			Expect(err.Error()).To(ContainSubstring("capi-harvester-guest-volumes"), what)
		}
		// What the driver makes: a class by name (Harvester's default here), perhaps from a
		// snapshot of its own namespace. Another admission step may still refuse a dry run; the
		// policy does not.
		for what, edit := range map[string]func(*corev1.PersistentVolumeClaim){
			"a plain class": func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr.To("harvester-longhorn") },
			"its own snapshot": func(p *corev1.PersistentVolumeClaim) {
				p.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "nightly"}
			},
		} {
			if err := volume(edit); err != nil {
				Expect(err.Error()).NotTo(ContainSubstring("capi-harvester-guest-volumes"), what)
			}
		}

		By("a VM of its own cluster and one of another cluster sharing the target namespace")
		vm := func(name, cluster string) *kubevirtv1.VirtualMachine {
			return &kubevirtv1.VirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: name, Labels: map[string]string{naming.LabelCluster: cluster}},
				Spec: kubevirtv1.VirtualMachineSpec{
					RunStrategy: ptr.To(kubevirtv1.RunStrategyHalted),
					Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
						Domain: func() kubevirtv1.DomainSpec {
							d := minimalDomain()
							d.Devices = kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "cloudinitdisk"}}}
							return d
						}(),
						Volumes: []kubevirtv1.Volume{{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{
							CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: name + "-cloudinit"}},
						}}},
					}},
				},
			}
		}
		own := vm("own", tc.guest().ID())
		// Another management cluster's cluster of the same namespace and name: only the owner mark
		// differs.
		theirs := vm("theirs", naming.Guest{Namespace: tc.Namespace, Name: tc.Name, Mark: "0000000000"}.ID())
		for _, v := range []*kubevirtv1.VirtualMachine{own, theirs} {
			Expect(harvesterClient().Create(ctx, v)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(harvesterClient().Delete(ctx, v))).To(Succeed()) })
		}
		// The CSI driver's own patch (harvester-csi-driver, Harvester v1.8 and later).
		hotplug := client.RawPatch(types.JSONPatchType, []byte(`[
			{"op":"add","path":"/spec/template/spec/volumes/-","value":{"name":"pvc-1","persistentVolumeClaim":{"claimName":"pvc-1","hotpluggable":true}}},
			{"op":"add","path":"/spec/template/spec/domain/devices/disks/-","value":{"name":"pvc-1","disk":{"bus":"scsi"}}}]`))

		By("hot-plugging a volume into its own VM")
		Expect(c.Patch(ctx, own.DeepCopy(), hotplug)).To(Succeed())
		Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
		Expect(own.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Name", "pvc-1")))
		By("and removing it again, as the driver does (the lists replaced, filtered)")
		Expect(c.Patch(ctx, own.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[
			{"op":"replace","path":"/spec/template/spec/volumes","value":[{"name":"cloudinitdisk","cloudInitNoCloud":{"secretRef":{"name":"own-cloudinit"}}}]},
			{"op":"replace","path":"/spec/template/spec/domain/devices/disks","value":[{"name":"cloudinitdisk"}]}]`)))).To(Succeed())

		By("refusing every other change to its own VM")
		for what, patch := range map[string]string{
			"start it":                             `[{"op":"replace","path":"/spec/runStrategy","value":"Always"}]`,
			"swap its cloud-init Secret":           `[{"op":"replace","path":"/spec/template/spec/volumes/0/cloudInitNoCloud/secretRef/name","value":"mine"}]`,
			"add a volume that is not hot-plugged": `[{"op":"add","path":"/spec/template/spec/volumes/-","value":{"name":"x","persistentVolumeClaim":{"claimName":"x"}}}]`,
			"relabel it":                           `[{"op":"add","path":"/metadata/labels/extra","value":"x"}]`,
			"hold its deletion with a finalizer":   `[{"op":"add","path":"/metadata/finalizers","value":["example.com/hold"]}]`,
			"give it more memory":                  `[{"op":"add","path":"/spec/template/spec/domain/memory","value":{"guest":"64Gi"}}]`,
		} {
			err := c.Patch(ctx, own.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(patch)))
			Expect(err).To(HaveOccurred(), what)
			Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
		}

		By("refusing a change of any other field of KubeVirt's, named or not (the policy compares every one)")
		// KubeVirt's own webhook refuses some fields (serviceAccountName) before the policy sees
		// them; these it lets through.
		for what, patch := range map[string]string{
			"its grace period":   `[{"op":"add","path":"/spec/template/spec/terminationGracePeriodSeconds","value":1}]`,
			"its clock":          `[{"op":"add","path":"/spec/template/spec/domain/clock","value":{"utc":{}}}]`,
			"its serial console": `[{"op":"add","path":"/spec/template/spec/domain/devices/autoattachSerialConsole","value":false}]`,
			"its DNS policy":     `[{"op":"add","path":"/spec/template/spec/dnsPolicy","value":"Default"}]`,
		} {
			err := c.Patch(ctx, own.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(patch)))
			Expect(err).To(MatchError(ContainSubstring("or any other field but its hot-plugged volumes")), what)
		}

		By("refusing a change of the annotations that steer the provider, and leaving others alone")
		// stopped-for-host makes the provider start the VM again after a host's maintenance,
		// run-strategy-before-stop says with which run strategy; it reads Harvester's run strategy
		// of a VM Harvester halted.
		for _, key := range []string{naming.AnnotationStoppedForHost, naming.AnnotationRunStrategyBeforeStop, "harvester.infrastructure.cluster.x-k8s.io/any-other", "harvesterhci.io/vmRunStrategy"} {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"Always"}}}`, key)
			err := c.Patch(ctx, own.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
			Expect(err).To(MatchError(ContainSubstring("may not change the provider's annotations")), key)
		}
		Expect(c.Patch(ctx, own.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/note":"x"}}}`)))).
			To(Succeed(), "an annotation that steers nothing of ours")

		By("refusing the other cluster's VM, even a patch that changes nothing (it would return the VM)")
		for what, patch := range map[string]client.Patch{
			"hot-plug into it": hotplug,
			"read it":          client.RawPatch(types.MergePatchType, []byte(`{}`)),
		} {
			read := theirs.DeepCopy()
			read.Spec = kubevirtv1.VirtualMachineSpec{}
			err := c.Patch(ctx, read, patch)
			Expect(err).To(MatchError(ContainSubstring("only change its own VMs")), what)
			Expect(read.Spec.Template).To(BeNil(), "%s: nothing of the VM came back", what)
		}

		By("refusing a VM of another namespace, which the guest cannot even read (RBAC)")
		elsewhere := vm("elsewhere", naming.Guest{Namespace: "someone-else", Name: "prod"}.ID())
		elsewhere.Namespace = "default"
		Expect(harvesterClient().Create(ctx, elsewhere)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(harvesterClient().Delete(ctx, elsewhere))).To(Succeed()) })
		expectForbidden(c.Get(ctx, client.ObjectKeyFromObject(elsewhere), &kubevirtv1.VirtualMachine{}), "read a VM of another namespace")
		read := elsewhere.DeepCopy()
		read.Spec = kubevirtv1.VirtualMachineSpec{}
		expectForbidden(c.Patch(ctx, read, client.RawPatch(types.MergePatchType, []byte(`{}`))), "read a VM of another namespace by a no-op patch")
		Expect(read.Spec.Template).To(BeNil())
		expectForbidden(c.Patch(ctx, elsewhere.DeepCopy(), hotplug), "hot-plug into a VM of another namespace")

		By("leaving another workload of the namespace alone: its own RBAC says what it may do to VMs, not the guests' policies")
		other, otherDone := otherWorkloadClient(tc.Target, rbacv1.PolicyRule{
			APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "patch"},
		})
		for _, change := range []struct {
			what  string
			vm    *kubevirtv1.VirtualMachine
			patch string
		}{
			{"relabel a guest's VM", own, `{"metadata":{"labels":{"extra":"x"}}}`},
			{"annotate it as the provider would", own, `{"metadata":{"annotations":{"harvester.infrastructure.cluster.x-k8s.io/any-other":"x"}}}`},
			{"relabel the other cluster's VM", theirs, `{"metadata":{"labels":{"extra":"y"}}}`},
		} {
			Expect(other.Patch(ctx, change.vm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(change.patch)))).To(Succeed(), change.what)
		}
		otherDone()
		restorer, restorerDone := otherWorkloadClient(tc.Target, rbacv1.PolicyRule{
			APIGroups: []string{"harvesterhci.io"}, Resources: []string{"volumeremoterestores"}, Verbs: []string{"create"},
		})
		if err := restore(restorer, tc.Target, "h-someone-else/nightly"); err != nil {
			Expect(err.Error()).NotTo(ContainSubstring(foreign), "another workload's restore is its own RBAC's business")
		}
		restorerDone()
	})
})

// otherWorkloadClient is a client of a ServiceAccount of namespace on Harvester that the provider
// did not make (the upstream cloud provider's or CSI driver's, for instance), allowed rules
// there by a Role of its own; done deletes all of it (as the spec's end does, if not called).
func otherWorkloadClient(namespace string, rules ...rbacv1.PolicyRule) (c client.Client, done func()) {
	GinkgoHelper()
	h := harvesterClient()
	meta := metav1.ObjectMeta{Namespace: namespace, Name: "other-workload"}
	sa := &corev1.ServiceAccount{ObjectMeta: meta}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: meta.Name}}}
	objects := []client.Object{sa, role, binding}
	done = func() {
		for _, o := range objects {
			Expect(client.IgnoreNotFound(h.Delete(ctx, o))).To(Succeed())
		}
	}
	for _, o := range objects {
		Expect(h.Create(ctx, o)).To(Succeed())
	}
	DeferCleanup(done)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(h.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	cfg := rest.AnonymousClientConfig(testBed.Harvester.Env.Config)
	cfg.BearerToken = tr.Status.Token
	cfg.Timeout = time.Minute
	scheme, err := harvestersim.Scheme()
	Expect(err).NotTo(HaveOccurred())
	c, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c, done
}

// minimalDomain is the least a VM needs for Harvester v1.8's webhook to take it: a memory limit
// (its validator refuses a VM without one) and a cpu section (its mutator's patch replaces
// cpu.maxSockets, which the apiserver cannot apply to a VM without one).
func minimalDomain() kubevirtv1.DomainSpec {
	return kubevirtv1.DomainSpec{
		CPU:       &kubevirtv1.CPU{Cores: 1},
		Resources: kubevirtv1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}
}
