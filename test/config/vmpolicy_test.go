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

package config_test

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// A guest's CSI credential may patch VMs of its namespace to hot-plug volumes, and
// capi-harvester-guest-vm-changes refuses any other change. A list of fields someone thought of
// would miss the next one (a VMI's serviceAccountName, its probes, a new KubeVirt field): every
// JSON field of KubeVirt's VirtualMachineSpec, VMI spec, DomainSpec and Devices must be compared
// by the policy, or be one of the few compared in part (the hot-plugged volumes and their disks,
// which the CSI driver changes), so that upgrading kubevirt.io/api fails here until the policy
// knows the new field.
func TestTheVMPolicyComparesEveryFieldOfKubeVirtsTypes(t *testing.T) {
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	for _, doc := range strings.Split(string(readRepoFile(t, "config/harvester/admission-policies.yaml")), "\n---\n") {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind == "ValidatingAdmissionPolicy" && p.Name == "capi-harvester-guest-vm-changes" {
			policy = p
		}
	}
	if policy.Name == "" {
		t.Fatal("capi-harvester-guest-vm-changes not found")
	}
	var text strings.Builder
	for _, v := range policy.Spec.Validations {
		text.WriteString(v.Expression + "\n")
	}
	expr := text.String()
	compared := func(pattern string) []string {
		var out []string
		for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(expr, -1) {
			out = append(out, m[1])
		}
		return out
	}
	for _, level := range []struct {
		name     string
		typ      reflect.Type
		compared []string
		// inPart: compared by their parts elsewhere in the policy, with the check that says so.
		inPart map[string]string
	}{
		{"VirtualMachineSpec", reflect.TypeOf(kubevirtv1.VirtualMachineSpec{}),
			compared(`object\.spec\.\?(\w+) == oldObject\.spec\.\?(?:\w+)`),
			map[string]string{"template": "object.spec.template.?metadata == oldObject.spec.template.?metadata"}},
		{"VirtualMachineInstanceSpec", reflect.TypeOf(kubevirtv1.VirtualMachineInstanceSpec{}),
			compared(`variables\.new\.\?(\w+) == variables\.old\.\?(?:\w+)`),
			map[string]string{"volumes": "variables.fixedNew == variables.fixedOld", "domain": "variables.new.domain.?cpu == variables.old.domain.?cpu"}},
		{"DomainSpec", reflect.TypeOf(kubevirtv1.DomainSpec{}),
			compared(`variables\.new\.domain\.\?(\w+) == variables\.old\.domain\.\?(?:\w+)`),
			map[string]string{"devices": "variables.new.domain.devices.?interfaces == variables.old.domain.devices.?interfaces"}},
		{"Devices", reflect.TypeOf(kubevirtv1.Devices{}),
			compared(`variables\.new\.domain\.devices\.\?(\w+) == variables\.old\.domain\.devices\.\?(?:\w+)`),
			map[string]string{"disks": "variables.new.domain.devices.?disks.orValue([]).filter(d, variables.fixedOld.exists(v, v.name == d.name))"}},
	} {
		for _, field := range jsonFields(level.typ) {
			if check, ok := level.inPart[field]; ok {
				if !strings.Contains(expr, check) {
					t.Errorf("%s.%s: compared in part, but the policy no longer has %q", level.name, field, check)
				}
				continue
			}
			if !slices.Contains(level.compared, field) {
				t.Errorf("%s.%s: capi-harvester-guest-vm-changes does not compare it: a guest's credential could change it", level.name, field)
			}
		}
	}
}

// jsonFields are a struct's JSON field names, those of embedded structs included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case name == "" && f.Anonymous:
			out = append(out, jsonFields(f.Type)...)
		case name != "":
			out = append(out, name)
		}
	}
	return out
}
