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

package config

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// What Rancher Turtles' import controller (internal/controllers/import_controller.go and
// util/util.go of github.com/rancher/turtles) looks at, re-declared here from its source.
const (
	// turtlesImportLabel on a Cluster or its namespace asks for an import; its value is read
	// with strconv.ParseBool, and the Cluster's own label wins over the namespace's.
	turtlesImportLabel = "cluster-api.cattle.io/rancher-auto-import"
	// turtlesImportedAnnotation marks a Cluster Turtles has imported already: it skips those.
	turtlesImportedAnnotation = "imported"
)

// turtlesWouldImport is Turtles' ShouldAutoImport rule.
func turtlesWouldImport(cluster, namespace metav1.Object) bool {
	if value, ok := cluster.GetLabels()[turtlesImportLabel]; ok {
		yes, err := strconv.ParseBool(value)
		if err != nil || !yes {
			return false
		}
		if _, imported := cluster.GetAnnotations()[turtlesImportedAnnotation]; !imported {
			return true
		}
	}
	yes, err := strconv.ParseBool(namespace.GetLabels()[turtlesImportLabel])
	return err == nil && yes
}

// fleetYAML is examples/fleet/fleet.yaml as Fleet reads it: the fields of fleet.yaml's own
// (FleetYAML in fleet's pkg/apis) apart, the rest is the Bundle's spec.
type fleetYAML struct {
	bundleSpec map[string]any
	// What fleet.yaml-only fields the example uses (name, labels, targetCustomizations...).
	own map[string]any
}

func readFleetYAML(t *testing.T) fleetYAML {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "fleet", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]any{}
	if err := yaml.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	f := fleetYAML{bundleSpec: map[string]any{}, own: map[string]any{}}
	for k, v := range all {
		switch k {
		case "name", "labels", "targetCustomizations", "imageScans", "overrideTargets":
			f.own[k] = v
		default:
			f.bundleSpec[k] = v
		}
	}
	return f
}

// startWithRancherCRDs is a management cluster with Turtles' CAPIProvider and Fleet's Bundle
// and GitRepo CRDs from their repositories (test/crds/turtles, test/crds/fleet).
func startWithRancherCRDs(t *testing.T) *testenv.Environment {
	t.Helper()
	o, err := testenv.ManagementOptions()
	if err != nil {
		t.Fatal(err)
	}
	o.CRDDirectoryPaths = append(o.CRDDirectoryPaths,
		filepath.Join(testenv.RepoRoot(), "test", "crds", "turtles"),
		filepath.Join(testenv.RepoRoot(), "test", "crds", "fleet"))
	env, err := testenv.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}

// strictCreate creates obj as `kubectl apply --validate=strict` would: the apiserver refuses
// fields the schema does not know instead of dropping them.
func strictCreate(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict))
}

