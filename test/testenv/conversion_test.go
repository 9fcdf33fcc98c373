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

package testenv_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// TestManagementConvertsCAPIv1beta1 reads and writes Cluster API objects as v1beta1, as the RKE2
// and K3s providers do, through the management cluster's conversion webhook: a v1beta2 object
// reads back in v1beta1's shape (references with an apiVersion found from the CRD's contract
// label), and a v1beta1 write is stored as the v1beta2 object it means.
func TestManagementConvertsCAPIv1beta1(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := testenv.StartManagementWithoutProvider()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()
	g.Expect(env.StartManager(ctx)).To(Succeed())
	c := env.Client

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1"},
		Spec: clusterv1.ClusterSpec{
			Paused: ptr.To(true),
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HarvesterCluster", Name: "c1",
			},
		},
	}
	g.Expect(c.Create(ctx, cluster)).To(Succeed())

	old := &unstructured.Unstructured{}
	old.SetAPIVersion("cluster.x-k8s.io/v1beta1")
	old.SetKind("Cluster")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cluster), old)).To(Succeed())
	g.Expect(old.GetAPIVersion()).To(Equal("cluster.x-k8s.io/v1beta1"))
	ref, _, _ := unstructured.NestedStringMap(old.Object, "spec", "infrastructureRef")
	// v1beta2 names a group; v1beta1 an apiVersion, the one our CRD's contract label lists.
	g.Expect(ref).To(HaveKeyWithValue("apiVersion", "infrastructure.cluster.x-k8s.io/v1alpha1"))
	g.Expect(ref).To(HaveKeyWithValue("namespace", "default"))
	g.Expect(ref).NotTo(HaveKey("apiGroup"))
	paused, _, _ := unstructured.NestedBool(old.Object, "spec", "paused")
	g.Expect(paused).To(BeTrue())

	machine := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1",
		"kind":       "Machine",
		"metadata":   map[string]any{"namespace": "default", "name": "m1"},
		"spec": map[string]any{
			"clusterName": "c1",
			"bootstrap":   map[string]any{"dataSecretName": "m1-bootstrap"},
			"infrastructureRef": map[string]any{
				"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "HarvesterMachine", "name": "m1",
			},
		},
	}}
	g.Expect(c.Create(ctx, machine)).To(Succeed())
	m := &clusterv1.Machine{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "m1"}, m)).To(Succeed())
	g.Expect(m.Spec.InfrastructureRef).To(Equal(clusterv1.ContractVersionedObjectReference{
		APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HarvesterMachine", Name: "m1",
	}))
	g.Expect(m.Spec.Bootstrap.DataSecretName).To(Equal(ptr.To("m1-bootstrap")))
}
