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
	"bytes"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzBuildUserData merges arbitrary bootstrap data. Properties: it never panics; merged
// cloud-config keeps the bootstrap data's own commands and the provider's guest agent, and
// stays cloud-config; a shell script is carried whole; Ignition is refused.
func FuzzBuildUserData(f *testing.F) {
	f.Add([]byte("#cloud-config\nruncmd:\n- echo hi\n"), "cloud-config", "ssh-ed25519 AAAA ops")
	f.Add([]byte("## template: jinja\n#cloud-config\nwrite_files:\n- path: /x\n  content: '{{ ds.meta_data.local_hostname }}'\n"), "", "")
	f.Add([]byte("#!/bin/sh\necho join\n"), "", "ssh-rsa AAAA")
	f.Add([]byte(`{"ignition": {"version": "3.4.0"}}`), "ignition", "")
	f.Add([]byte("#cloud-config\nruncmd: not-a-list\npackages: {a: b}\n"), "", "")
	f.Fuzz(func(t *testing.T, data []byte, format, key string) {
		keys := []string{}
		if key != "" {
			keys = append(keys, key)
		}
		out, got, err := BuildUserData(UserDataInput{Bootstrap: data, BootstrapFormat: format, SSHPublicKeys: keys})
		switch got {
		case FormatIgnition:
			if !errors.Is(err, ErrUnsupportedBootstrapFormat) {
				t.Fatalf("Ignition not refused: %v", err)
			}
		case FormatCloudConfig:
			if err != nil {
				return // bootstrap data that is not YAML is refused, not mangled
			}
			_, body := splitTemplateHeader(out)
			if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("#cloud-config")) {
				t.Fatalf("merged data is no longer cloud-config:\n%s", out)
			}
			var merged map[string]any
			if err := yaml.Unmarshal(body, &merged); err != nil {
				t.Fatalf("merged data does not parse: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), guestAgentCommand) {
				t.Fatalf("guest agent missing:\n%s", out)
			}
		case FormatShellScript:
			if err == nil && !bytes.Contains(out, bytes.TrimSpace(data)) {
				t.Fatalf("the script is not carried whole")
			}
		default:
			if err != nil || !bytes.Equal(out, data) {
				t.Fatalf("unknown format not passed through: %v", err)
			}
		}
	})
}
