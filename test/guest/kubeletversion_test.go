package guest

import "testing"

func TestKubeletVersionOfImage(t *testing.T) {
	for image, want := range map[string]string{
		"default/ubuntu-2404-kube-v1.35.5":       "v1.35.5",
		"images/rockylinux-9-kube-v1.36.0-amd64": "v1.36.0",
		"default/ubuntu-24.04":                   DefaultKubeletVersion,
		"default/kube-latest":                    DefaultKubeletVersion,
	} {
		if got := KubeletVersionOfImage(image); got != want {
			t.Errorf("KubeletVersionOfImage(%q) = %q, want %q", image, got, want)
		}
	}
}
