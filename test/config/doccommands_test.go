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
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Every shell block of README.md and docs/ is either run by a test, marked
// `<!-- run by <test file>: <name> -->` (the test reads the block by that name, see
// test/e2e/docs_test.go), or says why no test runs it, `<!-- not run by a test: <why> -->`; a YAML
// block a test writes as a file is marked `<!-- read by <test file>: <name> -->`. A new command in
// the docs has to take one side, and a marker must name a test that names the block.
func TestEveryDocCommandIsRunOrSaysWhyNot(t *testing.T) {
	root := testenv.RepoRoot()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	marker := regexp.MustCompile(`^<!-- (run|read) by (\S+): (\S+) -->$`)
	run, unrun := 0, 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			fence := strings.TrimSpace(line)
			if fence != "```sh" && fence != "```bash" && fence != "```shell" && !strings.HasPrefix(fence, "```yaml") {
				continue
			}
			prev := ""
			if i > 0 {
				prev = strings.TrimSpace(lines[i-1])
			}
			if strings.HasPrefix(prev, "<!-- not run by a test: ") && strings.HasSuffix(prev, " -->") && fence != "```yaml" {
				unrun++
				continue
			}
			m := marker.FindStringSubmatch(prev)
			if m == nil {
				if fence != "```yaml" {
					t.Errorf("%s:%d: a shell block neither run by a test (<!-- run by <test>: <name> -->) nor saying why not (<!-- not run by a test: ... -->)", rel, i+1)
				}
				continue
			}
			if (m[1] == "read") != (fence == "```yaml") {
				t.Errorf("%s:%d: %q marks a %s block", rel, i+1, prev, fence)
			}
			test, err := os.ReadFile(filepath.Join(root, m[2]))
			if err != nil {
				t.Errorf("%s:%d: the marker names %s: %v", rel, i+1, m[2], err)
				continue
			}
			if !strings.Contains(string(test), `"`+m[3]+`"`) {
				t.Errorf("%s:%d: %s never names the block %q", rel, i+1, m[2], m[3])
			}
			run++
		}
	}
	if run < 20 {
		t.Errorf("only %d blocks are marked as run or read by a test", run)
	}
	t.Logf("%d blocks run or read by tests, %d say why not", run, unrun)
}
