package guest

import corev1 "k8s.io/api/core/v1"

// Distribution is what a Kubernetes distribution's installer and kubelet put on a node, which is
// what the addons' pods are scheduled against. docs/development.md lists the sources.
type Distribution struct {
	Name string
	// ControlPlaneLabels and ControlPlaneTaints are on control-plane (server) nodes.
	ControlPlaneLabels map[string]string
	ControlPlaneTaints []corev1.Taint
}

var (
	// Kubeadm: kubeadm init/join --control-plane (its markcontrolplane phase) labels the node
	// with an empty role value and taints it; workers get no role label.
	Kubeadm = Distribution{
		Name: "kubeadm",
		ControlPlaneLabels: map[string]string{
			"node-role.kubernetes.io/control-plane":                   "",
			"node.kubernetes.io/exclude-from-external-load-balancers": "",
		},
		ControlPlaneTaints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
	}
	// K3s: a server labels its node control-plane and master with the value "true", and etcd
	// when it runs the embedded etcd; servers are not tainted unless configured to be.
	K3s = Distribution{
		Name: "k3s",
		ControlPlaneLabels: map[string]string{
			"node-role.kubernetes.io/control-plane": "true",
			"node-role.kubernetes.io/master":        "true",
			"node-role.kubernetes.io/etcd":          "true",
		},
	}
	// RKE2 runs K3s's server code: the same labels, no taint by default.
	RKE2 = Distribution{
		Name:               "rke2",
		ControlPlaneLabels: K3s.ControlPlaneLabels,
	}
)

// markControlPlane gives node the distribution's control-plane labels and taints.
func (d Distribution) markControlPlane(node *corev1.Node) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range d.ControlPlaneLabels {
		node.Labels[k] = v
	}
	node.Spec.Taints = append(node.Spec.Taints, d.ControlPlaneTaints...)
}
