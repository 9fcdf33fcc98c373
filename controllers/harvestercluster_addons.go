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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates/addons"
)

// DefaultCCMImage is the guest's cloud controller manager image when none is configured.
const DefaultCCMImage = "ghcr.io/seed-0a7eb009/harvester-cloud-controller-manager:dev"

// AddonsResourceSetName is the ClusterResourceSet that carries a guest's addons.
func AddonsResourceSetName(cluster string) string { return cluster + "-harvester-addons" }

// CCMSecretName is the management-side Secret with the guest's cloud controller manager.
func CCMSecretName(cluster string) string { return cluster + "-harvester-ccm" }

// KubeVIPSecretName is the management-side Secret with the guest's kube-vip (Services of type
// LoadBalancer).
func KubeVIPSecretName(cluster string) string { return cluster + "-harvester-kube-vip" }

// CSISecretName is the management-side Secret with the guest's Harvester CSI driver.
func CSISecretName(cluster string) string { return cluster + "-harvester-csi" }

// reconcileAddons offers the guest its cloud-config, our cloud controller manager with kube-vip
// (spec.addons.cloudProvider) and the Harvester CSI driver (spec.addons.csi) through a
// ClusterResourceSet (strategy Reconcile, so that renewed tokens reach the guest) that selects
// the Cluster by the addons label.
func (r *HarvesterClusterReconciler) reconcileAddons(ctx context.Context, s *clusterScope) error {
	hc, cluster := s.hc, s.cluster
	if !hc.Spec.Addons.CloudProviderEnabled() && !hc.Spec.Addons.CSIEnabled() {
		setClusterCondition(hc, infrav1.AddonsReadyCondition, metav1.ConditionTrue, infrav1.AddonsDisabledReason, "spec.addons turns every addon off; "+noCloudProviderMessage)
		return nil
	}
	resources := []addonsv1.ResourceRef{{Kind: "Secret", Name: CloudConfigSecretName(cluster.Name)}}
	type addon struct{ secret, key, manifest string }
	var wanted []addon
	if hc.Spec.Addons.CloudProviderEnabled() {
		image := r.CCMImage
		if image == "" {
			image = DefaultCCMImage
		}
		manifest, err := addons.Render(addons.CCM, map[string]string{
			"CLUSTER_NAME": s.guest.ID(),
			"CCM_IMAGE":    image,
		})
		if err != nil {
			return fmt.Errorf("rendering the cloud controller manager: %w", err)
		}
		// kube-vip announces the addresses the CCM gets for Services of type LoadBalancer.
		wanted = append(wanted, addon{CCMSecretName(cluster.Name), "harvester-ccm.yaml", manifest},
			addon{KubeVIPSecretName(cluster.Name), "kube-vip.yaml", addons.KubeVIP})
	}
	if hc.Spec.Addons.CSIEnabled() {
		wanted = append(wanted, addon{CSISecretName(cluster.Name), "harvester-csi.yaml", addons.CSI})
	}
	for _, a := range wanted {
		if err := r.ensureResourceSetSecret(ctx, hc, cluster, a.secret, a.key, a.manifest); err != nil {
			return err
		}
		resources = append(resources, addonsv1.ResourceRef{Kind: "Secret", Name: a.secret})
	}

	crs := &addonsv1.ClusterResourceSet{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: AddonsResourceSetName(cluster.Name)}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, crs, func() error {
		crs.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
		crs.Spec = addonsv1.ClusterResourceSetSpec{
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{infrav1.AddonsLabel: cluster.Name}},
			Resources:       resources,
			Strategy:        string(addonsv1.ClusterResourceSetStrategyReconcile),
		}
		return controllerutil.SetControllerReference(hc, crs, r.Client.Scheme())
	}); err != nil {
		return fmt.Errorf("writing ClusterResourceSet %s/%s: %w", crs.Namespace, crs.Name, err)
	}

	if cluster.Labels[infrav1.AddonsLabel] != cluster.Name {
		setClusterCondition(hc, infrav1.AddonsReadyCondition, metav1.ConditionFalse, infrav1.AddonsNotSelectedReason,
			fmt.Sprintf("label the Cluster %s=%s so that its ClusterResourceSet %s installs the Harvester addons", infrav1.AddonsLabel, cluster.Name, crs.Name))
		return nil
	}
	message := ""
	if !hc.Spec.Addons.CloudProviderEnabled() {
		message = noCloudProviderMessage
	}
	setClusterCondition(hc, infrav1.AddonsReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason, message)
	return nil
}

// noCloudProviderMessage says what a guest without our cloud controller manager needs: the
// templates' kubelets run with --cloud-provider=external (so that a cloud controller can give
// each Node the providerID CAPI matches it to its Machine by), and without one the Nodes stay
// tainted and unmatched.
const noCloudProviderMessage = "no cloud controller manager is installed (spec.addons.cloudProvider is false): install one that sets each Node's providerID to harvester://<VM UID> (the upstream Harvester cloud provider does), or CAPI never matches the Nodes to their Machines and they keep the uninitialized taint"

// ensureResourceSetSecret writes a Secret a ClusterResourceSet applies, owned by the
// HarvesterCluster.
func (r *HarvesterClusterReconciler) ensureResourceSetSecret(ctx context.Context, hc *infrav1.HarvesterCluster, cluster *clusterv1.Cluster, name, key, manifest string) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: name}}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, secret, func() error {
		secret.Type = resourceSetSecretType
		secret.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
		secret.Data = map[string][]byte{key: []byte(manifest)}
		return controllerutil.SetControllerReference(hc, secret, r.Client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", hc.Namespace, name, err)
	}
	return nil
}

// deleteAddons removes the ClusterResourceSet and its Secrets (what a ClusterResourceSet
// applied stays in the guest, which is going away).
func (r *HarvesterClusterReconciler) deleteAddons(ctx context.Context, hc *infrav1.HarvesterCluster, cluster string) error {
	for _, obj := range []client.Object{
		&addonsv1.ClusterResourceSet{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: AddonsResourceSetName(cluster)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: CCMSecretName(cluster)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: KubeVIPSecretName(cluster)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: CSISecretName(cluster)}},
	} {
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
