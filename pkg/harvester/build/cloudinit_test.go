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

package build

import (
	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"

	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

func TestDetectBootstrapFormat(t *testing.T) {
	cases := []struct {
		data, declared string
		want           BootstrapFormat
	}{
		{"#cloud-config\nruncmd: []\n", "", FormatCloudConfig},
		{"  \n#cloud-config\n", "", FormatCloudConfig},
		{"## template: jinja\n#cloud-config\nruncmd: []\n", "", FormatCloudConfig},
		{"#!/bin/bash\necho hi\n", "", FormatShellScript},
		{`{"ignition":{"version":"3.4.0"}}`, "", FormatIgnition},
		{"anything", "ignition", FormatIgnition},
		{"anything", "cloud-config", FormatCloudConfig},
		{"Content-Type: multipart/mixed", "", FormatUnknown},
	}
	for _, c := range cases {
		if got := DetectBootstrapFormat([]byte(c.data), c.declared); got != c.want {
			t.Errorf("DetectBootstrapFormat(%q, %q) = %s, want %s", c.data, c.declared, got, c.want)
		}
	}
}

// spec.guestAgent: Enable starts the image's agent and installs nothing (no package mirror
// needed); None leaves the agent alone.
func TestBuildUserDataFollowsTheGuestAgentChoice(t *testing.T) {
	g := NewWithT(t)
	bootstrap := []byte("#cloud-config\nruncmd:\n- kubeadm join\n")
	for agent, want := range map[infrav1.GuestAgent]struct {
		packages any
		runcmd   []any
	}{
		infrav1.GuestAgentInstall: {[]any{"qemu-guest-agent"}, []any{guestAgentCommand, "kubeadm join"}},
		"":                        {[]any{"qemu-guest-agent"}, []any{guestAgentCommand, "kubeadm join"}},
		infrav1.GuestAgentEnable:  {nil, []any{guestAgentCommand, "kubeadm join"}},
		infrav1.GuestAgentNone:    {nil, []any{"kubeadm join"}},
	} {
		out, _, err := BuildUserData(UserDataInput{Bootstrap: bootstrap, GuestAgent: agent})
		g.Expect(err).NotTo(HaveOccurred())
		var cfg map[string]any
		g.Expect(yaml.Unmarshal(out, &cfg)).To(Succeed())
		if want.packages == nil {
			g.Expect(cfg).NotTo(HaveKey("packages"), "%q", agent)
		} else {
			g.Expect(cfg["packages"]).To(Equal(want.packages), "%q", agent)
		}
		g.Expect(cfg["runcmd"]).To(Equal(want.runcmd), "%q", agent)
	}
	script, _, err := BuildUserData(UserDataInput{Bootstrap: []byte("#!/bin/sh\necho hi\n"), GuestAgent: infrav1.GuestAgentNone})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(script)).NotTo(ContainSubstring("qemu-guest-agent"))
}

