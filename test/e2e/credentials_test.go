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
	"os"
	"path/filepath"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// guestCredential reads the guest's cloud-config as the ClusterResourceSet would deliver it.
func guestCredential(g Gomega, tc *testCluster) (kubeconfig []byte, token string, issued string) {
	secret := &corev1.Secret{}
	g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: controllers.CloudConfigSecretName(tc.Name)}, secret)).To(Succeed())
	g.Expect(string(secret.Type)).To(Equal("addons.cluster.x-k8s.io/resource-set"))
	g.Expect(secret.OwnerReferences).To(ContainElement(HaveField("Kind", "HarvesterCluster")))
	guestSecret := &corev1.Secret{}
	g.Expect(yaml.Unmarshal(secret.Data["harvester-cloud-config.yaml"], guestSecret)).To(Succeed())
	g.Expect(guestSecret.Namespace).To(Equal(harvester.GuestCloudConfigNamespace))
	return guestSecret.Data[harvester.GuestCloudConfigKey], string(guestSecret.Data[harvester.GuestTokenKey]),
		secret.Annotations["harvester.infrastructure.cluster.x-k8s.io/token-issued"]
}

// guestClient is a Harvester client with the guest's credential, reading the token from a file
// as the guest's cloud provider does.
func guestClient(kubeconfig []byte, token string) client.Client {
	api, err := clientcmd.Load(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	auth := api.AuthInfos[api.Contexts[api.CurrentContext].AuthInfo]
	Expect(auth.TokenFile).To(Equal(harvester.GuestCloudConfigDir + "/" + harvester.GuestTokenKey))
	Expect(auth.Token).To(BeEmpty(), "the token lives in its own file, so that renewals reach running readers")
	file := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(file, []byte(token), 0o600)).To(Succeed())
	auth.TokenFile = file
	cfg, err := clientcmd.NewDefaultClientConfig(*api, nil).ClientConfig()
	Expect(err).NotTo(HaveOccurred())
	// A request that never ends fails the spec that made it, not the whole suite's timeout.
	cfg.Timeout = time.Minute
	scheme, err := harvestersim.Scheme()
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = Describe("guest credentials", func() {
	It("are least-privilege, renewed before expiry and removed with the cluster", func() {
		// Harvester grants shorter tokens than asked: renewal follows the granted lifetime.
		testBed.Harvester.Faults.GrantTokenLifetime(9 * time.Second)
		DeferCleanup(func() { testBed.Harvester.Faults.GrantTokenLifetime(0) })
		tc := newTestCluster("creds", "creds")
		var kubeconfig []byte
		var token, issued string
		Eventually(func(g Gomega) { kubeconfig, token, issued = guestCredential(g, tc) }).Should(Succeed())
		Expect(token).NotTo(BeEmpty())

		sa := tc.guest().ServiceAccountName()
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: sa}, &corev1.ServiceAccount{})).To(Succeed())
		rb := &rbacv1.RoleBinding{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: sa}, rb)).To(Succeed())
		Expect(rb.RoleRef.Name).To(Equal(harvester.CloudProviderRole))
		crb := &rbacv1.ClusterRoleBinding{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: naming.CSIBindingName(tc.Target, sa)}, crb)).To(Succeed())
		Expect(crb.RoleRef.Name).To(Equal(harvester.CSIClusterRole))
		csi := &rbacv1.RoleBinding{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: harvester.CSIRoleBindingName(sa)}, csi)).To(Succeed())
		Expect(csi.RoleRef.Name).To(Equal(harvester.CSIVolumesRole), "the CSI driver's namespaced calls are bound in the target namespace only")

		By("using the minted credential against Harvester's real RBAC")
		c := guestClient(kubeconfig, token)
		// The apiserver's RBAC follows the bindings through a watch.
		Eventually(func() error { return c.List(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace(tc.Target)) }).Should(Succeed())
		Expect(c.List(ctx, &kubevirtv1.VirtualMachineInstanceList{}, client.InNamespace(tc.Target))).To(Succeed())
		lb := &lbv1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: "guest-svc",
			Annotations: map[string]string{harvestersim.AnnotationLBCluster: tc.guest().ID()}},
			Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.Cluster, IPAM: lbv1.DHCP}}
		Expect(c.Create(ctx, lb)).To(Succeed())
		Expect(c.Delete(ctx, lb)).To(Succeed())
		forbidden := func(err error) { ExpectWithOffset(1, apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err) }
		forbidden(c.List(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace("default")))
		forbidden(c.Create(ctx, &lbv1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guest-svc"},
			Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.Cluster, IPAM: lbv1.DHCP}}))
		forbidden(c.List(ctx, &corev1.NodeList{}))
		forbidden(c.List(ctx, &lbv1.IPPoolList{}))
		forbidden(c.List(ctx, &corev1.SecretList{}, client.InNamespace(tc.Target)))

		By("renewing the token after two thirds of the lifetime Harvester granted, by itself")
		Eventually(func(g Gomega) {
			_, newToken, newIssued := guestCredential(g, tc)
			g.Expect(newIssued).NotTo(Equal(issued))
			g.Expect(newToken).NotTo(Equal(token))
		}).Should(Succeed())

		deleteCluster(tc)
		leakFree(tc.Target)
		Eventually(func() error { return c.List(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace(tc.Target)) }).
			Should(Satisfy(func(err error) bool { return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) }),
				"the ServiceAccount and its bindings are gone")
	})
})
