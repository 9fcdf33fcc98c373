// Command kubectl is kubectl, built from the k8s.io/kubectl module at the version of the test
// control planes, so that the tests that run the docs' commands need no kubectl installed by
// hand: `make kubectl` builds it into bin/. It is a module of its own (hack/kubectl/go.mod, run
// with GOWORK=off) so that kubectl's dependencies do not move the product's.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
