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

// Command release writes the release assets clusterctl reads into a directory:
// `go run ./hack/release -out out -image ... -ccm-image ... [-checksums]` (what `make
// release-manifests` and `make release` run).
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/release"
)

func main() {
	out := flag.String("out", "out", "Directory to write the assets to.")
	root := flag.String("root", ".", "The repository's root directory.")
	image := flag.String("image", "", "The manager's image (default: config/'s).")
	ccmImage := flag.String("ccm-image", "", "The guests' cloud controller manager image (default: config/'s).")
	checksums := flag.Bool("checksums", false, "Then write checksums.txt over every file of -out (what `make release` does).")
	flag.Parse()
	names, err := release.Write(*out, release.Options{Root: *root, Image: *image, CCMImage: *ccmImage})
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Printf("%s/%s\n", *out, n)
	}
	if *checksums {
		if err := release.WriteChecksums(*out); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		fmt.Printf("%s/%s\n", *out, release.ChecksumsFile)
	}
}
