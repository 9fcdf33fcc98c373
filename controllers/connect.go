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
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

const (
	// unreachableRecheck is how soon a reconcile whose Harvester did not answer tries again.
	// Its return sends no event, and an error's exponential back-off would have grown to
	// minutes by the end of a long outage; while Harvester stays silent the connection's guard
	// fails the retries at once, without a request (transport.requestGuard).
	unreachableRecheck = 5 * time.Second
	// accessRecheck is how soon a reconcile whose identity could not do its work (credentials
	// refused, a permission or the target namespace missing) tries again; a change of the
	// identity Secret retries at once.
	accessRecheck = 30 * time.Second
	// referenceRecheck is how soon a machine whose image, keypair or network is missing or not
	// ready looks again, by default (DefaultReferenceRecheck, --reference-recheck-interval):
	// those are not the provider's objects, and no watch says when they are fixed.
	referenceRecheck = DefaultReferenceRecheck
	// busyRecheck is how soon a reconcile whose request found the connection's request slots
	// taken all its time tries again.
	busyRecheck = time.Second
	// syncRecheck is how soon a reconcile that found a new connection's cache still filling
	// tries again; no event would come for it.
	syncRecheck = 2 * time.Second
)

// connect returns the connection of user (the reconciled object, see ClientFactory.Get) to the
// HarvesterCluster's Harvester, and the identity Secret it was made from. Its failures are
// harvester.Errors; while the connection's cache is still filling, the error wraps
// transport.ErrNotSynced and the connection is returned too (for live requests).
//
// With secretMetadata (the manager's cache of Secrets' metadata: the provider does not cache
// their data), a connection user already has is reused while the identity Secret's
// resourceVersion is the one it was made from; the Secret is then not read, and not returned.
//
// The connection serves the HarvesterCluster's guest cluster (its cache holds that cluster's
// objects only), named by the cluster-name label CAPI puts on it; without that label it serves
// every cluster of the identity.
func connect(ctx context.Context, c client.Client, secretMetadata client.Reader, f *transport.ClientFactory, hc *infrav1.HarvesterCluster, user, providerNamespace string) (*transport.Client, *corev1.Secret, error) {
	key, err := identitySecretKey(ctx, c, hc, providerNamespace)
	if err != nil {
		return nil, nil, err
	}
	cluster := ""
	if name := hc.Labels[clusterv1.ClusterNameLabel]; name != "" {
		if g, ok := naming.GuestOf(hc, name); ok {
			cluster = g.ID()
		}
	}
	if secretMetadata != nil {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := secretMetadata.Get(ctx, key, meta); err == nil {
			if reused, ok := f.Reuse(user, key.String(), cluster, meta.ResourceVersion, hc.Spec.TargetNamespace); ok {
				return reused, nil, nil
			}
		}
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, &transport.Error{Kind: transport.KindAccess, Reason: infrav1.IdentitySecretNotFoundReason,
				Message: fmt.Sprintf("identity Secret %s does not exist", key)}
		}
		return nil, nil, err
	}
	hcClient, err := f.Get(ctx, user, secret, hc.Spec.TargetNamespace, cluster)
	switch {
	case errors.Is(err, transport.ErrInvalidKubeconfig):
		return nil, secret, &transport.Error{Kind: transport.KindAccess, Reason: infrav1.InvalidKubeconfigReason,
			Message: fmt.Sprintf("identity Secret %s: %v", key, err)}
	case errors.Is(err, transport.ErrNotSynced):
		return hcClient, secret, &transport.Error{Kind: transport.KindUnreachable, Reason: infrav1.HarvesterUnreachableReason,
			Message: "waiting for Harvester to answer the provider's watches", Err: err}
	case err != nil:
		// Building a connection asks Harvester for its API groups: it may not answer.
		return nil, secret, transport.ClassifyError(err, "connecting to Harvester")
	}
	return hcClient, secret, nil
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=harvesterclusteridentities,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// identitySecretKey resolves the HarvesterCluster's identity to the Secret that holds its
// kubeconfig. A HarvesterClusterIdentity's Secret is in the provider's namespace, and it serves
// only the management namespaces and Harvester namespaces it allows: checked at every reconcile
// (the identity and the namespace are read from the manager's cache), so that a namespace taken
// out of allowedNamespaces stops at its clusters' next reconcile.
func identitySecretKey(ctx context.Context, c client.Reader, hc *infrav1.HarvesterCluster, providerNamespace string) (client.ObjectKey, error) {
	ref := hc.Spec.Identity()
	if ref.Kind != infrav1.HarvesterClusterIdentityKind {
		return client.ObjectKey{Namespace: hc.Namespace, Name: ref.Name}, nil
	}
	// An identity that does not exist and one that does not serve the cluster's namespace are
	// told apart to no one: a tenant learns nothing of the identities it may not use.
	notServed := &transport.Error{Kind: transport.KindAccess, Reason: infrav1.IdentityNotAllowedReason,
		Message: fmt.Sprintf("HarvesterClusterIdentity %s does not exist or does not allow namespace %s", ref.Name, hc.Namespace)}
	identity := &infrav1.HarvesterClusterIdentity{}
	if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, identity); err != nil {
		if apierrors.IsNotFound(err) {
			return client.ObjectKey{}, notServed
		}
		return client.ObjectKey{}, err
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: hc.Namespace}, ns); err != nil {
		return client.ObjectKey{}, err
	}
	if !identity.Spec.AllowsNamespace(hc.Namespace, ns.Labels) {
		return client.ObjectKey{}, notServed
	}
	if ok, why := identity.Spec.Allows(hc.Namespace, ns.Labels, hc.Spec.TargetNamespace); !ok {
		return client.ObjectKey{}, &transport.Error{Kind: transport.KindAccess, Reason: infrav1.IdentityNotAllowedReason,
			Message: fmt.Sprintf("HarvesterClusterIdentity %s may not be used here: %s", ref.Name, why)}
	}
	if providerNamespace == "" {
		return client.ObjectKey{}, &transport.Error{Kind: transport.KindAccess, Reason: infrav1.IdentityNotFoundReason,
			Message: "the manager does not know its own namespace (POD_NAMESPACE), where HarvesterClusterIdentity Secrets live"}
	}
	return client.ObjectKey{Namespace: providerNamespace, Name: identity.Spec.SecretName}, nil
}

