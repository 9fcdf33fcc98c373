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

import "strings"

// K3s is the distribution k3s-io/cluster-api-k3s installs (v0.4.0): its bootstrap data writes
// /etc/rancher/k3s/config.yaml and, on the first server, the cluster's CAs under
// /var/lib/rancher/k3s/server/tls (pkg/secret: server-ca, client-ca, etcd's server-ca with
// embedded etcd), then runs get.k3s.io's installer with `sh -s - server` or `sh -s - agent`
// (INSTALL_K3S_EXEC when air-gapped) (pkg/cloudinit). Its control-plane provider takes the
// cluster as initialised once kube-system/k3s-serving exists, and lists control-plane Nodes by
// node-role.kubernetes.io/master=true (pkg/k3s/workload_cluster.go). A K3s server runs
// embedded etcd when started with cluster-init (the provider's default) or when it joins such a
// server, and SQLite (no etcd role) when neither, or an external datastore, is configured.
// With embedded etcd the bootstrap data also writes the etcd-proxy DaemonSet (pkg/etcd) to the
// server's manifests directory: socat pods on the etcd nodes relaying port 2379 to the host's,
// which the control-plane provider port-forwards to (pkg/k3s/etcd_client_generator.go).
var K3s = &Distribution{
	Name:          "k3s",
	ConfigPath:    "/etc/rancher/k3s/config.yaml",
	TLSDir:        "/var/lib/rancher/k3s/server/tls",
	ServingSecret: "k3s-serving",
	IsServer: func(runcmd []string) bool {
		for _, c := range runcmd {
			if strings.Contains(c, "sh -s - server") || strings.Contains(c, "INSTALL_K3S_EXEC='server'") {
				return true
			}
		}
		return false
	},
	InstallVersionVariable: "INSTALL_K3S_VERSION",
	EtcdAnnotations:        "etcd.k3s.cattle.io",
	ManifestsDir:           "/var/lib/rancher/k3s/server/manifests",
	Etcd: func(config map[string]any) bool {
		if configString(config, "datastore-endpoint") != "" {
			return false
		}
		initEtcd, _ := config["cluster-init"].(bool)
		return initEtcd || configString(config, "server") != ""
	},
}
