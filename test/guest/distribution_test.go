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

package guest_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
)

// userData renders cloud-config as the RKE2 and K3s bootstrap providers' templates do: files
// with their content as a literal block, then the commands.
func userData(files map[string]string, runcmd ...string) []byte {
	var b strings.Builder
	b.WriteString("## template: jinja\n#cloud-config\nwrite_files:\n")
	for path, content := range files {
		b.WriteString("-   path: " + path + "\n    owner: root:root\n    permissions: '0640'\n    content: |\n")
		for line := range strings.SplitSeq(strings.TrimRight(content, "\n"), "\n") {
			b.WriteString("      " + line + "\n")
		}
	}
	b.WriteString("runcmd:\n")
	for _, c := range runcmd {
		b.WriteString("  - '" + c + "'\n")
	}
	return []byte(b.String())
}

var roles = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master", "node-role.kubernetes.io/etcd"}

func TestRKE2Nodes(t *testing.T) {
	g := NewWithT(t)

	initServer, err := guest.RKE2.ParseNode(userData(map[string]string{
		"/var/lib/rancher/rke2/server/tls/server-ca.crt": "cert",
		"/etc/rancher/rke2/config.yaml": "cloud-provider-name: external\ndisable-cloud-controller: true\n" +
			"node-label:\n- tier=gold\nnode-taint:\n- CriticalAddonsOnly=true:NoExecute\ntoken: secret\n",
	}, "curl -sfL https://get.rke2.io | INSTALL_RKE2_VERSION=v1.35.4+rke2r1 sh -s - server",
		"systemctl enable rke2-server.service", "systemctl start rke2-server.service"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(initServer).NotTo(BeNil())
	g.Expect(initServer.Server).To(BeTrue())
	g.Expect(initServer.Init).To(BeTrue(), "a server whose config names no server to join starts the cluster")
	g.Expect(initServer.ExternalCloudProvider).To(BeTrue())
	g.Expect(initServer.Files).To(HaveKeyWithValue("/var/lib/rancher/rke2/server/tls/server-ca.crt", []byte("cert\n")))
	for _, r := range roles {
		g.Expect(initServer.Labels).To(HaveKeyWithValue(r, "true"))
	}
	g.Expect(initServer.Labels).To(HaveKeyWithValue("tier", "gold"))
	g.Expect(initServer.Taints).To(ConsistOf(corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoExecute}))
	g.Expect(initServer.NodeConfig().KubeletVersion).To(Equal("v1.35.4+rke2r1"), "the kubelet is the version the installer installs")

	joinServer, err := guest.RKE2.ParseNode(userData(map[string]string{
		"/etc/rancher/rke2/config.yaml": "server: https://10.0.0.1:9345\ntoken: secret\nnode-name: cp-1\n",
	}, "systemctl enable rke2-server.service"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(joinServer.Server).To(BeTrue())
	g.Expect(joinServer.Init).To(BeFalse())
	g.Expect(joinServer.NodeName).To(Equal("cp-1"))
	g.Expect(joinServer.ExternalCloudProvider).To(BeFalse())
	g.Expect(joinServer.KubeletVersion).To(BeEmpty(), "no installer named: the image's kubelet")

	agent, err := guest.RKE2.ParseNode(userData(map[string]string{
		"/etc/rancher/rke2/config.yaml": "server: https://10.0.0.1:9345\ntoken: secret\nkubelet-arg:\n- --cloud-provider=external\n",
	}, "systemctl enable rke2-agent.service"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agent.Server).To(BeFalse())
	g.Expect(agent.Init).To(BeFalse())
	g.Expect(agent.ExternalCloudProvider).To(BeTrue())
	for _, r := range roles {
		g.Expect(agent.Labels).NotTo(HaveKey(r))
	}
	nc := agent.NodeConfig()
	g.Expect(nc.ControlPlane).To(BeFalse())

	// K3s's data is not RKE2's, nor kubeadm's.
	k3s, err := guest.RKE2.ParseNode(userData(map[string]string{"/etc/rancher/k3s/config.yaml": "token: x\n"}, "sh -s - server"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k3s).To(BeNil())
}

func TestK3sNodes(t *testing.T) {
	g := NewWithT(t)
	install := func(role string) string {
		return "curl -sfL https://get.k3s.io | INSTALL_K3S_VERSION=v1.35.4+k3s1 sh -s - " + role + "  && mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete"
	}

	withEtcd, err := guest.K3s.ParseNode(userData(map[string]string{
		"/etc/rancher/k3s/config.yaml": "cluster-init: true\ndisable-cloud-controller: true\nkubelet-arg:\n- cloud-provider=external\ntoken: x\n",
	}, install("server")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(withEtcd.Server && withEtcd.Init).To(BeTrue())
	g.Expect(withEtcd.ExternalCloudProvider).To(BeTrue())
	g.Expect(withEtcd.NodeConfig().KubeletVersion).To(Equal("v1.35.4+k3s1"))
	for _, r := range roles {
		g.Expect(withEtcd.Labels).To(HaveKeyWithValue(r, "true"))
	}

	sqlite, err := guest.K3s.ParseNode(userData(map[string]string{"/etc/rancher/k3s/config.yaml": "token: x\n"}, install("server")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sqlite.Init).To(BeTrue())
	g.Expect(sqlite.Labels).To(HaveKeyWithValue("node-role.kubernetes.io/master", "true"))
	g.Expect(sqlite.Labels).NotTo(HaveKey("node-role.kubernetes.io/etcd"), "SQLite, not etcd, without cluster-init")

	joining, err := guest.K3s.ParseNode(userData(map[string]string{"/etc/rancher/k3s/config.yaml": "server: https://10.0.0.1:6443\ntoken: x\n"}, install("server")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(joining.Init).To(BeFalse())
	g.Expect(joining.Labels).To(HaveKeyWithValue("node-role.kubernetes.io/etcd", "true"), "joins the first server's etcd")

	agent, err := guest.K3s.ParseNode(userData(map[string]string{"/etc/rancher/k3s/config.yaml": "server: https://10.0.0.1:6443\ntoken: x\n"}, install("agent")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agent.Server).To(BeFalse())
	g.Expect(agent.Labels).To(BeEmpty())
}
