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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

var _ = Describe("A HarvesterClusterIdentity", func() {
	// The platform admin lends a Harvester identity whose kubeconfig tenants cannot read (its
	// Secret is in the provider's namespace), to the management namespaces and Harvester
	// namespaces it lists.
	It("serves only the namespaces and target namespaces it allows, and stops serving one taken out", func() {
		kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testBed.Provider.Namespace, Name: "tenants-identity"},
			Data:       map[string][]byte{infrav1.IdentitySecretKey: kubeconfig},
		}
		Expect(mgmt().Create(ctx, secret)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt().Delete(ctx, secret))).To(Succeed()) })
		for _, target := range []string{"h-idt-a", "h-idt-other"} {
			Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
		}
		identity := &infrav1.HarvesterClusterIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: "tenants"},
			Spec: infrav1.HarvesterClusterIdentitySpec{
				SecretName:        secret.Name,
				AllowedNamespaces: &infrav1.AllowedNamespaces{NamespaceList: []string{"idt-a"}},
				TargetNamespaces:  []string{"h-idt-a"},
			},
		}
		Expect(mgmt().Create(ctx, identity)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt().Delete(ctx, identity))).To(Succeed()) })

		using := func(namespace, name, target string) *infrav1.HarvesterCluster {
			Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
			hc := &infrav1.HarvesterCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				Spec: infrav1.HarvesterClusterSpec{
					IdentityRef:     &infrav1.IdentityReference{Kind: infrav1.HarvesterClusterIdentityKind, Name: identity.Name},
					TargetNamespace: target,
				},
			}
			Expect(mgmt().Create(ctx, hc)).To(Succeed())
			cluster := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name,
				}},
			}
			Expect(mgmt().Create(ctx, cluster)).To(Succeed())
			DeferCleanup(func() {
				patch := client.MergeFrom(hc.DeepCopy())
				hc.Annotations = map[string]string{infrav1.SkipHarvesterCleanupAnnotation: "true"}
				Expect(client.IgnoreNotFound(mgmt().Patch(ctx, hc, patch))).To(Succeed())
				Expect(client.IgnoreNotFound(mgmt().Delete(ctx, cluster))).To(Succeed())
				Eventually(func() bool { return apierrors.IsNotFound(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)) }).Should(BeTrue())
			})
			return hc
		}
		available := func(hc *infrav1.HarvesterCluster) func(Gomega) *metav1.Condition {
			return func(g Gomega) *metav1.Condition { return conditionOf(g, hc, infrav1.HarvesterAvailableCondition) }
		}

		By("connecting a cluster of an allowed namespace to an allowed target")
		allowed := using("idt-a", "allowed", "h-idt-a")
		Eventually(available(allowed)).Should(HaveField("Status", metav1.ConditionTrue))
		By("making the identity the owner of its Secret, so that clusterctl move carries it")
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
			g.Expect(secret.OwnerReferences).To(ContainElement(HaveField("Kind", infrav1.HarvesterClusterIdentityKind)))
		}).Should(Succeed())

		By("refusing another namespace, and a target namespace the identity does not list")
		other := using("idt-b", "elsewhere", "h-idt-a")
		wrongTarget := using("idt-a", "wrong-target", "h-idt-other")
		for hc, why := range map[*infrav1.HarvesterCluster]string{other: "namespace idt-b", wrongTarget: "Harvester namespace h-idt-other"} {
			Eventually(available(hc)).Should(And(
				HaveField("Reason", infrav1.IdentityNotAllowedReason),
				HaveField("Message", ContainSubstring(why)),
			))
		}

		By("stopping the allowed cluster once the admin takes its namespace out")
		patch := client.MergeFrom(identity.DeepCopy())
		identity.Spec.AllowedNamespaces.NamespaceList = []string{"someone-else"}
		Expect(mgmt().Patch(ctx, identity, patch)).To(Succeed())
		Eventually(available(allowed)).Should(HaveField("Reason", infrav1.IdentityNotAllowedReason))

		By("serving it again through a namespace selector")
		Expect(mgmt().Get(ctx, client.ObjectKey{Name: "idt-a"}, &corev1.Namespace{})).To(Succeed())
		ns := &corev1.Namespace{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Name: "idt-a"}, ns)).To(Succeed())
		nsPatch := client.MergeFrom(ns.DeepCopy())
		ns.Labels = map[string]string{"tenant": "a"}
		Expect(mgmt().Patch(ctx, ns, nsPatch)).To(Succeed())
		patch = client.MergeFrom(identity.DeepCopy())
		identity.Spec.AllowedNamespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}
		Expect(mgmt().Patch(ctx, identity, patch)).To(Succeed())
		Eventually(available(allowed)).Should(HaveField("Status", metav1.ConditionTrue))
	})

	It("is lent to a tenant as docs/harvester-identity.md says", func() {
		Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}))).To(Succeed())
		Expect(testBed.Harvester.AddTargetNamespace(ctx, "guests-a")).To(Succeed())
		dir := GinkgoT().TempDir()
		kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "harvester.kubeconfig"), kubeconfig, 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "identity.yaml"), []byte(documentedYAML("harvester-identity.md", "tenant-a-identity")), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(documentedYAML("harvester-identity.md", "tenant-a-cluster")), 0o600)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(mgmt().Delete(ctx, &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "demo"}}))).To(Succeed())
			Expect(client.IgnoreNotFound(mgmt().Delete(ctx, &infrav1.HarvesterClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}))).To(Succeed())
			Expect(client.IgnoreNotFound(mgmt().Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testBed.Provider.Namespace, Name: "tenant-a-harvester"}}))).To(Succeed())
		})
		runDocumentedOnManagementIn(dir, "harvester-identity.md", "lend-tenant-a")
		// The admin's identity and the tenant's HarvesterCluster, applied as written.
		runDocumentedOnManagementIn(dir, "", "kubectl apply -f identity.yaml\nkubectl apply -f cluster.yaml\n")
		hc := &infrav1.HarvesterCluster{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: "demo"}, hc)).To(Succeed())
		Expect(hc.Spec.IdentityRef).To(HaveField("Name", "tenant-a"))
		listed := runDocumentedOnManagementIn(dir, "harvester-identity.md", "list-identities")
		Expect(listed).To(MatchRegexp(`(?m)^tenant-a\s+tenant-a-harvester\s.*guests-a`), "the listing shows the identity's Secret and target namespaces")
	})

	It("is refused when it allows no namespace or targets a system namespace", func() {
		bad := &infrav1.HarvesterClusterIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Spec:       infrav1.HarvesterClusterIdentitySpec{SecretName: "s", TargetNamespaces: []string{"guests"}},
		}
		Expect(mgmt().Create(ctx, bad)).To(MatchError(ContainSubstring("allowedNamespaces")))
		bad.Spec.AllowedNamespaces = &infrav1.AllowedNamespaces{NamespaceList: []string{"tenant"}}
		bad.Spec.TargetNamespaces = []string{"kube-system"}
		Expect(mgmt().Create(ctx, bad)).To(MatchError(ContainSubstring("system namespace")))
	})
})
