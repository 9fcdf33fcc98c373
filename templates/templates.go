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

// Package templates holds the cluster templates (clusterctl flavours) and renders them the way
// `clusterctl generate cluster` does, for the tests and `make demo`.
package templates

import (
	"embed"
	"fmt"
	"slices"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
)

// Files are the templates as released: cluster-template*.yaml and clusterclass-*.yaml.
//
//go:embed cluster-template*.yaml clusterclass-*.yaml
var Files embed.FS

// Names lists the embedded templates.
func Names() ([]string, error) {
	entries, err := Files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names, nil
}

// Variables lists a template's variables, as `clusterctl generate cluster --list-variables`,
// with their defaults (nil when the variable is required).
func Variables(name string) (map[string]*string, error) {
	raw, err := Files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return yamlprocessor.NewSimpleProcessor().GetVariableMap(raw)
}

// Render fills a template's variables from values, with clusterctl's processor (envsubst with
// `${VAR:=default}`); a required variable without a value is an error naming it.
func Render(name string, values map[string]string) ([]byte, error) {
	raw, err := Files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(v string) (string, error) {
		if value, ok := values[v]; ok {
			return value, nil
		}
		return "", fmt.Errorf("value for variable %q is not set", v)
	})
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return out, nil
}
