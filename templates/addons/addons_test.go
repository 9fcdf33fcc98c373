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

package addons

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

const csiDriverName = "driver.harvesterhci.io"

// manifests are every addon with the variables it needs.
var manifests = []struct {
	name     string
	manifest string
	values   map[string]string
}{
	{"ccm", CCM, map[string]string{"CLUSTER_NAME": "default-guest", "CCM_IMAGE": "example.com/ccm:v1"}},
	{"csi", CSI, nil},
	{"kube-vip", KubeVIP, nil},
}

// clusterScoped are the kinds our manifests may hold that have no namespace.
var clusterScoped = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true, "CSIDriver": true, "StorageClass": true, "Namespace": true,
}

// decode renders a manifest and converts each of its objects into its typed form, rejecting
// fields the type does not know (a misspelt or misplaced key would otherwise vanish silently).
func decode(t *testing.T, manifest string, values map[string]string) []runtime.Object {
	t.Helper()
	rendered, err := Render(manifest, values)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	var objs []runtime.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		id := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("object without apiVersion, kind or name: %v", u.Object)
		}
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			t.Fatalf("%s: unknown kind: %v", id, err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, typed, true); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		objs = append(objs, typed)
	}
	if len(objs) == 0 {
		t.Fatal("no objects")
	}
	return objs
}

func TestRenderRequiresEveryVariable(t *testing.T) {
	g := NewWithT(t)
	_, err := Render(CCM, map[string]string{"CLUSTER_NAME": "x"})
	g.Expect(err).To(MatchError(ContainSubstring("CCM_IMAGE")))
}

func TestManifestsAreWellFormed(t *testing.T) {
	for _, m := range manifests {
		t.Run(m.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := decode(t, m.manifest, m.values)

			seen := map[string]bool{}
			serviceAccounts := map[string]bool{}
			clusterRoles := map[string]bool{}
			for _, obj := range objs {
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				g.Expect(err).NotTo(HaveOccurred())
				meta := &unstructured.Unstructured{Object: u}
				kind := obj.GetObjectKind().GroupVersionKind().Kind
				id := kind + " " + meta.GetNamespace() + "/" + meta.GetName()
				g.Expect(seen).NotTo(HaveKey(id), "duplicate object")
				seen[id] = true
				if clusterScoped[kind] {
					g.Expect(meta.GetNamespace()).To(BeEmpty(), id)
				} else {
					g.Expect(meta.GetNamespace()).To(Equal("kube-system"), id)
				}
				switch o := obj.(type) {
				case *corev1.ServiceAccount:
					serviceAccounts[o.Name] = true
				case *rbacv1.ClusterRole:
					clusterRoles[o.Name] = true
				}
			}

			for _, obj := range objs {
				switch o := obj.(type) {
				case *rbacv1.ClusterRoleBinding:
					g.Expect(clusterRoles).To(HaveKey(o.RoleRef.Name), "ClusterRoleBinding %s binds a ClusterRole of this manifest", o.Name)
					for _, s := range o.Subjects {
						g.Expect(serviceAccounts).To(HaveKey(s.Name), "ClusterRoleBinding %s binds a ServiceAccount of this manifest", o.Name)
					}
				case *appsv1.Deployment:
					g.Expect(o.Spec.Selector.MatchLabels).To(BeEquivalentTo(subset(o.Spec.Template.Labels, o.Spec.Selector.MatchLabels)), "Deployment %s selects its pods", o.Name)
					checkPod(g, o.Name, o.Spec.Template.Spec, serviceAccounts)
				case *appsv1.DaemonSet:
					g.Expect(o.Spec.Selector.MatchLabels).To(BeEquivalentTo(subset(o.Spec.Template.Labels, o.Spec.Selector.MatchLabels)), "DaemonSet %s selects its pods", o.Name)
					checkPod(g, o.Name, o.Spec.Template.Spec, serviceAccounts)
				}
			}
		})
	}
}

