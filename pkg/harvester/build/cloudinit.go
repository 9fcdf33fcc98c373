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
	"fmt"
	"maps"
	"mime/multipart"
	"net/textproto"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// BootstrapFormat is how a bootstrap provider wrote its data.
type BootstrapFormat string

// The bootstrap formats: CAPI's `format` values and what DetectBootstrapFormat recognises.
const (
	FormatCloudConfig BootstrapFormat = "cloud-config"
	FormatShellScript BootstrapFormat = "shell-script"
	FormatIgnition    BootstrapFormat = "ignition"
	FormatUnknown     BootstrapFormat = "unknown"
)

// ErrUnsupportedBootstrapFormat is returned for bootstrap data that cannot reach a Harvester VM:
// Harvester's VMs boot with cloud-init (NoCloud), which does not read Ignition.
var ErrUnsupportedBootstrapFormat = errors.New("unsupported bootstrap format")

// guestAgentCommand enables the guest agent, which reports the VM's addresses to Harvester.
const guestAgentCommand = "systemctl enable --now qemu-guest-agent.service"

// DetectBootstrapFormat tells the format of bootstrap data, from CAPI's `format` key when the
// bootstrap provider set it, else from the data itself.
func DetectBootstrapFormat(data []byte, declared string) BootstrapFormat {
	switch strings.ToLower(declared) {
	case "cloud-config":
		return FormatCloudConfig
	case "ignition":
		return FormatIgnition
	}
	_, body := splitTemplateHeader(data)
	trimmed := bytes.TrimSpace(body)
	switch {
	case bytes.HasPrefix(trimmed, []byte("#cloud-config")):
		return FormatCloudConfig
	case bytes.HasPrefix(trimmed, []byte("#!")):
		return FormatShellScript
	case bytes.HasPrefix(trimmed, []byte("{")) && bytes.Contains(trimmed, []byte(`"ignition"`)):
		return FormatIgnition
	}
	return FormatUnknown
}

// UserDataInput is what goes into a VM's cloud-init user data besides the bootstrap data.
type UserDataInput struct {
	Bootstrap       []byte
	BootstrapFormat string // CAPI's `format` key, if any
	SSHPublicKeys   []string
	// GuestAgent says whether qemu-guest-agent is installed and started (empty: Install).
	GuestAgent infrav1.GuestAgent
	// Extra is the machine's own cloud-config (spec.userData), merged under the bootstrap data.
	Extra string
}

// ErrUserDataConflict means the machine's userData sets a key of the bootstrap data to another value,
// or cannot reach bootstrap data of its format.
var ErrUserDataConflict = errors.New("the machine's userData cannot be merged with the bootstrap data")

// BuildUserData merges the bootstrap data with what every node needs: qemu-guest-agent (so that
// Harvester learns the VM's addresses; as in.GuestAgent says) and the authorised SSH keys. Cloud-config is merged;
// a shell script is sent as a MIME multipart message next to a cloud-config part; unknown
// formats pass through untouched (the image must then bring its own guest agent); Ignition is
// refused.
func BuildUserData(in UserDataInput) ([]byte, BootstrapFormat, error) {
	format := DetectBootstrapFormat(in.Bootstrap, in.BootstrapFormat)
	extra, err := ParseExtraUserData(in.Extra)
	if err != nil {
		return nil, format, fmt.Errorf("%w: %v", ErrUserDataConflict, err)
	}
	switch format {
	case FormatCloudConfig:
		out, err := mergeCloudConfig(in.Bootstrap, in.SSHPublicKeys, in.GuestAgent, extra)
		return out, format, err
	case FormatShellScript:
		cfg := additions(in.SSHPublicKeys, in.GuestAgent)
		if err := mergeUnder(cfg, extra, "", "the provider"); err != nil {
			return nil, format, fmt.Errorf("%w: %v", ErrUserDataConflict, err)
		}
		out, err := multipartUserData(cfg, in.Bootstrap)
		return out, format, err
	case FormatIgnition:
		return nil, format, fmt.Errorf("%w: Ignition; Harvester VMs boot with cloud-init, use a cloud-config bootstrap format", ErrUnsupportedBootstrapFormat)
	}
	if len(extra) > 0 {
		return nil, format, fmt.Errorf("%w: the bootstrap data is neither cloud-config nor a shell script, so userData cannot be merged into it", ErrUserDataConflict)
	}
	return in.Bootstrap, format, nil
}

