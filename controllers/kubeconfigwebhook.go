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
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/secret"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// KubeconfigWebhookPath is where the manager serves the optional admission check of guest
// kubeconfig Secrets (config/management/guest-kubeconfig-webhook.yaml registers it).
const KubeconfigWebhookPath = "/validate-guest-kubeconfig-secret"

// KubeconfigSecretValidator refuses, in the management cluster, a `<cluster>-kubeconfig` Secret
// whose kubeconfig the manager's policy refuses (exec, auth providers, file paths, and proxies or
// skipped TLS checks unless the manager's flags allow them). The provider's own ClusterCache
// reads those Secrets through the policy anyway (guestKubeconfigReader); this check protects the
// other controllers that read them as they are, Cluster API core's ClusterCache first.
//
// The check is in Go, not a ValidatingAdmissionPolicy, because CEL on Kubernetes 1.35 cannot
// decode a Secret's base64 data, and a pattern on the encoded text misses keys that YAML or JSON
// spell with escapes.
type KubeconfigSecretValidator struct {
	Policy  transport.KubeconfigPolicy
	decoder admission.Decoder
}

// SetupKubeconfigWebhook registers the validator on the manager's webhook server.
func SetupKubeconfigWebhook(mgr ctrl.Manager, policy transport.KubeconfigPolicy) {
	mgr.GetWebhookServer().Register(KubeconfigWebhookPath, &webhook.Admission{Handler: &KubeconfigSecretValidator{
		Policy:  policy,
		decoder: admission.NewDecoder(mgr.GetScheme()),
	}})
}

// Handle admits every Secret but a kubeconfig Secret the policy refuses. The answer names the
// refused field, never its value.
func (v *KubeconfigSecretValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	s := &corev1.Secret{}
	if err := v.decoder.DecodeRaw(req.Object, s); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !strings.HasSuffix(s.Name, "-"+string(secret.Kubeconfig)) {
		return admission.Allowed("")
	}
	data, ok := s.Data[secret.KubeconfigDataName]
	if !ok {
		return admission.Allowed("")
	}
	if _, err := v.Policy.Sanitize(data); err != nil {
		return admission.Denied("a Cluster's kubeconfig Secret must hold inline credentials only: " + err.Error())
	}
	return admission.Allowed("")
}
