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
	EtcdAnnotations:        "etcd.rke2.cattle.io",
	EtcdPods:               true,
	Etcd:                   func(config map[string]any) bool { return configString(config, "datastore-endpoint") == "" },
}
