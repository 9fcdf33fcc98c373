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
	"fmt"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// InstallTurtlesCRD installs Rancher Turtles' CAPIProvider CRD (test/crds/turtles, copied from
// Turtles' repository) into the management cluster, so that the docs' commands for a Rancher
// site run against its real schema.
func (m *Management) InstallTurtlesCRD() error {
	_, err := envtest.InstallCRDs(m.Env.Config, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(testenv.RepoRoot(), "test", "crds", "turtles")},
		ErrorIfPathMissing: true, MaxTime: testenv.InstallWait,
	})
	return err
}

// operatorKinds are the Cluster API Operator's kinds by Turtles' CAPIProvider spec.type.
var operatorKinds = map[string]string{
	"core":             "CoreProvider",
	"infrastructure":   "InfrastructureProvider",
	"bootstrap":        "BootstrapProvider",
	"controlPlane":     "ControlPlaneProvider",
	"addon":            "AddonProvider",
	"ipam":             "IPAMProvider",
	"runtimeextension": "RuntimeExtensionProvider",
}

// turtlesOnlyFields are the CAPIProvider spec fields Turtles reads itself; the rest of its spec
// is the operator's ProviderSpec, inlined.
var turtlesOnlyFields = []string{"name", "type", "credentials", "features", "variables", "enableAutomaticUpdate"}

// TurtlesDefaultVariables are the variables Turtles' CAPIProvider CRD defaults status.variables
// to, which end up in every provider's configuration Secret.
var TurtlesDefaultVariables = map[string]string{
	"CLUSTER_TOPOLOGY":         "true",
	"EXP_CLUSTER_RESOURCE_SET": "true",
	"EXP_MACHINE_POOL":         "true",
}

// OperatorObjectsOf plays Rancher Turtles for a CAPIProvider: Turtles v0.27 runs the Cluster API
// Operator's reconciler on the CAPIProvider itself, after filling its spec in
// (internal/provider/defaults.go in Turtles' repository). The standalone operator the bed runs
// reads the same spec from its own kind, so this returns that object (kind by spec.type, same
// name and namespace, the operator's fields of the spec as they are) and the configuration
// Secret Turtles writes for it: spec.configSecret defaults to the CAPIProvider's own name, its
// namespace is always the CAPIProvider's, and the Secret holds Turtles' default variables,
// then spec.variables, then spec.features as "true"/"false" (features win).
//
// What Turtles does besides, which the bed does not play: it rewrites images to Rancher's
// registry, labels CRDs for Rancher, replaces cert-manager's Certificates by Rancher's own
// (its no-cert-manager setting), and picks versions from its own provider list for the
// providers it knows (it knows no `harvester`, so spec.version is used as written).
func OperatorObjectsOf(capiProvider *unstructured.Unstructured) (*unstructured.Unstructured, *corev1.Secret, error) {
	spec, _, err := unstructured.NestedMap(capiProvider.Object, "spec")
	if err != nil || spec == nil {
		return nil, nil, fmt.Errorf("CAPIProvider %s has no spec", capiProvider.GetName())
	}
	providerType, _ := spec["type"].(string)
	kind, ok := operatorKinds[providerType]
	if !ok {
		return nil, nil, fmt.Errorf("CAPIProvider %s: unknown type %q", capiProvider.GetName(), providerType)
	}
	// Turtles names the provider for clusterctl by spec.name; the standalone operator by the
	// object's name: the two must agree for the bed to stand in.
	if name, _ := spec["name"].(string); name != "" && name != capiProvider.GetName() {
		return nil, nil, fmt.Errorf("CAPIProvider %s names its provider %q: the standalone operator would install %q", capiProvider.GetName(), name, capiProvider.GetName())
	}
	name, namespace := capiProvider.GetName(), capiProvider.GetNamespace()

	variables := map[string]string{}
	for k, v := range TurtlesDefaultVariables {
		variables[k] = v
	}
	if vars, ok := spec["variables"].(map[string]any); ok {
		for k, v := range vars {
			s, ok := v.(string)
			if !ok {
				return nil, nil, fmt.Errorf("CAPIProvider %s: variable %s is not a string", name, k)
			}
			variables[k] = s
		}
	}
	if features, ok := spec["features"].(map[string]any); ok {
		for field, variable := range map[string]string{
			"clusterResourceSet": "EXP_CLUSTER_RESOURCE_SET",
			"clusterTopology":    "CLUSTER_TOPOLOGY",
			"machinePool":        "EXP_MACHINE_POOL",
		} {
			on, _ := features[field].(bool)
			variables[variable] = strconv.FormatBool(on)
		}
	}

	operatorSpec := map[string]any{}
	for k, v := range spec {
		operatorSpec[k] = v
	}
	for _, k := range turtlesOnlyFields {
		delete(operatorSpec, k)
	}
	secretName := name
	if cs, ok := operatorSpec["configSecret"].(map[string]any); ok {
		if n, _ := cs["name"].(string); n != "" {
			secretName = n
		}
	}
	operatorSpec["configSecret"] = map[string]any{"name": secretName, "namespace": namespace}
	if am, ok := operatorSpec["additionalManifests"].(map[string]any); ok {
		if n, _ := am["namespace"].(string); n == "" {
			am["namespace"] = namespace
		}
	}

	provider := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": OperatorGroupVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     operatorSpec,
	}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName},
		StringData: variables,
	}
	return provider, secret, nil
}

// ApplyAsTurtles applies what Turtles would hand the operator for a CAPIProvider
// (OperatorObjectsOf): the configuration Secret, then the operator's provider object, both
// created or updated in place.
func (m *Management) ApplyAsTurtles(ctx context.Context, capiProvider *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	provider, secret, err := OperatorObjectsOf(capiProvider)
	if err != nil {
		return nil, err
	}
	if err := apply(ctx, m.Env.Client, secret); err != nil {
		return nil, err
	}
	// The operator keeps its finalizer and status on the object: only the spec changes, as when
	// Turtles reconciles an edited CAPIProvider.
	existing := provider.DeepCopy()
	err = m.Env.Client.Get(ctx, client.ObjectKeyFromObject(provider), existing)
	switch {
	case err == nil:
		existing.Object["spec"] = provider.Object["spec"]
		if err := m.Env.Client.Update(ctx, existing); err != nil {
			return nil, fmt.Errorf("updating %s %s: %w", provider.GetKind(), provider.GetName(), err)
		}
		return existing, nil
	case apierrors.IsNotFound(err):
		if err := m.Env.Client.Create(ctx, provider); err != nil {
			return nil, fmt.Errorf("creating %s %s: %w", provider.GetKind(), provider.GetName(), err)
		}
	default:
		return nil, err
	}
	return provider, nil
}
