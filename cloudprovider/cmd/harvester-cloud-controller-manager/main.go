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

// Command harvester-cloud-controller-manager is the guest cluster's cloud controller manager
// for Harvester HCI, on Kubernetes' cloud-provider framework.
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider/app"
)

func main() {
	command, err := app.NewCommand(wait.NeverStop)
	if err != nil {
		klog.Fatal(err)
	}
	os.Exit(cli.Run(command))
}
