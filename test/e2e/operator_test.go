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
	"strings"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/release"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Installed and upgraded as Rancher Turtles does it (docs/gitops-and-rancher.md): the real Cluster
// API Operator (v0.27.0, the one Turtles v0.27 compiles in) installs the previous release from a
// ConfigMap, as an air-gapped Rancher site gives it, from the CAPIProvider the docs apply; a
// cluster comes up through that installation; the CAPIProvider's file with this version, applied
// server-side over it as Fleet applies a changed file, moves the provider to this version, and the operator upgrades it with the cluster running and nothing
// re-created on Harvester. The bed plays Turtles' mapping of a CAPIProvider onto the operator
// (bed.OperatorObjectsOf), and the kubelet for the Deployments the operator applies.
var _ = Describe("The Cluster API Operator, as Rancher Turtles runs it", func() {
	It("installs the previous release from a ConfigMap through the air-gapped CAPIProvider, provisions a cluster, and upgrades the provider under it to this one by the CAPIProvider's version without re-creating a VM", func() {
		requireTool("CLUSTERCTL")
		requireTool("PREVIOUS_RELEASE_DIR")
		const first, second, registry = "v0.1.0-mine", "v0.1.1-mine", "registry.example.com/capi"
		const target, namespace, name = "guests", "default", "turtled"
		const providerNamespace = "capi-harvester-system"

		// The pool goes after the management cluster has deleted its cluster (cleanups run last
		// first): Harvester refuses to delete a pool that still has an allocation.
		Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
		pool := harvestersim.IPPoolSpec{
			Name: "loopback-operator-" + target, Subnet: "127.77.0.0/24", RangeStart: "127.77.0.80", RangeEnd: "127.77.0.89",
			Namespace: target, Priority: testBed.Harvester.UniquePriority(),
		}
		Expect(testBed.Harvester.AddIPPool(ctx, pool)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(harvesterClient().Delete(ctx, &lbv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: pool.Name}}))).To(Succeed())
		})

		m, err := testBed.AddBareManagement(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, m)).To(Succeed()) })
		Expect(m.InstallTurtlesCRD()).To(Succeed())
		operator, err := m.StartCAPIOperator(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				log, _ := operator.Log()
				lines := strings.Split(string(log), "\n")
				GinkgoWriter.Printf("--- the Cluster API Operator's log ---\n%s\n", strings.Join(lines[max(0, len(lines)-60):], "\n"))
				if m.Provider != nil {
					GinkgoWriter.Printf("--- the operator-installed manager's log ---\n%s\n", m.Provider.LogTail(60))
				}
			}
		})
		// The platform engineer's checkout, where `make release` wrote both releases, with the
		// examples the docs apply.
		home, checkout := GinkgoT().TempDir(), GinkgoT().TempDir()
		previousReleaseInto(checkout, first, registry)
		_, err = release.Write(filepath.Join(checkout, "out", "release", second), release.Options{
			Root: testenv.RepoRoot(), Image: registry + "/cluster-api-provider-harvester:" + second,
			CCMImage: registry + "/harvester-cloud-controller-manager:" + second,
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(os.CopyFS(filepath.Join(checkout, "examples", "turtles"), os.DirFS(filepath.Join(testenv.RepoRoot(), "examples", "turtles")))).To(Succeed())
		harvesterEnv := previousHarvesterFiles(home, target)
		kubeconfig, err := m.Env.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(home, "management.yaml"), kubeconfig, 0o600)).To(Succeed())
		env := []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "management.yaml"),
			"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "GOPROXY=off"}

		// asTurtles reads the CAPIProvider the docs applied and hands the operator what Turtles
		// would.
		asTurtles := func() {
			GinkgoHelper()
			capiProvider := &unstructured.Unstructured{}
			capiProvider.SetAPIVersion("turtles-capi.cattle.io/v1alpha1")
			capiProvider.SetKind("CAPIProvider")
			Expect(m.Env.Client.Get(ctx, client.ObjectKey{Namespace: providerNamespace, Name: "harvester"}, capiProvider)).To(Succeed())
			_, err := m.ApplyAsTurtles(ctx, capiProvider)
			Expect(err).NotTo(HaveOccurred())
		}
		// runs plays the kubelet for the operator's Deployment at version: once the operator has
		// applied it, its manager (binary) runs as it says, and the operator reports the provider
		// Ready at that version.
		runs := func(version, binary string) (deployment types.UID) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				deploy := &appsv1.Deployment{}
				defer func() { deployment = deploy.UID }()
				g.Expect(m.Env.Client.Get(ctx, client.ObjectKey{Namespace: providerNamespace, Name: "capi-harvester-controller-manager"}, deploy)).To(Succeed())
				g.Expect(deploy.DeletionTimestamp).To(BeNil())
				g.Expect(deploy.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Image", registry+"/cluster-api-provider-harvester:"+version)))
			}).Should(Succeed(), "the operator applies the release's Deployment")
			provider := providerOptions
			provider.LogFile = ""
			provider.Binary = binary
			Expect(m.StartInstalledProvider(ctx, provider)).To(Succeed())
			Expect(bed.WaitOperatorProviderReady(ctx, m.Env.Client, "InfrastructureProvider", providerNamespace, "harvester", version)).To(Succeed())
			return deployment
		}

		By("docs/gitops-and-rancher.md: the previous release in a ConfigMap, the air-gapped CAPIProvider applied; the operator installs it")
		runDocumented(documentedBlock("gitops-and-rancher.md", "airgapped-configmap"), checkout, append(env, "VERSION="+first)...)
		runDocumented(documentedBlock("gitops-and-rancher.md", "airgapped-provider"), checkout, append(env, "VERSION="+first)...)
		asTurtles()
		installed := runs(first, filepath.Join(os.Getenv("PREVIOUS_RELEASE_DIR"), "manager"))
		secret := &corev1.Secret{}
		Expect(m.Env.Client.Get(ctx, client.ObjectKey{Namespace: providerNamespace, Name: "harvester"}, secret)).To(Succeed())
		Expect(secret.Data).To(HaveKeyWithValue("CAPHV_DIAGNOSTICS_ADDRESS", []byte(":8443")), "the CAPIProvider's variables are the components' variables")
		deploy := &appsv1.Deployment{}
		Expect(m.Env.Client.Get(ctx, client.ObjectKey{Namespace: providerNamespace, Name: "capi-harvester-controller-manager"}, deploy)).To(Succeed())
		Expect(strings.Join(deploy.Spec.Template.Spec.Containers[0].Args, " ")).To(ContainSubstring("--diagnostics-address=:8443"))

		By("the platform admin lends the identity; a cluster rendered from the release's template is applied")
		harvesterKubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		user := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(user, "harvester.kubeconfig"), harvesterKubeconfig, 0o600)).To(Succeed())
		runDocumented(documentedBlock("getting-started.md", "lend-identity"), user, env...)
		runDocumented(fmt.Sprintf(`clusterctl generate cluster %s --from %q \
  --kubernetes-version v1.35.4 --control-plane-machine-count 1 --worker-machine-count 1 > cluster.yaml
kubectl apply -f cluster.yaml`,
			name, filepath.Join(checkout, "out", "release", first, "cluster-template.yaml")), user,
			append(env, "HARVESTER_IDENTITY=harvester", "HARVESTER_NAMESPACE="+target, "HARVESTER_NETWORK=default/vlan10",
				"HARVESTER_IMAGE=default/ubuntu-24.04", "HARVESTER_SSH_KEYPAIRS=[default/ops]")...)
		state := clusterState(m.Env.Client, namespace, name)
		nodes := func(n int) {
			GinkgoHelper()
			waitProgressing(fmt.Sprintf("%d Machines with their Nodes", n), state, func(g Gomega) {
				machines := &clusterv1.MachineList{}
				g.Expect(m.Env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})).To(Succeed())
				g.Expect(machines.Items).To(HaveLen(n))
				for _, machine := range machines.Items {
					g.Expect(machine.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", machine.Name)
				}
			})
		}
		nodes(2)
		hc := &infrav1.HarvesterCluster{}
		Expect(m.Env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, hc)).To(Succeed())
		Expect(hc.Spec.ControlPlaneEndpoint.Host).To(HavePrefix("127.77.0."))
		vms := func() map[string]string {
			list := &kubevirtv1.VirtualMachineList{}
			Expect(harvesterClient().List(ctx, list, client.InNamespace(target))).To(Succeed())
			made := map[string]string{}
			for _, vm := range list.Items {
				if !strings.HasPrefix(vm.Name, name+"-") {
					continue // another spec's
				}
				made[vm.Name] = fmt.Sprintf("%s generation %d", vm.UID, vm.Generation)
			}
			return made
		}
		before := vms()
		Expect(before).To(HaveLen(2))

		By("docs/gitops-and-rancher.md: this version's Harvester files, its ConfigMap and the CAPIProvider's file with the new version, applied server-side as Fleet applies it; the operator upgrades the provider")
		runDocumented(documentedBlock("operations.md", "upgrade-harvester-identity"), testenv.RepoRoot(), harvesterEnv...)
		runDocumented(documentedBlock("gitops-and-rancher.md", "airgapped-configmap"), checkout, append(env, "VERSION="+second)...)
		runDocumented(documentedBlock("gitops-and-rancher.md", "airgapped-upgrade"), checkout, append(env, "VERSION="+second)...)
		asTurtles()
		Expect(runs(second, providerOptions.Binary)).NotTo(Equal(installed), "the operator replaces the Deployment with the new release's")
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		Expect(m.Env.Client.Get(ctx, client.ObjectKey{Name: "harvestermachines.infrastructure.cluster.x-k8s.io"}, crd)).To(Succeed())
		Expect(crd.GetDeletionTimestamp()).To(BeNil(), "the upgrade keeps the CRDs")

		By("the upgraded provider scales the workers (docs/operations.md) and re-creates nothing")
		runDocumented(documentedBlock("operations.md", "scale-workers"), user, append(env, "NAMESPACE="+namespace, "CLUSTER="+name)...)
		nodes(4)
		after := vms()
		for vm, uid := range before {
			Expect(after).To(HaveKeyWithValue(vm, uid), "VM %s was re-created or rewritten by the upgrade", vm)
		}

		By("deleting the cluster leaves nothing on Harvester")
		Expect(m.Env.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})).To(Succeed())
		clusterGone(m.Env.Client, namespace, name)
		leakFree(target)
	})
})
