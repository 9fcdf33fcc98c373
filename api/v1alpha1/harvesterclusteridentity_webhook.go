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
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvesterclusteridentity,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvesterclusteridentities,versions=v1alpha1,name=validation.harvesterclusteridentity.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// HarvesterClusterIdentityWebhook validates HarvesterClusterIdentities.
type HarvesterClusterIdentityWebhook struct{}

// SetupWebhookWithManager registers the webhook.
func (w *HarvesterClusterIdentityWebhook) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &HarvesterClusterIdentity{}).WithValidator(w).Complete()
}

// ValidateCreate checks a new identity.
func (w *HarvesterClusterIdentityWebhook) ValidateCreate(_ context.Context, i *HarvesterClusterIdentity) (admission.Warnings, error) {
	return i.Spec.warnings(), invalid(HarvesterClusterIdentityKind, i.Name, i.Spec.validate(field.NewPath("spec")))
}

// ValidateUpdate checks a changed identity.
func (w *HarvesterClusterIdentityWebhook) ValidateUpdate(_ context.Context, _, i *HarvesterClusterIdentity) (admission.Warnings, error) {
	return i.Spec.warnings(), invalid(HarvesterClusterIdentityKind, i.Name, i.Spec.validate(field.NewPath("spec")))
}

// NamespaceNameLabel is the label the API server sets on every namespace to its name, which no
// one can change.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// warnings tell the admin when allowedNamespaces.selector matches labels other than the
// namespace's name: on platforms where namespace owners may label their namespaces (Rancher
// projects' members, for one), a tenant could then let its own namespace use the identity.
func (s *HarvesterClusterIdentitySpec) warnings() admission.Warnings {
	if s.AllowedNamespaces == nil || s.AllowedNamespaces.Selector == nil {
		return nil
	}
	sel := s.AllowedNamespaces.Selector
	var keys []string
	for k := range sel.MatchLabels {
		if k != NamespaceNameLabel {
			keys = append(keys, k)
		}
	}
	for _, e := range sel.MatchExpressions {
		if e.Key != NamespaceNameLabel {
			keys = append(keys, e.Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	return admission.Warnings{"spec.allowedNamespaces.selector matches namespace labels (" + strings.Join(keys, ", ") +
		") that whoever may label a namespace can set, and so let that namespace use this identity: where namespace owners may label their namespaces, prefer allowedNamespaces.list or the " + NamespaceNameLabel + " label"}
}

// ValidateDelete allows every deletion: clusters using the identity report it missing.
func (w *HarvesterClusterIdentityWebhook) ValidateDelete(context.Context, *HarvesterClusterIdentity) (admission.Warnings, error) {
	return nil, nil
}

func (s *HarvesterClusterIdentitySpec) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(s.SecretName) {
		errs = append(errs, field.Invalid(path.Child("secretName"), s.SecretName, msg))
	}
	if s.AllowedNamespaces == nil {
		errs = append(errs, field.Required(path.Child("allowedNamespaces"), "name the management namespaces that may use this identity (list, selector or both)"))
	} else {
		for i, ns := range s.AllowedNamespaces.NamespaceList {
			for _, msg := range validation.IsDNS1123Label(ns) {
				errs = append(errs, field.Invalid(path.Child("allowedNamespaces", "list").Index(i), ns, msg))
			}
		}
		if sel := s.AllowedNamespaces.Selector; sel != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path.Child("allowedNamespaces", "selector"))...)
		}
	}
	if len(s.TargetNamespaces) == 0 {
		errs = append(errs, field.Required(path.Child("targetNamespaces"), "name the Harvester namespaces this identity's clusters may use"))
	}
	for i, ns := range s.TargetNamespaces {
		p := path.Child("targetNamespaces").Index(i)
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p, ns, msg))
		}
		if owner := systemNamespaceOwner(ns); owner != "" {
			errs = append(errs, field.Invalid(p, ns, "is a system namespace of "+owner))
		}
	}
	for i, ns := range s.SharedNamespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(path.Child("sharedNamespaces").Index(i), ns, msg))
		}
	}
	return errs
}

// Allows tells whether the identity serves a HarvesterCluster in the management namespace
// `namespace` (with its labels) targeting the Harvester namespace `target`; reason says why not.
func (s *HarvesterClusterIdentitySpec) Allows(namespace string, namespaceLabels map[string]string, target string) (ok bool, reason string) {
	if !s.AllowsNamespace(namespace, namespaceLabels) {
		return false, "it does not allow namespace " + namespace + " (allowedNamespaces)"
	}
	for _, t := range s.TargetNamespaces {
		if t == target {
			return true, ""
		}
	}
	return false, "it does not allow Harvester namespace " + target + " (targetNamespaces)"
}

// AllowsNamespace tells whether clusters of a management namespace (with its labels) may use the
// identity, whatever their target namespace.
func (s *HarvesterClusterIdentitySpec) AllowsNamespace(namespace string, namespaceLabels map[string]string) bool {
	a := s.AllowedNamespaces
	if a == nil {
		return false
	}
	if slices.Contains(a.NamespaceList, namespace) {
		return true
	}
	if a.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(a.Selector)
	return err == nil && sel.Matches(labels.Set(namespaceLabels))
}
