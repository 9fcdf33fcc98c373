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
