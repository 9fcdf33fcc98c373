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
