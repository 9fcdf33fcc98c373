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
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// documentedVariables reads the variable table of docs/templates.md: name -> default cell.
func documentedVariables(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "templates.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\| ([^|]*) \\|")
	vars := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		vars[m[1]] = strings.TrimSpace(m[2])
	}
	return vars
}

func TestEveryTemplateVariableIsDocumentedWithItsDefault(t *testing.T) {
	g := NewWithT(t)
	names, err := templates.Names()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(ContainElement("cluster-template.yaml"))
	documented := documentedVariables(t)
	for _, name := range names {
		vars, err := templates.Variables(name)
		g.Expect(err).NotTo(HaveOccurred())
		for v, def := range vars {
			g.Expect(documented).To(HaveKey(v), "%s: variable %s is not in docs/templates.md", name, v)
			if def == nil {
				g.Expect(documented[v]).To(HavePrefix("(required"), "%s: %s has no default in the template", name, v)
			} else {
				g.Expect(documented[v]).To(Equal("`"+*def+"`"), "%s: the default of %s", name, v)
			}
		}
	}
}

// requiredValues are what a user sets for every template.
func requiredValues(namespace string) map[string]string {
	return map[string]string{
		"CLUSTER_NAME":           "tpl",
		"NAMESPACE":              namespace,
		"KUBERNETES_VERSION":     "v1.35.4",
		"HARVESTER_NAMESPACE":    "guests",
		"HARVESTER_NETWORK":      "default/vlan10",
		"HARVESTER_IMAGE":        "default/ubuntu-24.04",
		"RKE2_VERSION":           "v1.33.5+rke2r1",
		"K3S_VERSION":            "v1.33.5+k3s1",
		"NODE_IP_POOL_ADDRESSES": "[10.0.0.10-10.0.0.50]",
		"NODE_IP_POOL_GATEWAY":   "10.0.0.1",
		"NODE_NAMESERVERS":       "[10.0.0.53, 10.0.0.54]",
	}
}

// bootstrapProviders are the RKE2 and K3s providers whose CRDs the flavours need, from their
// modules (the CRDs only: their controllers and webhooks do not run here), with the contract
// labels of their kustomizations.
var bootstrapProviders = []struct {
	module, version, contract string
}{
	{"github.com/rancher/cluster-api-provider-rke2", "v0.21.0", "v1alpha1_v1beta1"},
	{"github.com/k3s-io/cluster-api-k3s", "v0.4.0", "v1beta1_v1beta2"},
}