// subset is the part of labels whose keys are in selector.
func subset(labels, selector map[string]string) map[string]string {
	out := map[string]string{}
	for k := range selector {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// checkPod holds for every workload of every addon: its ServiceAccount ships with it, its mounts
// name its volumes, and whatever reads the Harvester credential sees the whole Secret where the
// kubeconfig's tokenFile points.
func checkPod(g Gomega, workload string, pod corev1.PodSpec, serviceAccounts map[string]bool) {
	g.Expect(serviceAccounts).To(HaveKey(pod.ServiceAccountName), "%s runs as a ServiceAccount of this manifest", workload)
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range pod.Containers {
		where := workload + "/" + c.Name
		credential := false
		for _, m := range c.VolumeMounts {
			v, ok := volumes[m.Name]
			g.Expect(ok).To(BeTrue(), "%s mounts volume %s, which the pod declares", where, m.Name)
			if v.Secret == nil || v.Secret.SecretName != harvester.GuestCloudConfigSecret {
				continue
			}
			credential = true
			g.Expect(m.SubPath).To(BeEmpty(), "%s: a subPath mount never sees a renewed token", where)
			g.Expect(m.MountPath).To(Equal(harvester.GuestCloudConfigDir), "%s: the kubeconfig's tokenFile lies in %s", where, harvester.GuestCloudConfigDir)
			g.Expect(v.Secret.Items).To(BeEmpty(), "%s: the whole Secret, token included", where)
		}
		reader := slices.ContainsFunc(c.Args, func(a string) bool {
			return strings.HasPrefix(a, "--cloud-config=") || strings.HasPrefix(a, "--kubeconfig=")
		})
		if reader {
			g.Expect(credential).To(BeTrue(), "%s reads a Harvester kubeconfig, so it mounts Secret %s", where, harvester.GuestCloudConfigSecret)
		}
	}
}

func TestCSI(t *testing.T) {
	g := NewWithT(t)
	objs := decode(t, CSI, nil)
	var (
		driver     *storagev1.CSIDriver
		class      *storagev1.StorageClass
		controller *appsv1.Deployment
		node       *appsv1.DaemonSet
	)
	for _, obj := range objs {
		switch o := obj.(type) {
		case *storagev1.CSIDriver:
			driver = o
		case *storagev1.StorageClass:
			class = o
		case *appsv1.Deployment:
			controller = o
		case *appsv1.DaemonSet:
			node = o
		}
	}
	g.Expect(driver).NotTo(BeNil())
	g.Expect(driver.Name).To(Equal(csiDriverName))

	g.Expect(class).NotTo(BeNil())
	g.Expect(class.Name).To(Equal("harvester"))
	g.Expect(class.Provisioner).To(Equal(csiDriverName))
	g.Expect(class.Annotations).To(HaveKeyWithValue("storageclass.kubernetes.io/is-default-class", "true"))
	g.Expect(class.AllowVolumeExpansion).To(HaveValue(BeTrue()))

	// The node plugin runs the driver, privileged, with the guest's Harvester credential.
	g.Expect(node).NotTo(BeNil())
	plugin := container(node.Spec.Template.Spec, "harvester-csi-driver")
	g.Expect(plugin).NotTo(BeNil())
	g.Expect(plugin.SecurityContext.Privileged).To(HaveValue(BeTrue()))
	g.Expect(plugin.Args).To(ContainElement("--kubeconfig=" + harvester.GuestCloudConfigDir + "/" + harvester.GuestCloudConfigKey))
	g.Expect(secretMount(node.Spec.Template.Spec, plugin)).NotTo(BeNil(), "the driver mounts Secret %s", harvester.GuestCloudConfigSecret)

	// The controller is the upstream sidecars, talking to the node plugin through its socket on
	// the host; so it must share that directory and land where the node plugin runs.
	g.Expect(controller).NotTo(BeNil())
	var names []string
	for _, c := range controller.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	g.Expect(names).To(ConsistOf("csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"))
	for _, c := range controller.Spec.Template.Spec.Containers {
		g.Expect(c.Args).To(ContainElement("--leader-election"), "%s: the controller has several replicas", c.Name)
	}
	socketDir := hostPath(node.Spec.Template.Spec, "socket-dir")
	g.Expect(socketDir).NotTo(BeEmpty())
	g.Expect(hostPath(controller.Spec.Template.Spec, "socket-dir")).To(Equal(socketDir))
	registrar := container(node.Spec.Template.Spec, "node-driver-registrar")
	g.Expect(registrar).NotTo(BeNil())
	g.Expect(registrar.Args).To(ContainElement("--kubelet-registration-path=" + socketDir + "/csi.sock"))
	terms := controller.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	g.Expect(terms).To(ContainElement(HaveField("MatchExpressions", ContainElement(HaveField("Key", "node-role.kubernetes.io/control-plane")))))
	g.Expect(node.Spec.Template.Spec.Tolerations).To(ContainElement(HaveField("Key", "node-role.kubernetes.io/control-plane")))
}

func TestKubeVIPAnnouncesServicesOnly(t *testing.T) {
	g := NewWithT(t)
	var ds *appsv1.DaemonSet
	for _, obj := range decode(t, KubeVIP, nil) {
		if o, ok := obj.(*appsv1.DaemonSet); ok {
			ds = o
		}
	}
	g.Expect(ds).NotTo(BeNil())
	pod := ds.Spec.Template.Spec
	g.Expect(pod.HostNetwork).To(BeTrue())
	kv := container(pod, "kube-vip")
	g.Expect(kv).NotTo(BeNil())

	env := map[string]string{}
	for _, e := range kv.Env {
		env[e.Name] = e.Value
	}
	g.Expect(env).To(HaveKeyWithValue("svc_enable", "true"))
	g.Expect(env).To(HaveKeyWithValue("svc_election", "true"))
	g.Expect(env).To(HaveKeyWithValue("vip_arp", "true"))
	// Never the control-plane VIP: that is Harvester's load balancer.
	g.Expect(env["cp_enable"]).NotTo(Equal("true"))
	g.Expect(env).NotTo(HaveKey("address"))
	g.Expect(env).NotTo(HaveKey("vip_address"))
	g.Expect(kv.Args).NotTo(ContainElement(ContainSubstring("controlplane")))
	g.Expect(kv.SecurityContext.Capabilities.Add).To(ContainElements(corev1.Capability("NET_ADMIN"), corev1.Capability("NET_RAW")))
}

func container(pod corev1.PodSpec, name string) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	return nil
}

func hostPath(pod corev1.PodSpec, volume string) string {
	for _, v := range pod.Volumes {
		if v.Name == volume && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}

func secretMount(pod corev1.PodSpec, c *corev1.Container) *corev1.VolumeMount {
	for _, v := range pod.Volumes {
		if v.Secret == nil || v.Secret.SecretName != harvester.GuestCloudConfigSecret {
			continue
		}
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].Name == v.Name {
				return &c.VolumeMounts[i]
			}
		}
	}
	return nil
}

