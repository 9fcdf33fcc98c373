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
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// HarvesterFromIdentity connects to Harvester with the kubeconfig of a cluster's identity Secret
// (its `kubeconfig` key), as both providers do.
func HarvesterFromIdentity(mgmt client.Reader) func(ctx context.Context, namespace, secret string) (client.Client, error) {
	return func(ctx context.Context, namespace, name string) (client.Client, error) {
		s := &corev1.Secret{}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return nil, fmt.Errorf("reading identity Secret %s/%s: %w", namespace, name, err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[infrav1.IdentitySecretKey])
		if err != nil {
			return nil, fmt.Errorf("identity Secret %s/%s: %w", namespace, name, err)
		}
		return client.New(cfg, client.Options{Scheme: HarvesterScheme()})
	}
}

// HarvesterScheme has the kinds a take-over reads and labels on Harvester.
func HarvesterScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, lbv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// ManagementScheme has the kinds a take-over reads and writes in the management cluster.
func ManagementScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Main is the caphv-takeover command: it parses args, runs Run against the management cluster
// of cfg (the current kubeconfig's, or --kubeconfig's, when nil) and returns the exit code: 0
// when the run is done, checked or has a next step to print, 2 when it refused, 1 on an error.
func Main(ctx context.Context, args []string, out io.Writer, cfg *rest.Config) int {
	flags := flag.NewFlagSet("caphv-takeover", flag.ContinueOnError)
	flags.SetOutput(out)
	kubeconfig := flags.String("kubeconfig", "", "the management cluster's kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	o := Options{Out: out}
	flags.StringVar(&o.Dir, "dir", "", "the directory CAPHV's objects are exported to and read back from (required; keep it until the run says done)")
	flags.BoolVar(&o.CheckOnly, "check", false, "check what can be taken over, and change nothing")
	flags.BoolVar(&o.Restore, "restore", false, "give the clusters back to CAPHV from the export (only before CAPHV's CRDs are replaced)")
	flags.DurationVar(&o.Wait, "wait", 5*time.Minute, "how long to wait for CAPHV to say Paused, and for the machines to be provisioned again")
	flags.Usage = func() {
		fmt.Fprintf(out, "caphv-takeover takes a management cluster's clusters over from the community Harvester provider (CAPHV)\n"+
			"without re-creating anything on Harvester (docs/migrating-from-caphv.md). Run it, replace CAPHV's CRDs as it\n"+
			"says, and run it again with the same --dir.\n\nUsage: caphv-takeover --dir DIR [--check | --restore] [--kubeconfig FILE] [--wait DURATION]\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return 1
	}
	if o.Dir == "" {
		fmt.Fprintln(out, "--dir is required")
		return 1
	}
	if cfg == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = *kubeconfig
		var err error
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig(); err != nil {
			fmt.Fprintf(out, "reading the kubeconfig: %v\n", err)
			return 1
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: ManagementScheme()})
	if err != nil {
		fmt.Fprintf(out, "connecting to the management cluster: %v\n", err)
		return 1
	}
	o.Harvester = HarvesterFromIdentity(c)
	outcome, refused, err := Run(ctx, c, o)
	if err != nil {
		fmt.Fprintf(out, "error: %v\nNothing on Harvester was changed but labels; run again to resume.\n", err)
		return 1
	}
	if outcome == Refused {
		fmt.Fprintf(out, "Cannot take over (nothing was changed by this run):\n")
		for _, r := range refused {
			fmt.Fprintf(out, "  %s\n", r)
		}
		return 2
	}
	return 0
}
