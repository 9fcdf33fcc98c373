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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuiltDir is the directory a hack/ script built a bed tool into (another project's binaries,
// pinned): $envVar when set (the Makefile sets it), else the script is run, which builds the
// tool once into the tool cache outside the clone (hack/tooldir.sh) and prints the directory.
func BuiltDir(envVar, script string) (string, error) {
	if dir := os.Getenv(envVar); dir != "" {
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", script)).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("hack/%s: %w: %s", script, err, exit.Stderr)
		}
		return "", fmt.Errorf("hack/%s: %w", script, err)
	}
	return strings.TrimSpace(string(out)), nil
}
