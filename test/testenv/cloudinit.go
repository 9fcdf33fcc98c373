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

package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// JinjaHeader marks user data that cloud-init renders as a Jinja template with the instance's
// data before it reads the cloud-config (kubeadm's bootstrap data names the host that way).
const JinjaHeader = "## template: jinja"

// CloudInit is cloud-init's own command line, from the host's Debian packages: $CLOUD_INIT_DIR
// when set (make test sets it), else hack/ensure-cloud-init.sh fetches it once.
func CloudInit() (string, error) {
	dir, err := BuiltDir("CLOUD_INIT_DIR", "ensure-cloud-init.sh")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "cloud-init"), nil
}

// CloudConfigSchemaErrors asks cloud-init itself whether user data is valid: each cloud-config
// in it (the whole data, or each text/cloud-config part of a MIME multipart message, as the
// provider sends a shell-script bootstrap next to its own cloud-config) must pass `cloud-init
// schema`; a Jinja template is rendered first by cloud-init (`cloud-init devel render`) with the
// meta-data KubeVirt's NoCloud source gives a VM (instance-id, local-hostname), as at boot. It
// returns what cloud-init said of the parts it refused ("" when it refused none); an error is
// user data that holds no cloud-config, a template cloud-init cannot render, or no cloud-init.
func CloudConfigSchemaErrors(userData []byte) (string, error) {
	cloudInit, err := CloudInit()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "cloud-init-check-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if bytes.HasPrefix(userData, []byte(JinjaHeader)) {
		instance := filepath.Join(dir, "instance-data.json")
		if err := os.WriteFile(instance, []byte(`{"ds":{"meta_data":{"instance-id":"vm-1.guests","local-hostname":"vm-1"}},`+
			`"v1":{"instance_id":"vm-1.guests","local_hostname":"vm-1"}}`), 0o600); err != nil {
			return "", err
		}
		template := filepath.Join(dir, "user-data.jinja")
		if err := os.WriteFile(template, userData, 0o600); err != nil {
			return "", err
		}
		out, err := exec.Command(cloudInit, "devel", "render", template, "-i", instance).Output()
		if err != nil {
			return "", fmt.Errorf("cloud-init cannot render the template: %w", err)
		}
		if bytes.Contains(out, []byte("CI_MISSING_JINJA_VAR")) {
			return "", fmt.Errorf("the template names instance data cloud-init does not have:\n%s", out)
		}
		userData = out
	}
	parts, err := cloudConfigParts(userData)
	if err != nil {
		return "", err
	}
	if len(parts) == 0 {
		return "", errors.New("the user data holds no cloud-config")
	}
	var refused []string
	for _, part := range parts {
		file := filepath.Join(dir, "user-data")
		if err := os.WriteFile(file, part, 0o600); err != nil {
			return "", err
		}
		out, err := exec.Command(cloudInit, "schema", "--config-file", file).CombinedOutput()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			refused = append(refused, string(out))
		case err != nil:
			return "", err
		case !strings.Contains(string(out), "Valid cloud-config"):
			return "", fmt.Errorf("cloud-init schema said neither valid nor invalid: %s", out)
		}
	}
	return strings.Join(refused, "\n"), nil
}

// cloudConfigParts are the cloud-configs of user data.
func cloudConfigParts(userData []byte) ([][]byte, error) {
	if bytes.HasPrefix(userData, []byte("#cloud-config")) {
		return [][]byte{userData}, nil
	}
	msg, err := mail.ReadMessage(bytes.NewReader(userData))
	if err != nil {
		return nil, nil
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return nil, nil
	}
	var parts [][]byte
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, err
		}
		if t, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); t == "text/cloud-config" {
			parts = append(parts, data)
		}
	}
}
