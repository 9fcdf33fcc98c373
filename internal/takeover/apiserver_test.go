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
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/caphv"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Against a real apiserver with CAPHV's CRDs (both versions served, v1beta1 stored), objects
// written as Cluster API writes them (v1alpha1) and as CAPHV's manager does (v1beta1) read back
// in the storage version, and releasing CAPHV removes only its finalizers.
func TestCAPHVsObjectsAreReadFromItsStorageVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := testenv.StartBareManagement()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme} {
		g.Expect(add(scheme)).To(Succeed())
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range caphv.CRDs() {
		g.Expect(c.Create(ctx, crd)).To(Succeed())
	}
	for _, crd := range caphv.CRDs() {
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
			established := false
			for _, cond := range crd.Status.Conditions {
				established = established || cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
			}
			g.Expect(established).To(BeTrue())
		}).WithTimeout(2 * time.Minute).Should(Succeed())
	}

	write := func(version, kind string, obj any, status map[string]any) {
		u := caphvObject(t, kind, obj)
		u.SetAPIVersion(caphv.Group + "/" + version)
		u.SetResourceVersion("")
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed(), "the CRD is served")
		if status != nil {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
			u.Object["status"] = status
			g.Expect(c.Status().Update(ctx, u)).To(Succeed())
		}
	}
	hc := caphvCluster()
	hc.Finalizers = []string{"harvester.infrastructure.cluster.x-k8s.io/finalizer", "example.com/keep"}
	write("v1alpha1", "HarvesterCluster", hc, map[string]any{"ready": true, "conditions": []any{map[string]any{
		"type": "Paused", "status": "True", "reason": "Paused", "lastTransitionTime": "2026-11-29T00:00:00Z"}}})
	hm := &Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prod-cp-x2kqz", Labels: map[string]string{clusterv1.ClusterNameLabel: "prod"},
		Finalizers: []string{"harvestermachine.infrastructure.cluster.x-k8s.io"}}, Spec: *caphvMachineSpec()}
	write("v1beta1", "HarvesterMachine", hm, map[string]any{"ready": true})

	inv, err := Read(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.Clusters).To(HaveLen(1))
	g.Expect(inv.Clusters[0].Spec.ControlPlaneEndpoint.Host).To(Equal("10.0.0.7"))
	g.Expect(inv.Clusters[0].Status.Ready).To(BeTrue())
	g.Expect(inv.Machines).To(HaveLen(1))
	g.Expect(inv.Machines[0].Spec.Volumes[1].StorageClass).To(Equal("longhorn"))
	g.Expect(inv.Unpaused()).To(ConsistOf("HarvesterMachine default/prod-cp-x2kqz"))

	g.Expect(Release(ctx, c)).To(Succeed())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ClusterGVK)
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod"}, u)).To(Succeed())
	g.Expect(u.GetFinalizers()).To(Equal([]string{"example.com/keep"}))
	u.SetGroupVersionKind(MachineGVK)
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod-cp-x2kqz"}, u)).To(Succeed())
	g.Expect(u.GetFinalizers()).To(BeEmpty())
}
