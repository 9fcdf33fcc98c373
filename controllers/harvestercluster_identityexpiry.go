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
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// DefaultIdentityExpiryWarning is how long before the identity's credential expires the
// HarvesterCluster warns, unless --identity-expiry-warning says otherwise: a week leaves time to
// rotate it over a weekend or a holiday.
const DefaultIdentityExpiryWarning = 7 * 24 * time.Hour

// checkIdentityExpiry sets IdentityExpiringSoon from what the identity Secret's kubeconfig says
// of its own expiry, and records a warning event when the warning starts or the expiry moves
// while it lasts (a rotation to another short-lived credential). Only times reach the condition
// and the event, never the credential.
func (r *HarvesterClusterReconciler) checkIdentityExpiry(s *clusterScope, secret *corev1.Secret) {
	hc := s.hc
	expires, ok := transport.CredentialExpiry(secret.Data[infrav1.IdentitySecretKey])
	if !ok {
		setClusterCondition(hc, infrav1.IdentityExpiringSoonCondition, metav1.ConditionFalse, infrav1.IdentityNoExpiryReason,
			fmt.Sprintf("the credential in identity Secret %s states no expiry", secret.Name))
		return
	}
	warning := r.IdentityExpiryWarning
	if warning <= 0 {
		warning = DefaultIdentityExpiryWarning
	}
	now := r.clock().Now()
	at := expires.UTC().Format(time.RFC3339)
	left := expires.Sub(now)
	if left > warning {
		setClusterCondition(hc, infrav1.IdentityExpiringSoonCondition, metav1.ConditionFalse, infrav1.IdentityNotExpiringSoonReason,
			fmt.Sprintf("the credential in identity Secret %s expires at %s", secret.Name, at))
		s.recheckAfter(left - warning)
		return
	}
	reason, message := infrav1.IdentityExpiresSoonReason, fmt.Sprintf(
		// The time only, not how long is left: a message that changed every minute made every
		// reconcile patch the status, and each patch woke all the cluster's machines.
		"the credential in identity Secret %s expires at %s: put a kubeconfig with a new token into the Secret (docs/harvester-identity.md, rotating the identity)",
		secret.Name, at)
	if left <= 0 {
		reason, message = infrav1.IdentityExpiredReason, fmt.Sprintf(
			"the credential in identity Secret %s expired at %s: put a kubeconfig with a new token into the Secret (docs/harvester-identity.md, rotating the identity)",
			secret.Name, at)
	} else {
		s.recheckAfter(left)
	}
	before := conditions.Get(hc, infrav1.IdentityExpiringSoonCondition)
	if before == nil || before.Status != metav1.ConditionTrue || before.Reason != reason || !sameExpiry(before.Message, at) {
		r.Recorder.Eventf(hc, nil, corev1.EventTypeWarning, infrav1.IdentityExpiringSoonCondition, "CheckIdentity", "%s", message)
	}
	setClusterCondition(hc, infrav1.IdentityExpiringSoonCondition, metav1.ConditionTrue, reason, message)
}

// sameExpiry tells whether a condition message names the expiry at.
func sameExpiry(message, at string) bool {
	return strings.Contains(message, at)
}
