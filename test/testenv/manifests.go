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

package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize renders a kustomization directory, as `kubectl kustomize` would.
func Kustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return resMap.AsYaml()
}

// DecodeObjects splits a multi-document YAML stream into unstructured objects.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// manifests holds the typed objects of the kinds envtest installs.
type manifests struct {
	crds       []*apiextensionsv1.CustomResourceDefinition
	mutating   []*admissionv1.MutatingWebhookConfiguration
	validating []*admissionv1.ValidatingWebhookConfiguration
}

// add decodes the CRDs and webhook configurations of a YAML stream. Webhook configurations are
// renamed with a prefix because several projects call theirs "mutating-webhook-configuration".
func (m *manifests) add(data []byte, prefix string) error {
	objs, err := DecodeObjects(data)
	if err != nil {
		return err
	}
	for _, u := range objs {
		var target runtime.Object
		switch u.GetKind() {
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			m.crds, target = append(m.crds, crd), crd
		case "MutatingWebhookConfiguration":
			u.SetName(prefix + u.GetName())
			cfg := &admissionv1.MutatingWebhookConfiguration{}
			m.mutating, target = append(m.mutating, cfg), cfg
		case "ValidatingWebhookConfiguration":
			u.SetName(prefix + u.GetName())
			cfg := &admissionv1.ValidatingWebhookConfiguration{}
			m.validating, target = append(m.validating, cfg), cfg
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, target); err != nil {
			return fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// addFiles reads every file and adds its manifests.
func (m *manifests) addFiles(prefix string, paths ...string) error {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := m.add(data, prefix); err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
	}
	return nil
}

// addProviderCRDs reads a provider's CRD bases and labels them with the contract versions
// they implement, as the provider's config/crd kustomization does (CAPI finds a referenced
// object's contract version by that label).
func (m *manifests) addProviderCRDs(dir string, contractLabels map[string]string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	before := len(m.crds)
	if err := m.addFiles("", paths...); err != nil {
		return err
	}
	for _, crd := range m.crds[before:] {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		maps.Copy(crd.Labels, contractLabels)
	}
	return nil
}

// ProviderCRDs reads a provider's CRD bases with the contract labels its kustomization adds.
func ProviderCRDs(dir string, contractLabels map[string]string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	m := &manifests{}
	if err := m.addProviderCRDs(dir, contractLabels); err != nil {
		return nil, err
	}
	return m.crds, nil
}
