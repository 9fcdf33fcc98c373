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

// Command jq is gojq (github.com/itchyny/gojq), a jq implementation in Go, built from the Go
// module proxy so that the tests that run the docs' `jq` commands need no jq installed by hand:
// `make jq` builds it into bin/jq. It is a module of its own (hack/jq/go.mod, run with
// GOWORK=off). gojq differs from jq in a few corners (key order, some math); the docs' filters use
// none of them.
package main

import (
	"os"

	"github.com/itchyny/gojq/cli"
)

func main() {
	os.Exit(cli.Run())
}