// DefaultReferenceRecheck is how often a machine whose image, key pair or network is missing or
// not ready, or whose VM name another's object holds, looks again (--reference-recheck-interval).
const DefaultReferenceRecheck = 15 * time.Second

// harvesterResult is how a reconcile ends on err: a transport.Error is reported (its reason and
// message, through report, on the condition of the step that failed) and retried when its Kind
// says; any other error goes back to the controller for its back-off.
func harvesterResult(ctx context.Context, err error, report func(reason, message string)) (ctrl.Result, error) {
	if err == nil {
		return ctrl.Result{}, nil
	}
	e, ok := transport.AsError(err)
	if !ok {
		return ctrl.Result{}, err
	}
	if e.Kind == transport.KindBusy {
		// Queueing behind a slow Harvester: nothing to tell the user, the work goes on soon.
		ctrl.LoggerFrom(ctx).V(4).Info("the connection's requests are queueing; reconciling again", "message", e.Message)
		return ctrl.Result{RequeueAfter: busyRecheck}, nil
	}
	report(e.Reason, e.Message)
	if errors.Is(err, transport.ErrNotSynced) {
		return ctrl.Result{RequeueAfter: syncRecheck}, nil
	}
	if e.Kind != transport.KindRefused {
		// A refusal is returned as an error, which controller-runtime logs.
		failures.log(ctx, e)
	}
	switch e.Kind {
	case transport.KindUnreachable:
		return ctrl.Result{RequeueAfter: unreachableRecheck}, nil
	case transport.KindAccess:
		return ctrl.Result{RequeueAfter: accessRecheck}, nil
	case transport.KindReference:
		return ctrl.Result{RequeueAfter: referenceRecheck}, nil
	case transport.KindInvalid:
		return ctrl.Result{}, nil // reported until the input changes, which brings a reconcile
	}
	return ctrl.Result{}, err
}

// ensureIdentityOwnsSecret makes a HarvesterClusterIdentity the owner of its Secret, so that
// clusterctl move (which moves the identities, their CRD being labelled move-hierarchy) carries
// the Secret along.
func ensureIdentityOwnsSecret(ctx context.Context, c client.Client, hc *infrav1.HarvesterCluster, secret *corev1.Secret) error {
	ref := hc.Spec.Identity()
	if ref.Kind != infrav1.HarvesterClusterIdentityKind || secret == nil {
		return nil
	}
	identity := &infrav1.HarvesterClusterIdentity{}
	if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, identity); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, o := range secret.OwnerReferences {
		if o.UID == identity.UID {
			return nil
		}
	}
	base := secret.DeepCopy()
	secret.OwnerReferences = append(secret.OwnerReferences, metav1.OwnerReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.HarvesterClusterIdentityKind,
		Name: identity.Name, UID: identity.UID,
	})
	return c.Patch(ctx, secret, client.MergeFrom(base))
}
