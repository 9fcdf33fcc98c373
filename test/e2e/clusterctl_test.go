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

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/release"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The first deployment as the docs give it, with clusterctl built from the cluster-api module
// (`make clusterctl`): a release built here installed from a local repository
// (docs/releases.md), a cluster generated and applied (docs/getting-started.md), the provider
// upgraded to a later release with the cluster running (docs/operations.md), and the cluster
// deleted. The first release is the previous one (PREVIOUS_RELEASE_DIR, built by `make
// previous-release` from a commit of this repository: its manager, its assets and its Harvester
// files), the later one is the code checked out. The management cluster is a bare one of its own (CAPI and kubeadm providers,
// cert-manager's API); the bed plays the kubelet for the Deployment clusterctl applies.
var _ = Describe("clusterctl with a release built here", func() {
	It("installs the previous release from a local repository, generates a cluster that comes up, upgrades the provider under it to this one without re-creating a VM, and deletes the cluster", func() {
		requireTool("CLUSTERCTL")
		requireTool("PREVIOUS_RELEASE_DIR")
		previous := os.Getenv("PREVIOUS_RELEASE_DIR")
		const first, second, registry = "v0.1.0-mine", "v0.1.1-mine", "registry.example.com/capi"
		const target, namespace, name = "guests", "default", "mycluster"

		m, err := testBed.AddBareManagement(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, m)).To(Succeed()) })
		Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
		Expect(testBed.Harvester.AddIPPool(ctx, harvestersim.IPPoolSpec{
			Name: "loopback-" + target, Subnet: "127.77.0.0/24", RangeStart: "127.77.0.50", RangeEnd: "127.77.0.59",
			Namespace: target, Priority: testBed.Harvester.UniquePriority(),
		})).To(Succeed())

		// The user's machine: a home with clusterctl's configuration, and a checkout where `make
		// release` wrote the releases (their clusterctl assets; the image archives are the bed's).
		home, checkout := GinkgoT().TempDir(), GinkgoT().TempDir()
		image := func(name, version string) string { return registry + "/" + name + ":" + version }
		previousReleaseInto(checkout, first, registry)
		harvesterEnv := previousHarvesterFiles(home, target)
		Expect(providerNamespacedVerbs()).NotTo(ContainElement("patch"), "the previous release's identity cannot patch VMs yet")
		// clusterctl reads Cluster API's own providers' contract from their repositories: a local
		// one, as an air-gapped site has, so that nothing here reaches GitHub.
		capiEntries, err := testBed.CAPIRepository(filepath.Join(home, "capi-providers"))
		Expect(err).NotTo(HaveOccurred())
		ours := documentedYAML("releases.md", "local-repository-config")
		ours = strings.ReplaceAll(strings.TrimPrefix(ours, "providers:\n"), "/home/me", home)
		Expect(ours).To(HavePrefix("- name: harvester"))
		Expect(os.MkdirAll(filepath.Join(home, ".config", "cluster-api"), 0o700)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(home, ".config", "cluster-api", "clusterctl.yaml"), []byte("providers:\n"+capiEntries+ours), 0o600)).To(Succeed())
		kubeconfig, err := m.Env.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(home, "management.yaml"), kubeconfig, 0o600)).To(Succeed())
		env := []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "management.yaml"),
			// The manager's metrics listen on a free loopback port: many processes share this machine.
			"CAPHV_DIAGNOSTICS_ADDRESS=" + freeLoopbackAddress(),
			"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "GOPROXY=off"}

		By("docs/releases.md and getting-started.md: the release copied into the local repository, clusterctl init installs it")
		runDocumented(documentedBlock("releases.md", "copy-local-release"), checkout, env...)
		install := documentedBlock("getting-started.md", "install")
		Expect(documentedBlock("README.md", "install")).To(Equal(install), "README.md's install command is getting-started.md's")
		runDocumented(install, checkout, env...)
		expectInstalled(m.Env.Client, first, registry)

		By("docs/gitops-and-rancher.md: clusterctl renders a cluster for the Fleet bundle into the namespace Turtles imports from")
		Expect(os.MkdirAll(filepath.Join(checkout, "examples", "fleet"), 0o755)).To(Succeed())
		runDocumented(documentedBlock("gitops-and-rancher.md", "render-for-fleet"), checkout, append(env, "NAME=fleet-one",
			"KUBERNETES_VERSION=v1.35.4", "HARVESTER_NAMESPACE="+target, "HARVESTER_NETWORK=default/vlan10", "HARVESTER_IMAGE=default/ubuntu-24.04")...)
		rendered, err := os.ReadFile(filepath.Join(checkout, "examples", "fleet", "fleet-one.yaml"))
		Expect(err).NotTo(HaveOccurred())
		objs, err := testenv.DecodeObjects(rendered)
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(ContainElement(And(HaveField("Object", HaveKeyWithValue("kind", "Cluster")))))
		for _, o := range objs {
			Expect(o.GetNamespace()).To(Equal("capi-clusters"), "%s %s", o.GetKind(), o.GetName())
		}
		provider := providerOptions
		provider.LogFile = ""
		current := provider.Binary
		provider.Binary = filepath.Join(previous, "manager")
		Expect(m.StartInstalledProvider(ctx, provider)).To(Succeed())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() && m.Provider != nil {
				GinkgoWriter.Printf("--- the clusterctl-installed manager's log ---\n%s\n", m.Provider.LogTail(60))
			}
		})

		By("docs/getting-started.md: the platform admin lends the identity, the user generates and applies a cluster")
		harvesterKubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		user := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(user, "harvester.kubeconfig"), harvesterKubeconfig, 0o600)).To(Succeed())
		runDocumented(documentedBlock("getting-started.md", "lend-identity"), user, env...)
		runDocumented(documentedBlock("getting-started.md", "generate-and-apply"), user, env...)
		Expect(m.Env.Client.Get(ctx, client.ObjectKey{Name: "harvester"}, &infrav1.HarvesterClusterIdentity{})).To(Succeed())

		By("the cluster's machines get Nodes, and the kubeconfig clusterctl wrote reaches the guest")
		state := clusterState(m.Env.Client, namespace, name)
		waitProgressing("every Machine with its Node", state, func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(m.Env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(3))
			for _, machine := range machines.Items {
				g.Expect(machine.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", machine.Name)
			}
		})
		guestConfig, err := clientcmd.BuildConfigFromFlags("", filepath.Join(user, "mycluster.kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		Expect(guestConfig.Host).To(HavePrefix("https://127.77.0.5"))
		guestClient, err := client.New(guestConfig, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			nodes := &corev1.NodeList{}
			g.Expect(guestClient.List(ctx, nodes)).To(Succeed())
			g.Expect(nodes.Items).To(HaveLen(3))
		}).Should(Succeed())
		// Each VM's UID and generation: the upgraded manager neither re-creates nor rewrites the
		// VMs the previous release made.
		vms := func() map[string]string {
			list := &kubevirtv1.VirtualMachineList{}
			Expect(harvesterClient().List(ctx, list, client.InNamespace(target))).To(Succeed())
			made := map[string]string{}
			for _, vm := range list.Items {
				made[vm.Name] = fmt.Sprintf("%s generation %d", vm.UID, vm.Generation)
			}
			return made
		}
		before := vms()
		Expect(before).To(HaveLen(3))

		By("docs/operations.md: this version's Harvester files applied first, then clusterctl upgrades the provider to it; the cluster keeps its VMs")
		_, err = release.Write(filepath.Join(checkout, "out", "release", second), release.Options{
			Root: testenv.RepoRoot(), Image: image("cluster-api-provider-harvester", second), CCMImage: image("harvester-cloud-controller-manager", second),
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(os.CopyFS(filepath.Join(home, "capi-repo", "infrastructure-harvester", second), os.DirFS(filepath.Join(checkout, "out", "release", second)))).To(Succeed())
		runDocumented(documentedBlock("operations.md", "upgrade-harvester-identity"), testenv.RepoRoot(), harvesterEnv...)
		Expect(providerNamespacedVerbs()).To(ContainElement("patch"), "this version's identity patches VMs (host maintenance) and volumes (in-place growth)")
		out := runDocumented(documentedBlock("operations.md", "upgrade-provider"), user, append(env, "VERSION="+second)...)
		Expect(out).To(ContainSubstring(second), "the plan offers the later release")
		expectInstalled(m.Env.Client, second, registry)
		provider.Binary = current
		Expect(m.StartInstalledProvider(ctx, provider)).To(Succeed())
		By("the upgraded provider scales the workers (docs/operations.md) and re-creates nothing")
		runDocumented(documentedBlock("operations.md", "scale-workers"), user, append(env, "NAMESPACE="+namespace, "CLUSTER="+name)...)
		waitProgressing("the fourth Node", state, func(g Gomega) {
			nodes := &corev1.NodeList{}
			g.Expect(guestClient.List(ctx, nodes)).To(Succeed())
			g.Expect(nodes.Items).To(HaveLen(4))
		})
		after := vms()
		for vm, uid := range before {
			Expect(after).To(HaveKeyWithValue(vm, uid), "VM %s was re-created or rewritten after the upgrade", vm)
		}

		By("docs/getting-started.md: deleting the cluster leaves nothing on Harvester")
		runDocumented(documentedBlock("getting-started.md", "delete"), user, env...)
		clusterGone(m.Env.Client, namespace, name)
		leakFree(target)
	})
})

