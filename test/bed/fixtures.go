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

package bed

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// CreateBareCluster creates, in a new namespace, a Cluster without a control plane on a
// HarvesterCluster (target namespace "guests", load balancer on default/vlan10) with its
// identity Secret, and a bootstrap data Secret named "bootstrap" that machines can point at
// directly: what tests need whose machines need no bootstrap provider.
func (b *Bed) CreateBareCluster(ctx context.Context, namespace, name string) error {
	return b.CreateBareClusterIn(ctx, namespace, name, "guests")
}

// CreateBareClusterIn is CreateBareCluster with the machines in Harvester namespace target (one
// AddTargetNamespace prepared).
func (b *Bed) CreateBareClusterIn(ctx context.Context, namespace, name, target string) error {
	c := b.Management.Client
	kubeconfig, err := b.Harvester.ProviderKubeconfig(ctx)
	if err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "identity"}, Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			// This cluster's own, as a bootstrap provider's is: the node agent finds a VM's guest
			// by the bootstrap data its user data carries.
			Data: map[string][]byte{"value": []byte("#cloud-config\nruncmd:\n- echo join\n- echo cluster " + namespace + "/" + name + "\n"), "format": []byte("cloud-config")},
		},
		&infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: infrav1.HarvesterClusterSpec{IdentitySecret: infrav1.SecretReference{Name: "identity"}, TargetNamespace: target,
				LoadBalancer: infrav1.LoadBalancerSpec{Network: "default/vlan10"}},
		},
		&clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: clusterv1.ClusterSpec{
				ClusterNetwork:    clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name},
			},
		},
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s/%s: %w", obj, namespace, obj.GetName(), err)
		}
	}
	return nil
}

// BareMachineDeployment is a MachineDeployment of a CreateBareCluster cluster: replicas
// machines of the HarvesterMachineTemplate named like the cluster, bootstrapped from its
// "bootstrap" Secret.
func BareMachineDeployment(namespace, name string, replicas int32) *clusterv1.MachineDeployment {
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: name,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": name}},
				Spec: clusterv1.MachineSpec{
					ClusterName:       name,
					Version:           "v1.35.4",
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachineTemplate", Name: name},
				},
			},
		},
	}
}
