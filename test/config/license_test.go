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
	"regexp"
	"strings"
	"testing"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// licenseHeader matches hack/boilerplate.go.txt (the header controller-gen writes into the
// generated files) with any year, at the top of a Go file: after its build constraints, if any.
func licenseHeader(t *testing.T) *regexp.Regexp {
	t.Helper()
	data, err := os.ReadFile(testenv.RepoRoot() + "/hack/boilerplate.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimRight(string(data), "\n")
	if !strings.Contains(text, "Copyright 2026 ") {
		t.Fatalf("hack/boilerplate.go.txt has no year where the test expects it:\n%s", text)
	}
	pattern := strings.Replace(regexp.QuoteMeta(text), "2026", `\d{4}`, 1)
	return regexp.MustCompile(`\A((//go:build [^\n]*|// \+build [^\n]*)\n)*\n*` + pattern + "\n\n")
}

// Every Go file carries the Apache-2.0 header (LICENSE), as Cluster API and its providers' files
// do: the product, its tests, the bed and the programs under hack/, generated files included.
// The templates of code added to other projects' builds (hack/*.go.in) are not Go files here.
func TestEveryGoFileHasTheLicenseHeader(t *testing.T) {
	header := licenseHeader(t)
	if _, err := os.Stat(testenv.RepoRoot() + "/LICENSE"); err != nil {
		t.Fatalf("no LICENSE: %v", err)
	}
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.go")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(string(out))
	if len(files) < 100 {
		t.Fatalf("git ls-files gave %d Go files", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(testenv.RepoRoot() + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if !header.Match(data) {
			t.Errorf("%s does not start with the license header of hack/boilerplate.go.txt", f)
		}
	}
}

// withoutLicenseHeader is a Go file's text after its license header, for checks that read its
// own first lines.
func withoutLicenseHeader(header *regexp.Regexp, text string) string {
	if loc := header.FindStringIndex(text); loc != nil {
		return text[loc[1]:]
	}
	return text
}