// previousReleaseInto writes the previous release's assets (PREVIOUS_RELEASE_DIR, as its own
// `make release` wrote them) into checkout's out/release/version, for images of registry.
func previousReleaseInto(checkout, version, registry string) {
	GinkgoHelper()
	dir := filepath.Join(checkout, "out", "release", version)
	Expect(os.CopyFS(dir, os.DirFS(filepath.Join(os.Getenv("PREVIOUS_RELEASE_DIR"), "release")))).To(Succeed())
	componentsFile := filepath.Join(dir, "infrastructure-components.yaml")
	components, err := os.ReadFile(componentsFile)
	Expect(err).NotTo(HaveOccurred())
	components, err = release.Retag(components, registry+"/cluster-api-provider-harvester:"+version, registry+"/harvester-cloud-controller-manager:"+version)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(componentsFile, components, 0o644)).To(Succeed())
}

// previousHarvesterFiles sets Harvester up as the previous release's docs do: its own
// provider-identity and admission-policy files (harvester-identity.md's set-up, run in that
// version's checkout) for target; this version's again when the spec ends, whatever happens, for
// the scenarios after it. It returns the environment of the Harvester admin's commands (an admin
// kubeconfig written into home, and TARGET_NAMESPACE).
func previousHarvesterFiles(home, target string) []string {
	GinkgoHelper()
	harvesterAdmin, err := testBed.Harvester.Env.Kubeconfig()
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(home, "harvester-admin.yaml"), harvesterAdmin, 0o600)).To(Succeed())
	env := []string{"KUBECONFIG=" + filepath.Join(home, "harvester-admin.yaml"), "TARGET_NAMESPACE=" + target}
	runDocumented(documentedBlock("harvester-identity.md", "set-up"), filepath.Join(os.Getenv("PREVIOUS_RELEASE_DIR"), "src"), env...)
	DeferCleanup(func() {
		runDocumented(documentedBlock("harvester-identity.md", "set-up"), testenv.RepoRoot(), env...)
	})
	return env
}

