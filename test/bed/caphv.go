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
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/caphv"
)

// InstallCAPHV makes a bare management cluster (AddBareManagement) look as `clusterctl init
// --infrastructure harvester` with CAPHV v0.10.1's release leaves it: CAPHV's four CRDs, its
// namespace and Deployment, its fail-closed validating webhook configuration (served by an
// in-test server that admits everything, as CAPHV's does for valid objects), all with
// clusterctl's labels, and its entry in clusterctl's inventory. caphv.Manager plays its pod
// until the Deployment is scaled to zero. stop ends both.
func (m *Management) InstallCAPHV(ctx context.Context, harvester client.Client) (stop func(), err error) {
	c := m.Env.Client
	labels := ClusterctlLabels(ProviderManifestLabel)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: caphv.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	for _, crd := range caphv.CRDs() {
		maps.Copy(crd.Labels, labels)
		if err := c.Create(ctx, crd); err != nil {
			return nil, err
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, crd := range caphv.CRDs() {
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
				return false, err
			}
			if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("CAPHV's CRDs not established: %w", err)
	}
	podLabels := map[string]string{"control-plane": "controller-manager"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: caphv.Namespace, Name: caphv.Deployment, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager",
					Image: "ghcr.io/rancher-sandbox/cluster-api-provider-harvester:" + caphv.Version, Args: []string{"--leader-elect", "--enable-webhooks"}}}},
			},
		},
	}
	if err := c.Create(ctx, deploy); err != nil {
		return nil, err
	}

	server := httptest.NewTLSServer(http.HandlerFunc(admitAll))
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: caphv.Webhook, Labels: labels}}
	for _, kind := range []string{"harvestercluster", "harvestermachine"} {
		for _, version := range []string{"v1beta1", "v1alpha1"} {
			hook.Webhooks = append(hook.Webhooks, admissionregistrationv1.ValidatingWebhook{
				Name: fmt.Sprintf("v%s.%s.kb.io", kind, version),
				ClientConfig: admissionregistrationv1.WebhookClientConfig{
					URL: ptr.To(fmt.Sprintf("%s/validate-infrastructure-cluster-x-k8s-io-%s-%s", server.URL, version, kind)), CABundle: caBundle,
				},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{caphv.Group}, APIVersions: []string{version}, Resources: []string{kind + "s"}},
				}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			})
		}
	}
	if err := c.Create(ctx, hook); err != nil {
		server.Close()
		return nil, err
	}

	cc, cleanup, err := clusterctlClusterClient(ctx, m.Env)
	if err != nil {
		server.Close()
		return nil, err
	}
	defer cleanup()
	entry := clusterctlv1.Provider{ProviderName: "harvester", Type: string(clusterctlv1.InfrastructureProviderType), Version: caphv.Version}
	entry.Name, entry.Namespace = entry.ManifestLabel(), caphv.Namespace
	entry.Labels = maps.Clone(labels)
	entry.Labels[clusterctlv1.ClusterctlCoreLabel] = clusterctlv1.ClusterctlCoreLabelInventoryValue
	if err := cc.ProviderInventory().Create(ctx, entry); err != nil {
		server.Close()
		return nil, fmt.Errorf("recording CAPHV in clusterctl's inventory: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&caphv.Manager{Management: c, Harvester: harvester}).Run(runCtx)
	}()
	return func() {
		cancel()
		<-done
		server.Close()
	}, nil
}

// admitAll answers every admission review with allowed.
func admitAll(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an admission review", http.StatusBadRequest)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}
