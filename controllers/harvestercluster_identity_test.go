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

package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// A tenant that names a HarvesterClusterIdentity it may not use writes nothing to it (no
// finalizer that would keep the admin from deleting it), and learns nothing of which identities
// exist: one that does not serve its namespace and one that does not exist read the same.
func TestAnIdentityATenantMayNotUseIsNeitherPinnedNorDisclosed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme, err := NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	identity := &infrav1.HarvesterClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"},
		Spec: infrav1.HarvesterClusterIdentitySpec{SecretName: "tenant-a-harvester", TargetNamespaces: []string{"h-a"},
			AllowedNamespaces: &infrav1.AllowedNamespaces{NamespaceList: []string{"a"}}},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capi-harvester-system", Name: "tenant-a-harvester"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(identity, secret,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b"}}).Build()
	r := &HarvesterClusterReconciler{Client: c, ProviderNamespace: "capi-harvester-system"}
	cluster := func(namespace, identity, target string) *infrav1.HarvesterCluster {
		return &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "c"},
			Spec: infrav1.HarvesterClusterSpec{TargetNamespace: target,
				IdentityRef: &infrav1.IdentityReference{Kind: infrav1.HarvesterClusterIdentityKind, Name: identity}}}
	}
	message := func(hc *infrav1.HarvesterCluster) string {
		_, err := identitySecretKey(ctx, c, hc, r.ProviderNamespace)
		e, ok := transport.AsError(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(e.Reason).To(Equal(infrav1.IdentityNotAllowedReason))
		return e.Message
	}
	finalizers := func() []string {
		got := &infrav1.HarvesterClusterIdentity{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "tenant-a"}, got)).To(Succeed())
		return got.Finalizers
	}

	g.Expect(r.protectIdentity(ctx, cluster("b", "tenant-a", "h-a"))).To(Succeed())
	g.Expect(finalizers()).To(BeEmpty(), "a cluster of a namespace the identity does not allow pinned it")
	g.Expect(message(cluster("b", "tenant-a", "h-a"))).To(Equal("HarvesterClusterIdentity tenant-a does not exist or does not allow namespace b"))
	g.Expect(message(cluster("b", "tenant-z", "h-a"))).To(Equal("HarvesterClusterIdentity tenant-z does not exist or does not allow namespace b"))

	// An allowed namespace is told why a target namespace is not allowed (it may know the
	// identity), and is still not let pin it.
	g.Expect(r.protectIdentity(ctx, cluster("a", "tenant-a", "h-other"))).To(Succeed())
	g.Expect(finalizers()).To(BeEmpty())
	g.Expect(message(cluster("a", "tenant-a", "h-other"))).To(ContainSubstring("does not allow Harvester namespace h-other"))

	g.Expect(r.protectIdentity(ctx, cluster("a", "tenant-a", "h-a"))).To(Succeed())
	g.Expect(finalizers()).To(ConsistOf(IdentityFinalizer))
}
