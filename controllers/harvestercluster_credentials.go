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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

const (
	// DefaultTokenLifetime is how long a guest's Harvester token lives; it is renewed after
	// two thirds of it.
	DefaultTokenLifetime = 12 * time.Hour

	annotationTokenIssued = "harvester.infrastructure.cluster.x-k8s.io/token-issued"
	annotationConfigHash  = "harvester.infrastructure.cluster.x-k8s.io/cloud-config-hash"
	// minGrantedLifetime bounds how often a token is renewed, whatever Harvester reports.
	minGrantedLifetime = 5 * time.Second
	// annotationTokenExpires is when the token expires, as Harvester granted it (it may grant
	// less than asked).
	annotationTokenExpires = "harvester.infrastructure.cluster.x-k8s.io/token-expires"

	// resourceSetSecretType marks Secrets a ClusterResourceSet may apply to a guest.
	resourceSetSecretType = "addons.cluster.x-k8s.io/resource-set" //nolint:gosec // a Secret type, not a credential
	// cloudConfigManifestKey is the key of the guest Secret's manifest in the management Secret.
	cloudConfigManifestKey = "harvester-cloud-config.yaml"
)

// CloudConfigSecretName is the management-side Secret that carries a guest's Harvester
// credential (as a manifest for a ClusterResourceSet).
func CloudConfigSecretName(cluster string) string { return cluster + "-harvester-cloud-config" }

func (r *HarvesterClusterReconciler) guestIdentity(s *clusterScope) harvester.GuestIdentity {
	return harvester.GuestIdentity{
		Namespace:      s.hc.Spec.TargetNamespace,
		ServiceAccount: s.guest.ServiceAccountName(),
		Labels:         s.guest.Labels(),
		Cluster:        s.guest.ID(),
		CSI:            s.hc.Spec.Addons.CSIEnabled(),
	}
}

