package config

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		"CLUSTER_NAME":             "tpl",
		"NAMESPACE":                namespace,
		"KUBERNETES_VERSION":       "v1.35.4",
		"HARVESTER_KUBECONFIG_B64": base64.StdEncoding.EncodeToString([]byte("apiVersion: v1\nkind: Config\n")),
		"HARVESTER_NETWORK":        "default/vlan10",
		"HARVESTER_IMAGE":          "default/ubuntu-24.04",
	}
}

// Every template, rendered, is accepted by the management cluster: CAPI's, the kubeadm
// providers' and this provider's CRDs and webhooks, as clusterctl would apply it.
func TestEveryTemplateAppliesToAManagementCluster(t *testing.T) {
	g := NewWithT(t)
	env, err := testenv.StartManagement()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ctx := context.Background()
	g.Expect(env.StartManager(ctx)).To(Succeed())

	names, err := templates.Names()
	g.Expect(err).NotTo(HaveOccurred())
	for i, name := range names {
		namespace := "tpl-" + string(rune('a'+i))
		g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		out, err := templates.Render(name, requiredValues(namespace))
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(string(out)).NotTo(ContainSubstring("${"), name)
		objs, err := testenv.DecodeObjects(out)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(objs).NotTo(BeEmpty())
		for _, o := range objs {
			g.Expect(env.Client.Create(ctx, o)).To(Succeed(), "%s: %s %s", name, o.GetKind(), o.GetName())
		}
	}
}

func TestRenderNamesMissingVariables(t *testing.T) {
	g := NewWithT(t)
	_, err := templates.Render("cluster-template.yaml", map[string]string{"CLUSTER_NAME": "x"})
	g.Expect(err).To(MatchError(ContainSubstring("HARVESTER_KUBECONFIG_B64")))
}
