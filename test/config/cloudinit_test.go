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

package config

import (
	"testing"

	. "github.com/onsi/gomega"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// What the provider hands cloud-init is valid to cloud-init itself (Debian's cloud-init 22.4,
// `make cloud-init`): each bootstrap format the provider merges into, with a machine's own
// cloud-config (users, files, commands) merged under it, the SSH keys and each guest-agent
// setting. The e2e suite checks the real bootstrap providers' data the same way
// (test/e2e/cloudinit_test.go).
func TestUserDataIsValidToCloudInit(t *testing.T) {
	const kubeadmLike = testenv.JinjaHeader + `
#cloud-config
write_files:
- path: /etc/kubernetes/pki/ca.crt
  owner: root:root
  permissions: "0640"
  content: |
    a certificate
runcmd:
- kubeadm init --config /run/kubeadm/kubeadm.yaml
- echo "{{ ds.meta_data.local_hostname }}" > /etc/hostname-seen
`
	const shellScript = "#!/bin/bash\nset -e\ncurl -sfL https://get.example.com | sh -\n"
	const own = `#cloud-config
users:
- name: ops
  groups: [sudo]
  shell: /bin/bash
  ssh_authorized_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyOfOps ops@example"]
write_files:
- path: /etc/motd
  content: "managed by Cluster API\n"
bootcmd:
- echo booting
ntp:
  enabled: true
  servers: [ntp.example.com]
`
	for _, tc := range []struct {
		name      string
		bootstrap string
		format    string
		agent     infrav1.GuestAgent
		extra     string
	}{
		{"kubeadm's cloud-config template, the machine's own cloud-config merged", kubeadmLike, "cloud-config", infrav1.GuestAgentInstall, own},
		{"kubeadm's cloud-config template alone, agent enabled only", kubeadmLike, "cloud-config", infrav1.GuestAgentEnable, ""},
		{"a shell script with the provider's cloud-config part beside it", shellScript, "", infrav1.GuestAgentInstall, own},
		{"plain cloud-config without a guest agent", "#cloud-config\nruncmd:\n- echo hi\n", "cloud-config", infrav1.GuestAgentNone, own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			data, _, err := build.BuildUserData(build.UserDataInput{
				Bootstrap: []byte(tc.bootstrap), BootstrapFormat: tc.format,
				SSHPublicKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyOfTheCluster cluster"},
				GuestAgent:    tc.agent, Extra: tc.extra,
			})
			g.Expect(err).NotTo(HaveOccurred())
			refused, err := testenv.CloudConfigSchemaErrors(data)
			g.Expect(err).NotTo(HaveOccurred(), "%s", data)
			g.Expect(refused).To(BeEmpty(), "%s", data)
		})
	}

	// The check can fail: cloud-init refuses a key of the wrong type.
	g := NewWithT(t)
	refused, err := testenv.CloudConfigSchemaErrors([]byte("#cloud-config\nusers: ops-as-a-string-is-fine\nruncmd: {not: a list}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refused).To(ContainSubstring("runcmd"))
}
