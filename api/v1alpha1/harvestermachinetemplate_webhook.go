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
	"reflect"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachinetemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvestermachinetemplates,versions=v1alpha1,name=default.harvestermachinetemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachinetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvestermachinetemplates,versions=v1alpha1,name=validation.harvestermachinetemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// HarvesterMachineTemplateWebhook defaults and validates HarvesterMachineTemplates.
type HarvesterMachineTemplateWebhook struct{}

var (
	_ admission.Defaulter[*HarvesterMachineTemplate] = &HarvesterMachineTemplateWebhook{}
	_ admission.Validator[*HarvesterMachineTemplate] = &HarvesterMachineTemplateWebhook{}
)

// SetupWebhookWithManager registers the webhook with a manager.
func (w *HarvesterMachineTemplateWebhook) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &HarvesterMachineTemplate{}).WithDefaulter(w).WithValidator(w).Complete()
}

// Default fills in the defaults of the template's HarvesterMachine spec.
func (w *HarvesterMachineTemplateWebhook) Default(_ context.Context, t *HarvesterMachineTemplate) error {
	t.Spec.Template.Spec.Default()
	return nil
}

// ValidateCreate checks a new HarvesterMachineTemplate.
func (w *HarvesterMachineTemplateWebhook) ValidateCreate(_ context.Context, t *HarvesterMachineTemplate) (admission.Warnings, error) {
	return nil, invalid("HarvesterMachineTemplate", t.Name, t.Spec.Template.Spec.validateAsTemplate(templateSpecPath))
}

// ValidateUpdate refuses changes to the template (validateTemplateUpdate).
func (w *HarvesterMachineTemplateWebhook) ValidateUpdate(ctx context.Context, oldT, newT *HarvesterMachineTemplate) (admission.Warnings, error) {
	return nil, validateTemplateUpdate(ctx, "HarvesterMachineTemplate", newT,
		oldT.Spec.Template.Spec.validateAsTemplate(templateSpecPath), newT.Spec.Template.Spec.validateAsTemplate(templateSpecPath),
		!reflect.DeepEqual(oldT.Spec.Template.Spec, newT.Spec.Template.Spec),
		"a machine template cannot change; create a new one and point the MachineDeployment or control plane at it")
}

// ValidateDelete allows every deletion.
func (w *HarvesterMachineTemplateWebhook) ValidateDelete(context.Context, *HarvesterMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}
