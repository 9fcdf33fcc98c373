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
