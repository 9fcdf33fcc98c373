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

package takeover

import (
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// The command refuses to run without its export directory, and on flags it does not know, before
// it connects anywhere (the configuration given points nowhere).
func TestTheCommandNeedsItsDirectory(t *testing.T) {
	g := NewWithT(t)
	nowhere := &rest.Config{Host: "https://127.0.0.1:1"}
	for args, says := range map[string]string{
		"":                  "--dir is required",
		"--dir x --unknown": "flag provided but not defined: -unknown",
	} {
		var out bytes.Buffer
		g.Expect(Main(context.Background(), strings.Fields(args), &out, nowhere)).To(Equal(1), args)
		g.Expect(out.String()).To(ContainSubstring(says), args)
	}
}
