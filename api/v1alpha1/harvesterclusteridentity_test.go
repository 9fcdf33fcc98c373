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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestIdentityAllowsOnlyItsNamespacesAndTargets(t *testing.T) {
	spec := HarvesterClusterIdentitySpec{
		SecretName: "s",
		AllowedNamespaces: &AllowedNamespaces{
			NamespaceList: []string{"tenant-a"},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}},
		},
		TargetNamespaces: []string{"guests-a", "guests-b"},
	}
	for _, tc := range []struct {
		namespace string
		labels    map[string]string
		target    string
		want      string // "" allowed, else part of the reason
	}{
		{"tenant-a", nil, "guests-a", ""},
		{"tenant-b", map[string]string{"team": "b"}, "guests-b", ""},
		{"tenant-c", map[string]string{"team": "c"}, "guests-a", "namespace tenant-c"},
		{"tenant-a", nil, "guests-c", "Harvester namespace guests-c"},
	} {
		ok, why := spec.Allows(tc.namespace, tc.labels, tc.target)
		if ok != (tc.want == "") || !strings.Contains(why, tc.want) {
			t.Errorf("%s -> %s: allowed %v (%q), want %q", tc.namespace, tc.target, ok, why, tc.want)
		}
	}
	if ok, _ := (&HarvesterClusterIdentitySpec{TargetNamespaces: []string{"g"}}).Allows("any", nil, "g"); ok {
		t.Error("an identity without allowedNamespaces allowed a namespace")
	}
}

func TestIdentityValidation(t *testing.T) {
	spec := HarvesterClusterIdentitySpec{SecretName: "Not_A_Name", TargetNamespaces: []string{"kube-system", "ok"}}
	got := fields(spec.validate(field.NewPath("spec")))
	for _, want := range []string{"spec.secretName: Invalid value", "spec.allowedNamespaces: Required value", "spec.targetNamespaces[0]: Invalid value"} {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, want)
		}
		if !found {
			t.Errorf("errors %v: want %q", got, want)
		}
	}
}

func TestClusterNamesExactlyOneIdentity(t *testing.T) {
	path := field.NewPath("spec")
	both := HarvesterClusterSpec{TargetNamespace: "guests", IdentitySecret: SecretReference{Name: "s"},
		IdentityRef: &IdentityReference{Kind: HarvesterClusterIdentityKind, Name: "i"}}
	if errs := fields(both.validate(path)); len(errs) == 0 || !strings.Contains(strings.Join(errs, ";"), "spec.identitySecret: Forbidden") {
		t.Errorf("both: %v", errs)
	}
	none := HarvesterClusterSpec{TargetNamespace: "guests"}
	if errs := fields(none.validate(path)); !strings.Contains(strings.Join(errs, ";"), "spec.identityRef: Required") {
		t.Errorf("none: %v", errs)
	}
	// Once provisioned, a Secret may give way to a HarvesterClusterIdentity, nothing else.
	old := HarvesterClusterSpec{TargetNamespace: "guests", IdentitySecret: SecretReference{Name: "s"}}
	moved := HarvesterClusterSpec{TargetNamespace: "guests", IdentityRef: &IdentityReference{Kind: HarvesterClusterIdentityKind, Name: "i"}}
	if errs := moved.validateImmutable(path, &old, true); len(errs) != 0 {
		t.Errorf("moving to an identity: %v", errs)
	}
	same := HarvesterClusterSpec{TargetNamespace: "guests", IdentityRef: &IdentityReference{Kind: "Secret", Name: "s"}}
	if errs := same.validateImmutable(path, &old, true); len(errs) != 0 {
		t.Errorf("identitySecret written as identityRef: %v", errs)
	}
	back := old
	if errs := back.validateImmutable(path, &moved, true); len(errs) == 0 {
		t.Error("moving from an identity back to a Secret was allowed once provisioned")
	}
}

// A selector on labels namespace owners may set is accepted, with a warning that names them; a
// list, or a selector on the namespace's own name, is not warned about.
func TestIdentitySelectorsOnWritableLabelsAreWarnedAbout(t *testing.T) {
	w := &HarvesterClusterIdentityWebhook{}
	identity := func(sel *metav1.LabelSelector) *HarvesterClusterIdentity {
		return &HarvesterClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "i"}, Spec: HarvesterClusterIdentitySpec{
			SecretName: "s", TargetNamespaces: []string{"guests"},
			AllowedNamespaces: &AllowedNamespaces{NamespaceList: []string{"tenant-a"}, Selector: sel}}}
	}
	for _, c := range []struct {
		sel  *metav1.LabelSelector
		warn string
	}{
		{nil, ""},
		{&metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: "tenant-b"}}, ""},
		{&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"tenant-b", "tenant-c"}}}}, ""},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}, "(team)"},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"team": "b", NamespaceNameLabel: "x"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}, "(team, tier)"},
	} {
		for _, validate := range []func(*HarvesterClusterIdentity) (warnings []string, err error){
			func(i *HarvesterClusterIdentity) ([]string, error) { return w.ValidateCreate(t.Context(), i) },
			func(i *HarvesterClusterIdentity) ([]string, error) { return w.ValidateUpdate(t.Context(), i, i) },
		} {
			warnings, err := validate(identity(c.sel))
			if err != nil {
				t.Fatalf("%+v: %v", c.sel, err)
			}
			if c.warn == "" && len(warnings) != 0 {
				t.Errorf("%+v: unexpected warnings %q", c.sel, warnings)
			}
			if c.warn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], c.warn) || !strings.Contains(warnings[0], "prefer allowedNamespaces.list")) {
				t.Errorf("%+v: warnings %q, want one naming %s", c.sel, warnings, c.warn)
			}
		}
	}
}
