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

package cloudprovider

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
)

// cloudConfig is a cloud-config as the cluster reconciler writes it (never contacted here).
const cloudConfig = `apiVersion: v1
kind: Config
clusters:
- name: harvester
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: guest
  context: {cluster: harvester, user: guest, namespace: guests}
current-context: guest
users:
- name: guest
  user: {token: not-a-real-token}
`

// captureKlog sends klog's output to a buffer for the rest of the test.
func captureKlog(t *testing.T) *bytes.Buffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("logtostderr", "false"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.SetOutput(nil)
		_ = fs.Set("logtostderr", "true")
	})
	return &buf
}

func TestNewClusterName(t *testing.T) {
	for _, tc := range []struct {
		name, cluster string
		wantErr       string
		wantWarning   bool
	}{
		{name: "a cluster ID of ours", cluster: "capi-ns.guest"},
		{name: "upstream's default, for guests switching from it", cluster: "kubernetes", wantWarning: true},
		{name: "none", cluster: "", wantErr: "--cluster-name must name this guest cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			logged := captureKlog(t)
			cloud, err := New(strings.NewReader(cloudConfig), Options{ClusterName: tc.cluster})
			klog.Flush()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cloud.Namespace()).To(Equal("guests"))
			g.Expect(cloud.HasClusterID()).To(BeTrue())
			if tc.wantWarning {
				g.Expect(logged.String()).To(And(HavePrefix("W"), ContainSubstring(`--cluster-name is the default "kubernetes"`)))
			} else {
				g.Expect(logged.String()).To(BeEmpty())
			}
			g.Expect(logged.String()).NotTo(ContainSubstring("not-a-real-token"))
		})
	}
}