func TestBuildUserDataMergesCloudConfig(t *testing.T) {
	g := NewWithT(t)
	bootstrap := "#cloud-config\npackages: [curl]\nruncmd:\n- kubeadm join\n- [sh, -c, echo done]\nwrite_files:\n- path: /etc/x\n  content: y\nssh_authorized_keys: [ssh-rsa AAA existing]\n"
	out, format, err := BuildUserData(UserDataInput{Bootstrap: []byte(bootstrap), SSHPublicKeys: []string{"ssh-ed25519 BBB ops"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(format).To(Equal(FormatCloudConfig))
	g.Expect(string(out)).To(HavePrefix("#cloud-config\n"))

	var cfg map[string]any
	g.Expect(yaml.Unmarshal(out, &cfg)).To(Succeed())
	g.Expect(cfg["packages"]).To(Equal([]any{"curl", "qemu-guest-agent"}))
	g.Expect(cfg["runcmd"]).To(Equal([]any{guestAgentCommand, "kubeadm join", []any{"sh", "-c", "echo done"}}),
		"the guest agent starts first, the bootstrap commands keep their order")
	g.Expect(cfg["ssh_authorized_keys"]).To(Equal([]any{"ssh-rsa AAA existing", "ssh-ed25519 BBB ops"}))
	g.Expect(cfg["write_files"]).To(HaveLen(1))

	// Merging twice adds nothing twice.
	again, _, err := BuildUserData(UserDataInput{Bootstrap: out, SSHPublicKeys: []string{"ssh-ed25519 BBB ops"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(again)).To(Equal(string(out)))
}

// CAPI's kubeadm bootstrap data is a Jinja template: the header must stay first in the merged
// user data, or cloud-init would not render `{{ ds.meta_data.local_hostname }}`.
func TestBuildUserDataKeepsTheJinjaHeader(t *testing.T) {
	g := NewWithT(t)
	bootstrap := "## template: jinja\n#cloud-config\nruncmd:\n- kubeadm join --node-name '{{ ds.meta_data.local_hostname }}'\n"
	out, format, err := BuildUserData(UserDataInput{Bootstrap: []byte(bootstrap)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(format).To(Equal(FormatCloudConfig))
	g.Expect(string(out)).To(HavePrefix("## template: jinja\n#cloud-config\n"))
	g.Expect(string(out)).To(ContainSubstring("{{ ds.meta_data.local_hostname }}"))

	plain, _, err := BuildUserData(UserDataInput{Bootstrap: []byte("#cloud-config\nruncmd: []\n")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(plain)).To(HavePrefix("#cloud-config\n"))
}

func TestBuildUserDataWrapsScriptsAndRefusesIgnition(t *testing.T) {
	g := NewWithT(t)
	out, format, err := BuildUserData(UserDataInput{Bootstrap: []byte("#!/bin/sh\necho join\n")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(format).To(Equal(FormatShellScript))
	g.Expect(string(out)).To(HavePrefix("Content-Type: multipart/mixed; boundary="))
	g.Expect(string(out)).To(ContainSubstring("text/cloud-config"))
	g.Expect(string(out)).To(ContainSubstring("text/x-shellscript"))
	g.Expect(string(out)).To(ContainSubstring("#!/bin/sh\necho join\n"))
	g.Expect(strings.Count(string(out), "qemu-guest-agent")).To(BeNumerically(">=", 1))

	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte(`{"ignition":{"version":"3.4.0"}}`)})
	g.Expect(errors.Is(err, ErrUnsupportedBootstrapFormat)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("cloud-config"))

	unknown := []byte("Content-Type: multipart/mixed; boundary=x\n\n--x--\n")
	out, format, err = BuildUserData(UserDataInput{Bootstrap: unknown})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(format).To(Equal(FormatUnknown))
	g.Expect(out).To(Equal(unknown), "unknown formats pass through untouched")
}

func TestBuildUserDataRejectsBrokenCloudConfig(t *testing.T) {
	g := NewWithT(t)
	_, _, err := BuildUserData(UserDataInput{Bootstrap: []byte("#cloud-config\nruncmd: [unclosed\n")})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("parsing the bootstrap cloud-config"))
}

// A machine's userData is merged under the bootstrap data, as Rancher's node driver merges its
// user data: new keys added, lists extended after the bootstrap's items, mappings merged, equal
// values accepted; a key set to another value is refused by name, never showing a value (the
// bootstrap data holds join tokens and certificates).
func TestBuildUserDataMergesTheMachinesUserDataUnderTheBootstrapData(t *testing.T) {
	g := NewWithT(t)
	bootstrap := "#cloud-config\nruncmd: [kubeadm join --token s3cr3t]\nwrite_files:\n- {path: /etc/kubeadm.yaml, content: token-s3cr3t}\nntp: {enabled: true}\nhostname: node-1\n"
	extra := "#cloud-config\npackages: [open-iscsi]\nruncmd: [systemctl enable --now iscsid]\nwrite_files:\n- {path: /etc/motd, content: hello}\nntp: {servers: [10.0.0.1]}\nhostname: node-1\n"
	out, _, err := BuildUserData(UserDataInput{Bootstrap: []byte(bootstrap), GuestAgent: infrav1.GuestAgentNone, Extra: extra})
	g.Expect(err).NotTo(HaveOccurred())
	var cfg map[string]any
	g.Expect(yaml.Unmarshal(out, &cfg)).To(Succeed())
	g.Expect(cfg["packages"]).To(Equal([]any{"open-iscsi"}))
	g.Expect(cfg["runcmd"]).To(Equal([]any{"kubeadm join --token s3cr3t", "systemctl enable --now iscsid"}), "the bootstrap's commands first")
	g.Expect(cfg["write_files"]).To(HaveLen(2))
	g.Expect(cfg["ntp"]).To(Equal(map[string]any{"enabled": true, "servers": []any{"10.0.0.1"}}))
	g.Expect(cfg["hostname"]).To(Equal("node-1"))

	// A script bootstrap: the userData goes into the cloud-config part, beside the script.
	out, _, err = BuildUserData(UserDataInput{Bootstrap: []byte("#!/bin/sh\necho join\n"), GuestAgent: infrav1.GuestAgentNone, Extra: extra})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(And(ContainSubstring("open-iscsi"), ContainSubstring("echo join")))

	for _, clash := range []struct{ extra, key string }{
		{"hostname: node-9\n", "hostname"},
		{"ntp: {enabled: false}\n", "ntp.enabled"},
		{"runcmd: {first: x}\n", "runcmd"},
	} {
		_, _, err := BuildUserData(UserDataInput{Bootstrap: []byte(bootstrap), Extra: clash.extra})
		g.Expect(errors.Is(err, ErrUserDataConflict)).To(BeTrue(), clash.extra)
		g.Expect(err.Error()).To(ContainSubstring(clash.key))
		g.Expect(err.Error()).NotTo(Or(ContainSubstring("s3cr3t"), ContainSubstring("node-1"), ContainSubstring("node-9")), "no value in the message")
	}
	// A file of the bootstrap data's, written again with other content, would replace it.
	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte(bootstrap), Extra: "write_files: [{path: /etc/kubeadm.yaml, content: mine}]\n"})
	g.Expect(errors.Is(err, ErrUserDataConflict)).To(BeTrue())
	g.Expect(err.Error()).To(And(ContainSubstring("write_files"), ContainSubstring("/etc/kubeadm.yaml"), Not(ContainSubstring("s3cr3t"))))
	// A list key given as something else is refused rather than dropped.
	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte("#cloud-config\nhostname: a\n"), Extra: "runcmd: echo hi\n"})
	g.Expect(errors.Is(err, ErrUserDataConflict)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("runcmd must be a list"))
	// Bootstrap data that cloud-init renders as Jinja (CAPI's kubeadm data) would render the
	// user's strings too: Jinja syntax in them is refused, naming where; elsewhere it is kept.
	jinja := "## template: jinja\n#cloud-config\nruncmd: [kubeadm join]\n"
	template := "write_files: [{path: /etc/app.tmpl, content: 'port: {{ .Port }}'}]\n"
	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte(jinja), Extra: template})
	g.Expect(errors.Is(err, ErrUserDataConflict)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("write_files[0].content holds Jinja syntax"))
	out, _, err = BuildUserData(UserDataInput{Bootstrap: []byte("#cloud-config\nruncmd: [kubeadm join]\n"), Extra: template, GuestAgent: infrav1.GuestAgentNone})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("{{ .Port }}"))
	// With a script bootstrap the base is the provider's own additions, and the message says so.
	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte("#!/bin/sh\necho join\n"), Extra: "packages: {a: b}\n"})
	g.Expect(err).To(HaveOccurred())
	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte("#!/bin/sh\necho join\n"), SSHPublicKeys: []string{"ssh-ed25519 AAA k"}, Extra: "ssh_authorized_keys: [ssh-ed25519 BBB j]\n"})
	g.Expect(err).NotTo(HaveOccurred(), "lists merge with the provider's too")

	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte("Content-Type: multipart/mixed\n"), Extra: extra})
	g.Expect(errors.Is(err, ErrUserDataConflict)).To(BeTrue(), "unknown formats take no userData")
	_, _, err = BuildUserData(UserDataInput{Bootstrap: []byte(bootstrap), Extra: "- not a mapping\n"})
	g.Expect(errors.Is(err, ErrUserDataConflict)).To(BeTrue())
}