func TestTurtlesAndFleetExamplesMatchTheirSchemas(t *testing.T) {
	g := NewWithT(t)
	env := startWithRancherCRDs(t)
	ctx := context.Background()

	var objs []*unstructured.Unstructured
	for _, dir := range []string{"turtles", "fleet"} {
		files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", dir, "*.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		for _, file := range files {
			if filepath.Base(file) == "fleet.yaml" {
				continue // not an object: applied below as the Bundle Fleet makes of it
			}
			data, err := os.ReadFile(file)
			g.Expect(err).NotTo(HaveOccurred())
			decoded, err := testenv.DecodeObjects(data)
			g.Expect(err).NotTo(HaveOccurred(), file)
			objs = append(objs, decoded...)
		}
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	g.Expect(kinds).To(HaveKey("CAPIProvider"))
	g.Expect(kinds).To(HaveKey("GitRepo"))

	// fleet.yaml: Fleet copies everything but its own few fields into the Bundle's spec.
	fy := readFleetYAML(t)
	g.Expect(fy.bundleSpec).To(HaveKey("diff"))
	g.Expect(fy.bundleSpec).To(HaveKey("namespaceLabels"))
	bundle := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1",
		"kind":       "Bundle",
		"metadata":   map[string]any{"name": "examples-fleet", "namespace": "fleet-local"},
		"spec":       fy.bundleSpec,
	}}
	objs = append(objs, bundle)

	// The GitRepo's namespace is Rancher's fleet-local workspace, which exists there.
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-local"}})).To(Succeed())
	// Namespaces first, whichever file names them, as `kubectl apply -f examples/turtles` does.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		rank := func(o *unstructured.Unstructured) int {
			if o.GetKind() == "Namespace" {
				return 0
			}
			return 1
		}
		return rank(a) - rank(b)
	})
	created := map[string]bool{}
	for _, o := range objs {
		// The same object with a field its schema lacks is refused: strict validation is on.
		typo := o.DeepCopy()
		g.Expect(unstructured.SetNestedField(typo.Object, true, "spec", "notInTheSchema")).To(Succeed())
		typo.SetName(o.GetName() + "-typo")
		err := strictCreate(ctx, env.Client, typo)
		g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "%s %s with an unknown field: %v", o.GetKind(), o.GetName(), err)
		g.Expect(err.Error()).To(ContainSubstring("notInTheSchema"))

		// Two examples are alternatives for one object (the CAPIProvider from GitHub or from a
		// ConfigMap): the later replaces the earlier; a Namespace both name is made once.
		key := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		if created[key] {
			if o.GetKind() == "Namespace" {
				continue
			}
			g.Expect(env.Client.Delete(ctx, o.DeepCopy())).To(Succeed(), key)
			g.Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy()))
			}).Should(BeTrue(), key)
		}
		g.Expect(strictCreate(ctx, env.Client, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		created[key] = true
	}

	// What the apiserver stored is what the example says (nothing pruned).
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(bundle.GroupVersionKind())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(bundle), stored)).To(Succeed())
	patches, _, err := unstructured.NestedSlice(stored.Object, "spec", "diff", "comparePatches")
	g.Expect(err).NotTo(HaveOccurred())
	want, _, _ := unstructured.NestedSlice(map[string]any{"d": fy.bundleSpec["diff"]}, "d", "comparePatches")
	g.Expect(patches).To(HaveLen(len(want)))
}

