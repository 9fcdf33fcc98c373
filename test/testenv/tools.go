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
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", script)).Output() //nolint:gosec // our own script
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("hack/%s: %w: %s", script, err, exit.Stderr)
		}
		return "", fmt.Errorf("hack/%s: %w", script, err)
	}
	return strings.TrimSpace(string(out)), nil
}
