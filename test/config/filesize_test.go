package config

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// A product source file over 400 lines says at its top why it is long (`// Long file: ...` in
// its first lines); otherwise it is split. Tests, generated files and the test bed are exempt.
func TestLongProductFilesSayWhy(t *testing.T) {
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
		lines := strings.Split(string(data), "\n")
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