// reconcileCredentials gives the guest's cloud provider and CSI driver their own short-lived
// Harvester credential, and renews it after two thirds of its lifetime.
func (r *HarvesterClusterReconciler) reconcileCredentials(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	hc := s.hc
	if !hc.Spec.Addons.CloudProviderEnabled() && !hc.Spec.Addons.CSIEnabled() {
		setClusterCondition(hc, infrav1.GuestCredentialsReadyCondition, metav1.ConditionTrue, "Disabled", "no addon needs a Harvester credential")
		return ctrl.Result{}, nil
	}
	server, ca, err := guestEndpoint(hc, s.client.Config.Host, s.client.Config.CAData)
	if err != nil {
		setClusterCondition(hc, infrav1.GuestCredentialsReadyCondition, metav1.ConditionFalse, infrav1.GuestHarvesterAPIRequiredReason, err.Error())
		return ctrl.Result{}, nil
	}
	g := r.guestIdentity(s)
	identities := &harvester.GuestIdentityService{C: s.client.Client}
	// The guest's ServiceAccount and bindings are made when a token is issued, and when the spec
	// changed since they were (the CSI binding follows spec.addons.csi); a current token on an
	// unchanged spec needs nothing of Harvester.
	ready := conditions.Get(hc, infrav1.GuestCredentialsReadyCondition)
	identityEnsured := false
	ensureIdentity := func() (ctrl.Result, error) {
		identityEnsured = true
		return harvesterResult(ctx, identities.Ensure(ctx, g), s.report(infrav1.GuestCredentialsReadyCondition))
	}
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != hc.Generation {
		if res, err := ensureIdentity(); err != nil || !res.IsZero() {
			return res, err
		}
	}
	kubeconfig, err := harvester.GuestKubeconfig(server, ca, g.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	sum := sha256.Sum256(kubeconfig)
	configHash := hex.EncodeToString(sum[:])

	lifetime := r.tokenLifetime()
	now := r.clock().Now()
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: hc.Namespace, Name: CloudConfigSecretName(s.cluster.Name)}
	err = r.Client.Get(ctx, key, secret)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if exists && secret.Annotations[annotationConfigHash] == configHash {
		if issued, perr := time.Parse(time.RFC3339, secret.Annotations[annotationTokenIssued]); perr == nil {
			granted := lifetime
			if expires, perr := time.Parse(time.RFC3339, secret.Annotations[annotationTokenExpires]); perr == nil && expires.After(issued) {
				granted = expires.Sub(issued)
			}
			if renewAt := issued.Add(granted * 2 / 3); now.Before(renewAt) {
				setClusterCondition(hc, infrav1.GuestCredentialsReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason, "")
				return ctrl.Result{RequeueAfter: renewAt.Sub(now)}, nil
			}
		}
	}

	if !identityEnsured {
		if res, err := ensureIdentity(); err != nil || !res.IsZero() {
			return res, err
		}
	}
	token, expires, err := identities.RequestToken(ctx, g, lifetime)
	if err != nil {
		guestTokenRenewalFailures.Inc()
		return harvesterResult(ctx, err, s.report(infrav1.GuestCredentialsReadyCondition))
	}
	manifest, err := harvester.GuestCloudConfigManifest(kubeconfig, token)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !exists {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	}
	secret.Type = resourceSetSecretType
	secret.Labels = map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name}
	// Renewal follows the lifetime Harvester granted, which may be shorter than asked; it is
	// measured on Harvester's clock and carried over to the reconciler's.
	granted := lifetime
	if !expires.IsZero() {
		// A floor keeps a skewed clock from turning renewal into a hot loop.
		granted = max(min(lifetime, time.Until(expires).Round(time.Second)), minGrantedLifetime)
	}
	secret.Annotations = map[string]string{
		annotationTokenIssued:  now.UTC().Format(time.RFC3339),
		annotationTokenExpires: now.Add(granted).UTC().Format(time.RFC3339),
		annotationConfigHash:   configHash,
	}
	secret.Data = map[string][]byte{cloudConfigManifestKey: manifest}
	if err := controllerutil.SetControllerReference(hc, secret, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	if exists {
		err = r.Client.Update(ctx, secret)
	} else {
		err = r.Client.Create(ctx, secret)
	}
	if err != nil {
		guestTokenRenewalFailures.Inc()
		return ctrl.Result{}, fmt.Errorf("writing Secret %s: %w", key, err)
	}
	guestTokenRenewals.Inc()
	r.Recorder.Eventf(hc, nil, corev1.EventTypeNormal, "GuestTokenIssued", "IssueToken", "Issued a Harvester token for the guest's ServiceAccount %s/%s, valid for %s", g.Namespace, g.ServiceAccount, granted)
	setClusterCondition(hc, infrav1.GuestCredentialsReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason, "")
	return ctrl.Result{RequeueAfter: granted * 2 / 3}, nil
}

// guestEndpoint is Harvester's API as the guest reaches it: the spec's when its server is set; the identity's
// server when it is Harvester itself; an error when the identity goes through a Rancher proxy,
// where a Harvester token is not valid.
func guestEndpoint(hc *infrav1.HarvesterCluster, identityServer string, identityCA []byte) (string, []byte, error) {
	if api := hc.Spec.GuestHarvesterAPI; api != nil && api.Server != "" {
		return api.Server, api.CABundle, nil
	}
	if harvester.IsRancherProxy(identityServer) {
		return "", nil, fmt.Errorf("the identity reaches Harvester through a Rancher proxy, where the guest's Harvester token is not valid: set spec.guestHarvesterAPI to Harvester's own API (https://<harvester-vip>:6443) and CA")
	}
	return identityServer, identityCA, nil
}

// deleteCredentials removes the guest's identity on Harvester (revoking its tokens) and the
// management-side Secret.
func (r *HarvesterClusterReconciler) deleteCredentials(ctx context.Context, s *clusterScope) error {
	if err := (&harvester.GuestIdentityService{C: s.client.Client}).Delete(ctx, r.guestIdentity(s)); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.hc.Namespace, Name: CloudConfigSecretName(s.cluster.Name)}}
	return client.IgnoreNotFound(r.Client.Delete(ctx, secret))
}

func (r *HarvesterClusterReconciler) tokenLifetime() time.Duration {
	if r.TokenLifetime > 0 {
		return r.TokenLifetime
	}
	return DefaultTokenLifetime
}