// The CCM runs on the host network: a rollout must replace its pod rather than surge, or a
// single-node guest (one node for the old and the new pod) never finishes it.
func TestCCMRolloutDoesNotStallOnOneNode(t *testing.T) {
	g := NewWithT(t)
	var deploy *appsv1.Deployment
	for _, obj := range decode(t, CCM, map[string]string{"CLUSTER_NAME": "ns.c", "CCM_IMAGE": "example/ccm:v1"}) {
		if o, ok := obj.(*appsv1.Deployment); ok {
			deploy = o
		}
	}
	g.Expect(deploy).NotTo(BeNil())
	g.Expect(deploy.Spec.Template.Spec.HostNetwork).To(BeTrue())
	g.Expect(deploy.Spec.Strategy.Type).To(Equal(appsv1.RollingUpdateDeploymentStrategyType))
	g.Expect(deploy.Spec.Strategy.RollingUpdate.MaxSurge.IntValue()).To(Equal(0))
	g.Expect(deploy.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(Equal(1))
}

// The Harvester credential a guest holds (kube-system/harvester-cloud-config) reaches the
// cloud controller manager and CSI driver as a mounted volume, not through the guest's API: no
// addon's role may read Secrets or mint tokens, and no binding grants an addon's role to a
// group (every user or ServiceAccount of the guest). Who else can read that Secret is the
// guest's own RBAC (its cluster admins).
func TestNoAddonRoleReachesTheHarvesterCredential(t *testing.T) {
	for _, m := range manifests {
		t.Run(m.name, func(t *testing.T) {
			g := NewWithT(t)
			var rules []rbacv1.PolicyRule
			for _, obj := range decode(t, m.manifest, m.values) {
				switch o := obj.(type) {
				case *rbacv1.ClusterRole:
					rules = append(rules, o.Rules...)
					g.Expect(o.AggregationRule).To(BeNil(), o.Name)
				case *rbacv1.Role:
					rules = append(rules, o.Rules...)
				case *rbacv1.ClusterRoleBinding:
					for _, s := range o.Subjects {
						g.Expect(s.Kind).To(Equal(rbacv1.ServiceAccountKind), o.Name)
					}
				case *rbacv1.RoleBinding:
					for _, s := range o.Subjects {
						g.Expect(s.Kind).To(Equal(rbacv1.ServiceAccountKind), o.Name)
					}
				}
			}
			for _, r := range rules {
				for _, res := range r.Resources {
					g.Expect(res).NotTo(BeElementOf("*", "secrets", "serviceaccounts/token", "pods/exec", "pods/attach"), "%+v", r)
				}
				for _, verb := range r.Verbs {
					g.Expect(verb).NotTo(BeElementOf("impersonate", "escalate", "bind"), "%+v", r)
				}
			}
		})
	}
}
