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

package guest

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates/addons"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The addons are placed by a real kube-scheduler against the labels and taints each distribution
// puts on its nodes: our CCM on the control-plane node (tolerating the uninitialised taint it
// removes), the CSI controller there too, kube-vip and the CSI node plugin on every initialised
// node. A CCM whose node selection matches no node stays Pending, and the bed says why with the
// scheduler's own message.
func TestAddonsAreScheduledOnEveryDistribution(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		t.Skip(err)
	}
	for _, d := range []NodeRoles{KubeadmRoles, RKE2Roles, K3sRoles} {
		t.Run(d.Name, func(t *testing.T) {
			g := NewWithT(t)
			g.SetDefaultEventuallyTimeout(time.Minute)
			g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
			ctx := t.Context()
			c := startSchedulingGuest(t, d.Name)
			cl := c.Env.Client
			cp := addNode(ctx, g, cl, "cp-0", &d)
			addNode(ctx, g, cl, "worker-0", nil)

			for _, manifest := range []string{addons.CCM, addons.CSI, addons.KubeVIP} {
				rendered, err := addons.Render(manifest, map[string]string{"CLUSTER_NAME": "c1", "CCM_IMAGE": "ccm:dev"})
				g.Expect(err).NotTo(HaveOccurred())
				objs, err := testenv.DecodeObjects([]byte(rendered))
				g.Expect(err).NotTo(HaveOccurred())
				for _, o := range objs {
					g.Expect(cl.Create(ctx, o)).To(Succeed(), "creating %s %s", o.GetKind(), o.GetName())
				}
			}

			t.Log("our CCM's pod goes to the control-plane node, uninitialised as it is")
			g.Eventually(func(g Gomega) {
				g.Expect(c.CCMErr()).NotTo(HaveOccurred())
				g.Expect(podsOf(ctx, g, cl, CCMDeployment)).To(ConsistOf(HaveField("Spec.NodeName", cp.Name)))
			}).Should(Succeed())

			t.Log("once the CCM has initialised the nodes, kube-vip and the CSI node plugin run on both, the CSI controller on the control plane")
			for _, name := range []string{"cp-0", "worker-0"} {
				node := &corev1.Node{}
				g.Expect(cl.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
				node.Spec.Taints = removeTaint(node.Spec.Taints, TaintUninitialized)
				g.Expect(cl.Update(ctx, node)).To(Succeed())
			}
			g.Eventually(func(g Gomega) {
				g.Expect(podsOf(ctx, g, cl, "kube-vip")).To(ConsistOf(
					HaveField("Spec.NodeName", "cp-0"), HaveField("Spec.NodeName", "worker-0")))
				g.Expect(podsOf(ctx, g, cl, "harvester-csi-driver")).To(ContainElements(
					HaveField("Spec.NodeName", "cp-0"), HaveField("Spec.NodeName", "worker-0")))
				for _, p := range podsOf(ctx, g, cl, "harvester-csi-driver") {
					if p.Labels["component"] == "csi-controllers" {
						g.Expect(p.Spec.NodeName).To(Equal("cp-0"), "the CSI controller %s", p.Name)
					}
				}
				// Pods the kubelets started report running.
				for _, p := range podsOf(ctx, g, cl, "kube-vip") {
					g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				}
			}).Should(Succeed(), func() string {
				dss := &appsv1.DaemonSetList{}
				_ = cl.List(ctx, dss)
				out := ""
				for _, ds := range dss.Items {
					out += fmt.Sprintf("%s: %+v\n", ds.Name, ds.Status)
				}
				nodes := &corev1.NodeList{}
				_ = cl.List(ctx, nodes)
				for _, n := range nodes.Items {
					out += fmt.Sprintf("node %s labels %v taints %v unsched %v conds %v\n", n.Name, n.Labels, n.Spec.Taints, n.Spec.Unschedulable, n.Status.Conditions)
				}
				for _, p := range c.processes {
					out += p.name + ":\n" + p.log.tail(4000) + "\n"
				}
				return out
			})

			if d.Name != KubeadmRoles.Name {
				return
			}
			t.Log("a CCM Deployment whose selector matches no node leaves its pod Pending, and the bed says why")
			deploy := &appsv1.Deployment{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: CCMDeployment}, deploy)).To(Succeed())
			deploy.Spec.Template.Spec.Affinity = nil
			deploy.Spec.Template.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": "true"}
			g.Expect(cl.Update(ctx, deploy)).To(Succeed())
			g.Eventually(c.CCMErr).Should(MatchError(And(
				ContainSubstring("Unschedulable"), ContainSubstring("didn't match Pod's node affinity/selector"))))
		})
	}
}

func startSchedulingGuest(t *testing.T, name string) *Cluster {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{Name: "guest-scheduling-" + name, Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Namespace: "test", Name: name, Env: env}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := c.StartScheduling(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	return c
}

// addNode registers a Ready node, not yet initialised by a CCM, as a control-plane node of d
// (or a worker when d is nil).
func addNode(ctx context.Context, g Gomega, c client.Client, name string, d *NodeRoles) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
	}}}
	node.Spec.Taints = []corev1.Taint{{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	if d != nil {
		d.markControlPlane(node)
	}
	g.Expect(c.Create(ctx, node)).To(Succeed())
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()},
	}}
	g.Expect(c.Status().Update(ctx, node)).To(Succeed())
	g.Expect(clearNotReadyTaint(ctx, c, node)).To(Succeed())
	return node
}

func podsOf(ctx context.Context, g Gomega, c client.Client, app string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(c.List(ctx, pods, client.MatchingLabels{"app.kubernetes.io/name": app})).To(Succeed())
	return pods.Items
}

func removeTaint(taints []corev1.Taint, key string) []corev1.Taint {
	out := []corev1.Taint{}
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}