// expectInstalled checks what clusterctl installed: its inventory records the provider at the
// version, the Deployment names the release's image, and the provider's CRDs carry clusterctl's
// labels.
func expectInstalled(c client.Client, version, registry string) {
	GinkgoHelper()
	inventory := &unstructured.Unstructured{}
	inventory.SetGroupVersionKind(clusterctlv1.GroupVersion.WithKind("Provider"))
	Expect(c.Get(ctx, client.ObjectKey{Namespace: "capi-harvester-system", Name: bed.ProviderManifestLabel}, inventory)).To(Succeed())
	Expect(inventory.Object).To(HaveKeyWithValue("version", version))
	deploy := &appsv1.Deployment{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: "capi-harvester-system", Name: "capi-harvester-controller-manager"}, deploy)).To(Succeed())
	Expect(deploy.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Image", registry+"/cluster-api-provider-harvester:"+version)))
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(c.Get(ctx, client.ObjectKey{Name: "harvesterclusters.infrastructure.cluster.x-k8s.io"}, crd)).To(Succeed())
	Expect(crd.Labels).To(HaveKeyWithValue(clusterv1.ProviderNameLabel, bed.ProviderManifestLabel))
}

// freeLoopbackAddress is a loopback address with a port nothing listens on now.
func freeLoopbackAddress() string {
	GinkgoHelper()
	port, err := testenv.FreeLoopbackPort()
	Expect(err).NotTo(HaveOccurred())
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// providerNamespacedVerbs are the verbs the provider identity's namespaced ClusterRole on the
// simulated Harvester grants on VMs.
func providerNamespacedVerbs() []string {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{}
	Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: "capi-harvester-provider-namespaced"}, role)).To(Succeed())
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "virtualmachines") {
			return rule.Verbs
		}
	}
	return nil
}