// ParseExtraUserData reads a machine's userData: cloud-config, a YAML mapping (the
// `#cloud-config` line is optional); empty is none.
func ParseExtraUserData(data string) (map[string]any, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		// The parser's message may quote the data: not passed on.
		return nil, errors.New("userData is not cloud-config (a YAML mapping)")
	}
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if _, ok := cfg[k].([]any); !ok && slices.Contains(listKeys, k) {
			return nil, fmt.Errorf("userData's %s must be a list, as cloud-init reads it", k)
		}
	}
	return cfg, nil
}

// listKeys are the cloud-config keys whose value is a list, which userData extends.
var listKeys = []string{"bootcmd", "mounts", "packages", "runcmd", "ssh_authorized_keys", "users", "write_files"}

// itemKeys name the field that identifies an item of a list key: userData's item with the name
// of one of the base's but other content would replace it when cloud-init applies both (a file
// written twice, a user defined twice), so it is a conflict rather than an addition.
var itemKeys = map[string]string{"write_files": "path", "users": "name"}

// jinjaMarkers open Jinja expressions, statements and comments: in bootstrap data that cloud-init
// renders as a Jinja template, a string of the user's holding one would be rendered too (`{{`
// replaced, `{#` or `{%` a syntax error that drops the whole part, the join included).
var jinjaMarkers = []string{"{{", "{%", "{#"}

// jinjaIn returns the path of the first string in v that holds a Jinja marker, or "".
func jinjaIn(v any, path string) string {
	switch t := v.(type) {
	case string:
		for _, m := range jinjaMarkers {
			if strings.Contains(t, m) {
				return path
			}
		}
	case []any:
		for i, item := range t {
			if p := jinjaIn(item, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if p := jinjaIn(t[k], path+"."+k); p != "" {
				return p
			}
		}
	}
	return ""
}

// mergeUnder merges extra into base (what: whose base is, for the messages), base winning: a key
// base lacks is added; lists get extra's items that base's lacks, after base's (a file or user of
// base's name with other content is a conflict); mappings merge key by key; a key both set to
// different values (or to a list and a mapping) is an error that names the key, never the values
// (the bootstrap data holds credentials).
func mergeUnder(base, extra map[string]any, path, what string) error {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		v := extra[k]
		p := k
		if path != "" {
			p = path + "." + k
		}
		cur, ok := base[k]
		if !ok {
			base[k] = v
			continue
		}
		switch c := cur.(type) {
		case []any:
			e, ok := v.([]any)
			if !ok {
				return fmt.Errorf("userData sets %s, which %s sets to a list", p, what)
			}
			for _, item := range e {
				if slices.ContainsFunc(c, func(x any) bool { return reflect.DeepEqual(x, item) }) {
					continue
				}
				if id, ok := itemKeys[p]; ok {
					if m, ok := item.(map[string]any); ok {
						if name, ok := m[id].(string); ok && slices.ContainsFunc(c, func(x any) bool {
							xm, ok := x.(map[string]any)
							return ok && xm[id] == name
						}) {
							return fmt.Errorf("userData's %s has an item with %s %s, which %s has with other content (%s's is kept: leave it out of userData)", p, id, name, what, what)
						}
					}
				}
				c = append(c, item)
			}
			base[k] = c
		case map[string]any:
			e, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("userData sets %s, which %s sets to a mapping", p, what)
			}
			if err := mergeUnder(c, e, p, what); err != nil {
				return err
			}
		default:
			if !reflect.DeepEqual(cur, v) {
				return fmt.Errorf("userData sets %s, which %s sets to another value (%s's is kept: leave %s out of userData)", p, what, what, p)
			}
		}
	}
	return nil
}

