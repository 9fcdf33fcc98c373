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

package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

func readRepoFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// clusterctl's local-repository tooling reads clusterctl-settings.json.
func TestClusterctlSettings(t *testing.T) {
	g := NewWithT(t)
	var settings struct {
		Name   string `json:"name"`
		Config struct {
			ComponentsFile string `json:"componentsFile"`
			NextVersion    string `json:"nextVersion"`
		} `json:"config"`
	}
	g.Expect(json.Unmarshal(readRepoFile(t, "clusterctl-settings.json"), &settings)).To(Succeed())
	g.Expect(settings.Name).To(Equal("infrastructure-harvester"))
	g.Expect(settings.Config.ComponentsFile).To(Equal("infrastructure-components.yaml"))
	g.Expect(settings.Config.NextVersion).To(MatchRegexp(`^v\d+\.\d+\.\d+$`))
}

// CAPI's Tiltfile reads tilt-provider.json; every path it names must exist.
func TestTiltProvider(t *testing.T) {
	g := NewWithT(t)
	var providers []struct {
		Name   string `json:"name"`
		Config struct {
			Image           string   `json:"image"`
			LiveReloadDeps  []string `json:"live_reload_deps"`
			Label           string   `json:"label"`
			GoMain          string   `json:"go_main"`
			KustomizeFolder string   `json:"kustomize_folder"`
		} `json:"config"`
	}
	g.Expect(json.Unmarshal(readRepoFile(t, "tilt-provider.json"), &providers)).To(Succeed())
	g.Expect(providers).To(HaveLen(1))
	p := providers[0]
	g.Expect(p.Name).To(Equal("harvester"))
	g.Expect(p.Config.Image).To(Equal("ghcr.io/seed-0a7eb009/cluster-api-provider-harvester"))
	g.Expect(p.Config.Label).NotTo(BeEmpty())
	for _, path := range append([]string{p.Config.GoMain, p.Config.KustomizeFolder}, p.Config.LiveReloadDeps...) {
		_, err := os.Stat(filepath.Join(testenv.RepoRoot(), path))
		g.Expect(err).NotTo(HaveOccurred(), "tilt-provider.json names %s", path)
	}
}

// metadata.yaml's contract must be the one the CRDs are labelled with.
func TestMetadataContract(t *testing.T) {
	g := NewWithT(t)
	var metadata struct {
		APIVersion    string `json:"apiVersion"`
		Kind          string `json:"kind"`
		ReleaseSeries []struct {
			Major, Minor int
			Contract     string `json:"contract"`
		} `json:"releaseSeries"`
	}
	g.Expect(yaml.Unmarshal(readRepoFile(t, "metadata.yaml"), &metadata)).To(Succeed())
	g.Expect(metadata.Kind).To(Equal("Metadata"))
	g.Expect(metadata.ReleaseSeries).NotTo(BeEmpty())
	for _, o := range render(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			g.Expect(o.GetLabels()).To(HaveKey("cluster.x-k8s.io/" + metadata.ReleaseSeries[len(metadata.ReleaseSeries)-1].Contract))
		}
	}
}
