package guest

import "testing"

// A server applies the manifests of its manifests directory, and nothing else of its files.
func TestManifestsIn(t *testing.T) {
	files := map[string][]byte{
		"/var/lib/rancher/k3s/server/manifests/b.yaml":     []byte("b"),
		"/var/lib/rancher/k3s/server/manifests/a.json":     []byte("a"),
		"/var/lib/rancher/k3s/server/manifests/notes.md":   []byte("no"),
		"/var/lib/rancher/k3s/server/manifests-old/c.yaml": []byte("no"),
		"/etc/rancher/k3s/config.yaml":                     []byte("no"),
	}
	got := manifestsIn(files, "/var/lib/rancher/k3s/server/manifests")
	if len(got) != 2 || string(got[0]) != "a" || string(got[1]) != "b" {
		t.Errorf("manifests %q; want a, b (by path)", got)
	}
	if got := manifestsIn(files, ""); got != nil {
		t.Errorf("manifests %q without a directory", got)
	}
}
