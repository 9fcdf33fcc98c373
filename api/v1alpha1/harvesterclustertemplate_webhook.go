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

package v1alpha1

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/cluster-api/util/topology"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvesterclustertemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvesterclustertemplates,versions=v1alpha1,name=default.harvesterclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvesterclustertemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvesterclustertemplates,versions=v1alpha1,name=validation.harvesterclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// HarvesterClusterTemplateWebhook defaults and validates HarvesterClusterTemplates.
type HarvesterClusterTemplateWebhook struct{}

var (
	_ admission.Defaulter[*HarvesterClusterTemplate] = &HarvesterClusterTemplateWebhook{}
	_ admission.Validator[*HarvesterClusterTemplate] = &HarvesterClusterTemplateWebhook{}
)

// SetupWebhookWithManager registers the webhook with a manager.
func (w *HarvesterClusterTemplateWebhook) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &HarvesterClusterTemplate{}).WithDefaulter(w).WithValidator(w).Complete()
}

// Default fills in the defaults of the template's HarvesterCluster spec.
func (w *HarvesterClusterTemplateWebhook) Default(_ context.Context, t *HarvesterClusterTemplate) error {
	t.Spec.Template.Spec.Default()
	return nil
}

// ValidateCreate checks a new HarvesterClusterTemplate.
func (w *HarvesterClusterTemplateWebhook) ValidateCreate(_ context.Context, t *HarvesterClusterTemplate) (admission.Warnings, error) {
	return nil, invalid("HarvesterClusterTemplate", t.Name, t.Spec.Template.Spec.validate(templateSpecPath))
}

// ValidateUpdate refuses changes to the template (validateTemplateUpdate).
func (w *HarvesterClusterTemplateWebhook) ValidateUpdate(ctx context.Context, oldT, newT *HarvesterClusterTemplate) (admission.Warnings, error) {
	return nil, validateTemplateUpdate(ctx, "HarvesterClusterTemplate", newT,
		oldT.Spec.Template.Spec.validate(templateSpecPath), newT.Spec.Template.Spec.validate(templateSpecPath),
		!reflect.DeepEqual(oldT.Spec.Template.Spec, newT.Spec.Template.Spec),
		"a template cannot change; create a new one and point the ClusterClass or Cluster at it")
}

// ValidateDelete allows every deletion.
func (w *HarvesterClusterTemplateWebhook) ValidateDelete(context.Context, *HarvesterClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}

// templateSpecPath is where the stamped-out spec lives in a template.
var templateSpecPath = field.NewPath("spec", "template", "spec")

// validateTemplateUpdate checks an update of a template: its spec's own errors (those it had
// before are let through, ratchet) and any change of the spec, which is refused (with refusal)
// except in the ClusterClass topology controller's dry-run requests, which must be allowed to
// compute a cluster's desired state.
func validateTemplateUpdate(ctx context.Context, kind string, obj metav1.Object, oldErrs, newErrs field.ErrorList, changed bool, refusal string) error {
	errs := ratchet(newErrs, oldErrs)
	dryRun, err := isTopologyDryRun(ctx, obj)
	if err != nil {
		return err
	}
	if changed && !dryRun {
		errs = append(errs, field.Forbidden(templateSpecPath, refusal))
	}
	return invalid(kind, obj.GetName(), errs)
}

// isTopologyDryRun tells whether a request is the ClusterClass topology controller's dry run.
func isTopologyDryRun(ctx context.Context, obj metav1.Object) (bool, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the admission request: %w", err)
	}
	return topology.IsDryRunRequest(req, obj), nil
}
