package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// protectIdentity puts a finalizer (so that the Secret outlives the clusters that use it) and
// clusterctl's move label on the identity Secret.
func (r *HarvesterClusterReconciler) protectIdentity(ctx context.Context, hc *infrav1.HarvesterCluster) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: hc.Namespace, Name: hc.Spec.IdentitySecret.Name}
	if err := r.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // connect reports it
		}
		return err
	}
	_, hasLabel := secret.Labels[MoveLabel]
	if controllerutil.ContainsFinalizer(secret, IdentityFinalizer) && hasLabel {
		return nil
	}
	base := secret.DeepCopy()
	controllerutil.AddFinalizer(secret, IdentityFinalizer)
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	if !hasLabel {
		secret.Labels[MoveLabel] = ""
	}
	return r.Client.Patch(ctx, secret, client.MergeFrom(base))
}

// releaseIdentity removes the identity Secret's finalizer once no other HarvesterCluster uses it.
func (r *HarvesterClusterReconciler) releaseIdentity(ctx context.Context, hc *infrav1.HarvesterCluster) error {
	list := &infrav1.HarvesterClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(hc.Namespace)); err != nil {
		return err
	}
	for _, other := range list.Items {
		if other.UID != hc.UID && other.Spec.IdentitySecret.Name == hc.Spec.IdentitySecret.Name {
			return nil
		}
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: hc.Spec.IdentitySecret.Name}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(secret, IdentityFinalizer) {
		return nil
	}
	base := secret.DeepCopy()
	controllerutil.RemoveFinalizer(secret, IdentityFinalizer)
	return r.Client.Patch(ctx, secret, client.MergeFrom(base))
}
