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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvesterclusteridentities,verbs=update;patch

// protectIdentity puts a finalizer on what the cluster's identity is made of, so that it
// outlives the clusters that use it (their deletion needs it to clean up on Harvester): the
// identity Secret, and a HarvesterClusterIdentity itself. A Secret of the tenant's namespace also
// gets clusterctl's move label (an identity's Secret moves as the identity's own). Nothing is
// written to an identity the cluster may not use (identitySecretKey checks first).
func (r *HarvesterClusterReconciler) protectIdentity(ctx context.Context, hc *infrav1.HarvesterCluster) error {
	ref := hc.Spec.Identity()
	key, err := identitySecretKey(ctx, r.Client, hc, r.ProviderNamespace)
	if err != nil {
		return nil //nolint:nilerr // connect reports it, as a condition
	}
	if ref.Kind == infrav1.HarvesterClusterIdentityKind {
		identity := &infrav1.HarvesterClusterIdentity{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, identity); err != nil {
			return client.IgnoreNotFound(err) // connect reports it
		}
		if !controllerutil.ContainsFinalizer(identity, IdentityFinalizer) {
			base := identity.DeepCopy()
			controllerutil.AddFinalizer(identity, IdentityFinalizer)
			if err := r.Client.Patch(ctx, identity, client.MergeFrom(base)); err != nil {
				return err
			}
		}
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // connect reports it
		}
		return err
	}
	_, hasLabel := secret.Labels[MoveLabel]
	wantLabel := ref.Kind != infrav1.HarvesterClusterIdentityKind
	if controllerutil.ContainsFinalizer(secret, IdentityFinalizer) && (hasLabel || !wantLabel) {
		return nil
	}
	base := secret.DeepCopy()
	controllerutil.AddFinalizer(secret, IdentityFinalizer)
	if wantLabel && !hasLabel {
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[MoveLabel] = ""
	}
	return r.Client.Patch(ctx, secret, client.MergeFrom(base))
}

// releaseIdentity removes the finalizers protectIdentity put, once no other HarvesterCluster
// uses the identity.
func (r *HarvesterClusterReconciler) releaseIdentity(ctx context.Context, hc *infrav1.HarvesterCluster) error {
	ref := hc.Spec.Identity()
	list := &infrav1.HarvesterClusterList{}
	var opts []client.ListOption
	if ref.Kind != infrav1.HarvesterClusterIdentityKind {
		opts = append(opts, client.InNamespace(hc.Namespace))
	}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	for _, other := range list.Items {
		if other.UID != hc.UID && other.Spec.Identity() == ref {
			return nil
		}
	}
	key := client.ObjectKey{Namespace: hc.Namespace, Name: ref.Name}
	if ref.Kind == infrav1.HarvesterClusterIdentityKind {
		identity := &infrav1.HarvesterClusterIdentity{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, identity); err != nil {
			return client.IgnoreNotFound(err)
		}
		key = client.ObjectKey{Namespace: r.ProviderNamespace, Name: identity.Spec.SecretName}
		if controllerutil.ContainsFinalizer(identity, IdentityFinalizer) {
			base := identity.DeepCopy()
			controllerutil.RemoveFinalizer(identity, IdentityFinalizer)
			if err := r.Client.Patch(ctx, identity, client.MergeFrom(base)); err != nil {
				return err
			}
		}
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(secret, IdentityFinalizer) {
		return nil
	}
	base := secret.DeepCopy()
	controllerutil.RemoveFinalizer(secret, IdentityFinalizer)
	return r.Client.Patch(ctx, secret, client.MergeFrom(base))
}
