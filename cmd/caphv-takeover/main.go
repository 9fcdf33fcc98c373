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

// Command caphv-takeover takes a management cluster's clusters over from the community Harvester
// provider (CAPHV) without re-creating anything on Harvester: docs/migrating-from-caphv.md.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/takeover"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := takeover.Main(ctx, os.Args[1:], os.Stdout, nil)
	stop()
	os.Exit(code)
}