// additions is the cloud-config the provider adds to every node.
func additions(sshKeys []string, agent infrav1.GuestAgent) map[string]any {
	cfg := map[string]any{}
	switch agent {
	case infrav1.GuestAgentNone:
	case infrav1.GuestAgentEnable:
		cfg["runcmd"] = []any{guestAgentCommand}
	default:
		cfg["packages"] = []any{"qemu-guest-agent"}
		cfg["runcmd"] = []any{guestAgentCommand}
	}
	if len(sshKeys) > 0 {
		keys := make([]any, 0, len(sshKeys))
		for _, k := range sshKeys {
			keys = append(keys, k)
		}
		cfg["ssh_authorized_keys"] = keys
	}
	return cfg
}

// templateHeader is the first line of cloud-config that cloud-init renders as a Jinja template
// (CAPI's kubeadm bootstrap data starts with it, for `{{ ds.meta_data.local_hostname }}`).
const templateHeader = "## template: jinja"

// splitTemplateHeader separates a leading "## template: jinja" line from the rest.
func splitTemplateHeader(data []byte) ([]byte, []byte) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if !bytes.HasPrefix(trimmed, []byte(templateHeader)) {
		return nil, data
	}
	line, rest, _ := bytes.Cut(trimmed, []byte("\n"))
	return bytes.TrimSpace(line), rest
}

func mergeCloudConfig(bootstrap []byte, sshKeys []string, agent infrav1.GuestAgent, extra map[string]any) ([]byte, error) {
	header, _ := splitTemplateHeader(bootstrap)
	cfg := map[string]any{}
	if err := yaml.Unmarshal(bootstrap, &cfg); err != nil {
		return nil, fmt.Errorf("parsing the bootstrap cloud-config: %w", err)
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	if header != nil {
		if p := jinjaIn(extra, ""); p != "" {
			return nil, fmt.Errorf("%w: userData's %s holds Jinja syntax ({{, {%% or {#), which cloud-init would render in this bootstrap data's template", ErrUserDataConflict, strings.TrimPrefix(p, "."))
		}
	}
	if err := mergeUnder(cfg, extra, "", "the bootstrap data"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUserDataConflict, err)
	}
	add := additions(sshKeys, agent)
	if pkgs := asList(add["packages"]); len(pkgs) > 0 {
		cfg["packages"] = appendMissing(asList(cfg["packages"]), pkgs...)
	}
	// The guest agent starts before the bootstrap commands, so that the address is known while
	// a node joins.
	if _, start := add["runcmd"]; start {
		runcmd := asList(cfg["runcmd"])
		if !slices.ContainsFunc(runcmd, func(c any) bool { return c == guestAgentCommand }) {
			runcmd = append([]any{guestAgentCommand}, runcmd...)
		}
		cfg["runcmd"] = runcmd
	}
	if keys := asList(add["ssh_authorized_keys"]); len(keys) > 0 {
		cfg["ssh_authorized_keys"] = appendMissing(asList(cfg["ssh_authorized_keys"]), keys...)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	// The Jinja header stays first, or cloud-init would not render the template.
	merged := []byte("#cloud-config\n")
	if header != nil {
		merged = append(append(header, '\n'), merged...)
	}
	return append(merged, out...), nil
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return nil
}

func appendMissing(list []any, items ...any) []any {
	for _, item := range items {
		if !slices.Contains(list, item) {
			list = append(list, item)
		}
	}
	return list
}

// multipartUserData sends a cloud-config part and a script part, which cloud-init runs both of.
func multipartUserData(cfg map[string]any, script []byte) ([]byte, error) {
	cloudConfig, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	parts := []struct {
		contentType string
		data        []byte
	}{
		{"text/cloud-config", append([]byte("#cloud-config\n"), cloudConfig...)},
		{"text/x-shellscript", script},
	}
	for _, p := range parts {
		part, err := w.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {p.contentType + `; charset="utf-8"`},
			"Content-Transfer-Encoding": {"7bit"},
		})
		if err != nil {
			return nil, err
		}
		if _, err := part.Write(p.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	header := fmt.Sprintf("Content-Type: multipart/mixed; boundary=%q\nMIME-Version: 1.0\n\n", w.Boundary())
	return append([]byte(header), body.Bytes()...), nil
}
