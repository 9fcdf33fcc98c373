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

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

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

// An object of a kind the guest does not serve (K3s's HelmChart, whose CRD K3s itself installs)
// is reported, and the objects around it are applied all the same; applying again changes
// nothing.
func TestApplyManifestsAppliesWhatItCan(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		t.Skip("needs the envtest binaries (make envtest):", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{Name: "guest-manifests", Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	manifests := [][]byte{
		[]byte("apiVersion: helm.cattle.io/v1\nkind: HelmChart\nmetadata:\n  name: traefik\n  namespace: kube-system\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n  namespace: kube-system\ndata:\n  a: b\n"),
		[]byte("{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"second\", \"namespace\": \"kube-system\"}}"),
	}
	for range 2 {
		err := applyManifests(ctx, env.Client, manifests)
		if err == nil || !strings.Contains(err.Error(), "HelmChart kube-system/traefik") {
			t.Fatalf("applying: %v; want the HelmChart reported", err)
		}
		for _, name := range []string{"first", "second"} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, &corev1.ConfigMap{}); err != nil {
				t.Errorf("ConfigMap %s: %v", name, err)
			}
		}
	}
}