// managementWithProviders is a management cluster with the RKE2 and K3s CRDs too.
func managementWithProviders(t *testing.T) *testenv.Environment {
	t.Helper()
	o, err := testenv.ManagementOptions()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range bootstrapProviders {
		dir, err := testenv.DownloadModule(p.module, p.version)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"bootstrap", "controlplane"} {
			crds, err := testenv.ProviderCRDs(filepath.Join(dir, sub, "config", "crd", "bases"),
				map[string]string{"cluster.x-k8s.io/v1beta1": p.contract})
			if err != nil {
				t.Fatal(err)
			}
			for _, crd := range crds {
				// K3s keeps stale copies of each half's CRDs in the other's directory (its
				// kustomizations install only their own): a CRD comes from its own half.
				if crd.Spec.Group != sub+".cluster.x-k8s.io" {
					continue
				}
				if !seen[crd.Name] {
					seen[crd.Name] = true
					o.CRDs = append(o.CRDs, crd)
				}
			}
		}
	}
	// The static-ip flavour's InClusterIPPool: Cluster API's in-cluster IPAM provider's CRDs,
	// from its module (the provider itself does not run here).
	ipamDir, err := testenv.DownloadModule("sigs.k8s.io/cluster-api-ipam-provider-in-cluster", "v1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	ipamCRDs, err := testenv.ProviderCRDs(filepath.Join(ipamDir, "config", "crd", "bases"), nil)
	if err != nil {
		t.Fatal(err)
	}
	o.CRDs = append(o.CRDs, ipamCRDs...)
	env, err := testenv.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	// The topology flavour: CAPI's feature gate (its webhooks run in this process) and its
	// ClusterClass controller, which the Cluster webhook waits for.
	if err := feature.MutableGates.Set(string(feature.ClusterTopology) + "=true"); err != nil {
		t.Fatal(err)
	}
	if err := (&clusterclass.Reconciler{Client: env.Manager.GetClient()}).SetupWithManager(context.Background(), env.Manager,
		controller.Options{SkipNameValidation: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	return env
}

// Every template, rendered, is accepted by the management cluster: CAPI's, the kubeadm
// providers' and this provider's CRDs and webhooks, as clusterctl would apply it.
func TestEveryTemplateAppliesToAManagementCluster(t *testing.T) {
	g := NewWithT(t)
	env := managementWithProviders(t)
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ctx := context.Background()
	// The indexes CAPI's manager registers: the ClusterClass webhook lists a class's Clusters
	// by one when the class is updated (applied again below).
	g.Expect(index.AddDefaultIndexes(ctx, env.Manager)).To(Succeed())
	g.Expect(env.StartManager(ctx)).To(Succeed())

	names, err := templates.Names()
	g.Expect(err).NotTo(HaveOccurred())
	var unignored []string
	for i, name := range names {
		if strings.HasPrefix(name, "clusterclass-") {
			continue // applied with the topology flavour, as clusterctl generates them together
		}
		namespace := "tpl-" + string(rune('a'+i))
		g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		out, err := templates.Render(name, requiredValues(namespace))
		g.Expect(err).NotTo(HaveOccurred(), name)
		if name == "cluster-template-topology.yaml" {
			class, err := templates.Render("clusterclass-harvester.yaml", requiredValues(namespace))
			g.Expect(err).NotTo(HaveOccurred())
			out = append(append(class, []byte("\n---\n")...), out...)
		}
		g.Expect(string(out)).NotTo(ContainSubstring("${"), name)
		objs, err := testenv.DecodeObjects(out)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(objs).NotTo(BeEmpty())
		for _, o := range objs {
			rendered := o.DeepCopy()
			if o.GetKind() == "Cluster" && name == "cluster-template-topology.yaml" {
				// The Cluster webhook checks its variables against the ClusterClass once CAPI's
				// ClusterClass controller has reconciled it.
				g.Eventually(func(g Gomega) {
					class := &clusterv1.ClusterClass{}
					g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "harvester"}, class)).To(Succeed())
					g.Expect(class.Status.ObservedGeneration).To(Equal(class.Generation))
					g.Expect(class.Status.Variables).NotTo(BeEmpty())
				}).WithTimeout(30 * time.Second).Should(Succeed())
			}
			g.Expect(env.Client.Create(ctx, o)).To(Succeed(), "%s: %s %s", name, o.GetKind(), o.GetName())
			// The same file applied again server-side, as `kubectl apply --server-side` and a
			// GitOps agent re-apply it: accepted (by the schema, which takes no null for a
			// field, and by the webhooks that keep templates immutable), and a no-op.
			g.Expect(env.Client.Patch(ctx, rendered.DeepCopy(), client.Apply, client.FieldOwner("fleet-agent"), client.ForceOwnership)).To(Succeed(),
				"%s: %s %s applied server-side", name, o.GetKind(), o.GetName())
			// What the defaulting webhooks added must not look like drift to GitOps.
			var added []string
			addedPaths(rendered.Object["spec"], o.Object["spec"], "/spec", &added)
			for _, path := range added {
				if !fleetIgnores(t, o.GetAPIVersion(), o.GetKind(), path) {
					unignored = append(unignored, fmt.Sprintf("%s: %s %s", name, o.GetKind(), path))
				}
			}
		}
	}
	g.Expect(unignored).To(BeEmpty(), "fields the webhooks set that examples/fleet/fleet.yaml does not ignore")
}

// addedPaths collects the JSON pointers where after has what before has not.
func addedPaths(before, after any, path string, out *[]string) {
	switch a := after.(type) {
	case nil:
		return
	case map[string]any:
		b, ok := before.(map[string]any)
		if !ok {
			*out = append(*out, path)
			return
		}
		for k, v := range a {
			addedPaths(b[k], v, path+"/"+k, out)
		}
	case []any:
		b, ok := before.([]any)
		if !ok || len(b) != len(a) {
			*out = append(*out, path)
			return
		}
		for i := range a {
			addedPaths(b[i], a[i], fmt.Sprintf("%s/%d", path, i), out)
		}
	default:
		// Numbers decode as float64 from YAML and int64 from the apiserver: compare as text.
		if before == nil || fmt.Sprint(before) != fmt.Sprint(after) {
			*out = append(*out, path)
		}
	}
}

// fleetIgnores tells whether the example Fleet bundle's comparePatches ignore a field.
func fleetIgnores(t *testing.T, apiVersion, kind, path string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "fleet", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Diff struct {
			ComparePatches []struct {
				APIVersion   string   `json:"apiVersion"`
				Kind         string   `json:"kind"`
				JSONPointers []string `json:"jsonPointers"`
			} `json:"comparePatches"`
		} `json:"diff"`
	}
	if err := yaml.Unmarshal(data, &bundle); err != nil {
		t.Fatal(err)
	}
	for _, p := range bundle.Diff.ComparePatches {
		if p.APIVersion != apiVersion || p.Kind != kind {
			continue
		}
		for _, pointer := range p.JSONPointers {
			if path == pointer || strings.HasPrefix(path, pointer+"/") {
				return true
			}
		}
	}
	return false
}

func TestRenderNamesMissingVariables(t *testing.T) {
	g := NewWithT(t)
	_, err := templates.Render("cluster-template.yaml", map[string]string{"CLUSTER_NAME": "x"})
	g.Expect(err).To(MatchError(ContainSubstring("HARVESTER_NETWORK")))
}
