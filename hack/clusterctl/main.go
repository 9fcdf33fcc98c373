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
