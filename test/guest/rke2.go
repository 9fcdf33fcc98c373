package guest

import (
	"context"
	"crypto/rand"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// RKE2 is the distribution rancher/cluster-api-provider-rke2 installs (v0.21.0): its bootstrap
// data writes /etc/rancher/rke2/config.yaml and, on the first server, the cluster's CAs under
// /var/lib/rancher/rke2/server/tls (pkg/secret: server-ca, client-ca, etcd's), then runs
// `systemctl enable rke2-server.service` (servers) or `rke2-agent.service` (agents)
// (bootstrap/internal/cloudinit). Its control-plane provider takes the cluster as initialised
// once kube-system/rke2-serving exists, and finds control-plane Nodes by
// node-role.kubernetes.io/master (pkg/rke2/workload_cluster.go). RKE2 servers always run
// embedded etcd unless given an external datastore.
var RKE2 = &Distribution{
	Name:          "rke2",
	ConfigPath:    "/etc/rancher/rke2/config.yaml",
	TLSDir:        "/var/lib/rancher/rke2/server/tls",
	ServingSecret: "rke2-serving",
	IsServer: func(runcmd []string) bool {
		for _, c := range runcmd {
			if strings.Contains(c, "rke2-server.service") || strings.Contains(c, "INSTALL_RKE2_TYPE=server") {
				return true
			}
		}
		return false
	},
	InstallVersionVariable: "INSTALL_RKE2_VERSION",
	EtcdPods:               true,
	Etcd:                   func(config map[string]any) bool { return configString(config, "datastore-endpoint") == "" },
}

// RKE2's etcd annotations (k3s pkg/etcd, with RKE2's program name): a server's Node names its
// member; CAPRKE2 asks for a member's removal with the first and waits for the second, which
// RKE2's etcd member controller sets to the removed member's name.
const (
	etcdRoleLabel                 = "node-role.kubernetes.io/etcd"
	rke2EtcdNodeNameAnnotation    = "etcd.rke2.cattle.io/node-name"
	rke2EtcdRemoveAnnotation      = "etcd.rke2.cattle.io/remove"
	rke2EtcdRemovedNameAnnotation = "etcd.rke2.cattle.io/removed-node-name"
)

// rke2EtcdMemberName is an RKE2 server's etcd member name: its node name and eight random hex
// digits (k3s pkg/etcd).
func rke2EtcdMemberName(node string) string {
	return node + "-" + rand.Text()[:8]
}

// rke2EtcdRemoval plays RKE2's etcd member controller: a Node annotated with
// etcd.rke2.cattle.io/remove=true has its member removed, then carries the removed member's name
// in etcd.rke2.cattle.io/removed-node-name, which CAPRKE2's pre-terminate hook waits for.
type rke2EtcdRemoval struct {
	client client.Client
	etcd   *stackedEtcd
}

func setUpRKE2EtcdRemoval(mgr ctrl.Manager, etcd *stackedEtcd) error {
	return ctrl.NewControllerManagedBy(mgr).Named("rke2-etcd-member-removal").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		For(&corev1.Node{}).
		Complete(&rke2EtcdRemoval{client: mgr.GetClient(), etcd: etcd})
}

func (r *rke2EtcdRemoval) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if node.Annotations[rke2EtcdRemoveAnnotation] != "true" || node.Annotations[rke2EtcdRemovedNameAnnotation] != "" {
		return ctrl.Result{}, nil
	}
	member, err := r.etcd.remove(ctx, node.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := node.DeepCopy()
	node.Annotations[rke2EtcdRemovedNameAnnotation] = member
	return ctrl.Result{}, r.client.Patch(ctx, node, client.MergeFrom(base))
}
