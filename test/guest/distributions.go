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

import corev1 "k8s.io/api/core/v1"

// NodeRoles are what a Kubernetes distribution's installer and kubelet put on a control-plane
// node, which is what the addons' pods are scheduled against. docs/development.md lists the
// sources; the node agent's RKE2 and K3s servers (Distribution.ParseNode) carry the same.
type NodeRoles struct {
	Name string
	// ControlPlaneLabels and ControlPlaneTaints are on control-plane (server) nodes.
	ControlPlaneLabels map[string]string
	ControlPlaneTaints []corev1.Taint
}

var (
	// KubeadmRoles: kubeadm init/join --control-plane (its markcontrolplane phase) labels the node
	// with an empty role value and taints it; workers get no role label.
	KubeadmRoles = NodeRoles{
		Name: "kubeadm",
		ControlPlaneLabels: map[string]string{
			"node-role.kubernetes.io/control-plane":                   "",
			"node.kubernetes.io/exclude-from-external-load-balancers": "",
		},
		ControlPlaneTaints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
	}
	// K3sRoles: a server labels its node control-plane and master with the value "true", and etcd
	// when it runs the embedded etcd; servers are not tainted unless configured to be.
	K3sRoles = NodeRoles{
		Name: "k3s",
		ControlPlaneLabels: map[string]string{
			"node-role.kubernetes.io/control-plane": "true",
			"node-role.kubernetes.io/master":        "true",
			"node-role.kubernetes.io/etcd":          "true",
		},
	}
	// RKE2Roles: RKE2 runs K3s's server code: the same labels, no taint by default.
	RKE2Roles = NodeRoles{
		Name:               "rke2",
		ControlPlaneLabels: K3sRoles.ControlPlaneLabels,
	}
)

// markControlPlane gives node the distribution's control-plane labels and taints.
func (d NodeRoles) markControlPlane(node *corev1.Node) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range d.ControlPlaneLabels {
		node.Labels[k] = v
	}
	node.Spec.Taints = append(node.Spec.Taints, d.ControlPlaneTaints...)
}
