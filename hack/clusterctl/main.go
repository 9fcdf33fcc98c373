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

// Command clusterctl is Cluster API's clusterctl, built from the sigs.k8s.io/cluster-api module
// at the version the provider is built against, so that the tests that run the docs' clusterctl
// commands need nothing installed by hand: `make clusterctl` builds it into bin/. It is a module
// of its own (hack/clusterctl/go.mod, run with GOWORK=off) so that clusterctl's command-line
// dependencies do not move the product's.
package main

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/cmd"
)

func main() {
	cmd.Execute()
}
