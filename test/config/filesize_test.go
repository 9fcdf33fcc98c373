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
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// A product source file over 400 lines says at its top why it is long (`// Long file: ...` in
// its first lines, after the license header); otherwise it is split. Tests, generated files and
// the test bed are exempt.
func TestLongProductFilesSayWhy(t *testing.T) {
	header := licenseHeader(t)
	cmd := exec.Command("git", "ls-files", "*.go")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "zz_generated") || strings.Contains(f, "/zz_generated") ||
			strings.HasPrefix(f, "test/") || strings.HasPrefix(f, "hack/") {
			continue
		}
		data, err := os.ReadFile(testenv.RepoRoot() + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(withoutLicenseHeader(header, string(data)), "\n")
		if len(lines) <= 400 {
			continue
		}
		long++
		top := strings.Join(lines[:min(10, len(lines))], "\n")
		if !strings.Contains(top, "// Long file: ") {
			t.Errorf("%s has %d lines and does not say why at its top (// Long file: ...)", f, len(lines))
		}
	}
	t.Logf("%d long product files, each saying why", long)
}