// A cluster from each of our templates, in the namespace Fleet makes from
// examples/fleet/fleet.yaml, is one Turtles imports, and the kubeconfig Secret its control-plane
// provider writes is where Turtles' import controller (CAPI's remote.NewClusterClient) finds it.
func TestTemplateClustersAreImportedByTurtles(t *testing.T) {
	g := NewWithT(t)
	env := startWithRancherCRDs(t)
	ctx := context.Background()
	g.Expect(env.StartManager(ctx)).To(Succeed())

	fy := readFleetYAML(t)
	namespace, _ := fy.bundleSpec["defaultNamespace"].(string)
	g.Expect(namespace).NotTo(BeEmpty(), "fleet.yaml names the namespace of the clusters")
	// The clusters are rendered as docs/gitops-and-rancher.md says: its command must put them
	// into that namespace (the templates write metadata.namespace, which Fleet keeps).
	g.Expect(documentedFleetRenderNamespace(t)).To(Equal(namespace), "the namespace docs/gitops-and-rancher.md renders the clusters into")
	labels := map[string]string{}
	for k, v := range fy.bundleSpec["namespaceLabels"].(map[string]any) {
		labels[k] = v.(string)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())

	names, err := templates.Names()
	g.Expect(err).NotTo(HaveOccurred())
	checked := 0
	for _, name := range names {
		if strings.HasPrefix(name, "clusterclass-") {
			continue
		}
		clusterName := "c" + strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(name, "cluster-template"), ".yaml"), "-", "")
		// A cluster the user keeps out (RANCHER_AUTO_IMPORT=false) stays out, although its
		// namespace is labelled for import: the Cluster's own label wins.
		kept := requiredValues(namespace)
		kept["CLUSTER_NAME"], kept["RANCHER_AUTO_IMPORT"] = clusterName+"out", "false"
		out, err := templates.Render(name, kept)
		g.Expect(err).NotTo(HaveOccurred(), name)
		objs, err := testenv.DecodeObjects(out)
		g.Expect(err).NotTo(HaveOccurred(), name)
		for _, o := range objs {
			if o.GetKind() == "Cluster" {
				g.Expect(turtlesWouldImport(o, ns)).To(BeFalse(), "%s with RANCHER_AUTO_IMPORT=false", name)
			}
		}

		values := requiredValues(namespace)
		values["CLUSTER_NAME"] = clusterName
		out, err = templates.Render(name, values)
		g.Expect(err).NotTo(HaveOccurred(), name)
		objs, err = testenv.DecodeObjects(out)
		g.Expect(err).NotTo(HaveOccurred(), name)
		for _, o := range objs {
			if o.GetKind() != "Cluster" {
				continue
			}
			if spec, ok := o.Object["spec"].(map[string]any); ok && spec["topology"] != nil {
				// Only the Cluster object is applied here: a topology Cluster would wait for its
				// ClusterClass, which does not change the Cluster's metadata. Its webhook wants
				// a reference instead.
				delete(spec, "topology")
				spec["infrastructureRef"] = map[string]any{
					"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "HarvesterCluster", "name": o.GetName(),
				}
			}
			g.Expect(strictCreate(ctx, env.Client, o)).To(Succeed(), name)
			cluster := &unstructured.Unstructured{}
			cluster.SetGroupVersionKind(o.GroupVersionKind())
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), cluster)).To(Succeed())
			stored := &corev1.Namespace{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: cluster.GetNamespace()}, stored)).To(Succeed())
			g.Expect(turtlesWouldImport(cluster, stored)).To(BeTrue(), "%s: Turtles would not import %s", name, cluster.GetName())
			// The Cluster's own label asks for it: a namespace Fleet did not label (one that
			// existed before the bundle, or another the user renders into) imports it too.
			g.Expect(turtlesWouldImport(cluster, &metav1.ObjectMeta{})).To(BeTrue(), "%s: the Cluster alone", name)

			// The control-plane provider (KCP, RKE2's, K3s') writes the admin kubeconfig under
			// the name CAPI's secret package gives it; here it holds this apiserver's.
			kubeconfig, err := env.Kubeconfig()
			g.Expect(err).NotTo(HaveOccurred())
			s := testenv.KubeconfigSecret(cluster.GetNamespace(), cluster.GetName(), kubeconfig)
			g.Expect(s.Name).To(Equal(secret.Name(cluster.GetName(), secret.Kubeconfig)))
			g.Expect(env.Client.Create(ctx, s)).To(Succeed())
			remoteClient, err := remote.NewClusterClient(ctx, "turtles-import", env.Client, client.ObjectKeyFromObject(cluster))
			g.Expect(err).NotTo(HaveOccurred(), name)
			g.Expect(remoteClient.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})).To(Succeed())
			checked++
		}
	}
	g.Expect(checked).To(BeNumerically(">=", 3), "clusters checked")
}

// documentedFleetRenderNamespace is the --target-namespace of the `clusterctl generate cluster`
// command that docs/gitops-and-rancher.md gives for the Fleet bundle ("" when it names none).
func documentedFleetRenderNamespace(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "gitops-and-rancher.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "clusterctl generate cluster") || !strings.Contains(line, "examples/fleet/") {
			continue
		}
		fields := strings.Fields(line)
		for i, f := range fields {
			if f == "--target-namespace" && i+1 < len(fields) {
				return fields[i+1]
			}
			if v, ok := strings.CutPrefix(f, "--target-namespace="); ok {
				return v
			}
		}
		return ""
	}
	t.Fatal("docs/gitops-and-rancher.md gives no clusterctl generate cluster command for the Fleet bundle")
	return ""
}

// Removing the Fleet bundle or its GitRepo must not delete the guest clusters (and their VMs):
// both examples keep what Fleet deployed (Fleet's Bundle and GitRepo keepResources).
func TestTheFleetExampleKeepsClustersWhenTheBundleGoes(t *testing.T) {
	if keep, _ := readFleetYAML(t).bundleSpec["keepResources"].(bool); !keep {
		t.Error("examples/fleet/fleet.yaml: keepResources is not true")
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "fleet", "gitrepo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gitRepo := map[string]any{}
	if err := yaml.Unmarshal(data, &gitRepo); err != nil {
		t.Fatal(err)
	}
	if keep, _, _ := unstructured.NestedBool(gitRepo, "spec", "keepResources"); !keep {
		t.Error("examples/fleet/gitrepo.yaml: spec.keepResources is not true")
	}
}
