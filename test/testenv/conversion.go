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

package testenv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	controlplaneconversion "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/conversion"
	coreconversion "sigs.k8s.io/cluster-api/core/webhooks/conversion"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// The management cluster serves Cluster API's conversion webhooks as CAPI's manager does: its
// CRDs store v1beta2 and still serve v1beta1, which older providers (RKE2, K3s) read and write.
// Since CAPI v1.14 its kinds convert through converters its admission webhooks register (not
// through the scheme), so Start points the CRDs Options.ConversionWebhookCRDs names at the
// manager's webhook server, and /convert there dispatches to those converters.

// registerConversion serves CRD conversion on the manager's webhook server, with the manager's
// scheme, and tells CAPI's v1beta1 conversions how to find the apiVersion of a referenced kind
// (v1beta2 references name a group only; v1beta1 ones an apiVersion).
func registerConversion(mgr ctrl.Manager) {
	setAPIVersionGetter.Do(func() {
		getter := func(ctx context.Context, gk schema.GroupKind) (string, error) {
			readers := runningConverters.running()
			if len(readers) == 0 {
				return "", fmt.Errorf("no management manager runs to look up %s", gk)
			}
			// Newest first; a kind whose CRD only one of them has (another provider's, installed
			// in one management cluster) is found in that one.
			var err error
			for _, c := range slices.Backward(readers) {
				// Bounded: a cache that stops while a conversion waits for it must not hold the
				// webhook server's shutdown.
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				var version string
				version, err = contractAPIVersion(ctx, c, gk)
				cancel()
				if err == nil {
					return version, nil
				}
			}
			return "", err
		}
		coreconversion.SetAPIVersionGetter(getter)
		controlplaneconversion.SetAPIVersionGetter(getter)
	})
	runningConverters.register(mgr)
	mgr.GetWebhookServer().Register("/convert", conversion.NewWebhookHandler(mgr.GetScheme(), mgr.GetConverterRegistry()))
}

// CAPI's API version getter is one per process, but a test process runs several management
// clusters (one after another, or two at once for clusterctl move): the getter reads the CRDs
// through the caches of the managers that run, the newest started first. A getter bound to the last
// manager made read a cache that was never started, or already stopped, and waited forever.
var (
	setAPIVersionGetter sync.Once
	runningConverters   = &converterSet{}
)

type converterSet struct {
	mu sync.Mutex
	// converting are the managers that serve conversion (the management clusters'); readers,
	// those of them that run.
	converting map[ctrl.Manager]bool
	readers    []converterReader
}

type converterReader struct {
	env    *Environment
	reader client.Reader
}

func (s *converterSet) register(mgr ctrl.Manager) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.converting == nil {
		s.converting = map[ctrl.Manager]bool{}
	}
	s.converting[mgr] = true
}

// started records e's manager as running, if it serves conversion.
func (s *converterSet) started(e *Environment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.converting[e.Manager] {
		s.readers = append(s.readers, converterReader{env: e, reader: e.Manager.GetClient()})
	}
}

func (s *converterSet) remove(e *Environment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers = slices.DeleteFunc(s.readers, func(c converterReader) bool { return c.env == e })
	delete(s.converting, e.Manager)
}

// running returns the readers of the running managers, oldest first.
func (s *converterSet) running() []client.Reader {
	s.mu.Lock()
	defer s.mu.Unlock()
	readers := make([]client.Reader, 0, len(s.readers))
	for _, r := range s.readers {
		readers = append(readers, r.reader)
	}
	return readers
}

// contractAPIVersion is the apiVersion of gk that CAPI's controllers use: the newest version the
// CRD's contract labels list (`cluster.x-k8s.io/<contract>: <version>[_<version>...]`), newest
// contract first; for CAPI's own kinds, the CRD's storage version.
func contractAPIVersion(ctx context.Context, c client.Reader, gk schema.GroupKind) (string, error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	// Read-only, and called on every conversion: a deep copy of every CRD's schema each time was
	// a third of the bench process's CPU (make bench, BENCH_PROFILE=1).
	if err := c.List(ctx, crds, client.UnsafeDisableDeepCopy); err != nil {
		return "", err
	}
	i := slices.IndexFunc(crds.Items, func(crd apiextensionsv1.CustomResourceDefinition) bool {
		return crd.Spec.Group == gk.Group && crd.Spec.Names.Kind == gk.Kind
	})
	if i < 0 {
		return "", fmt.Errorf("no CustomResourceDefinition for %s", gk)
	}
	crd := crds.Items[i]
	for _, contract := range []string{"v1beta2", "v1beta1"} {
		if versions := crd.Labels["cluster.x-k8s.io/"+contract]; versions != "" {
			list := strings.Split(versions, "_")
			// The newest, in Kubernetes' order of versions (v1alpha1 < v1beta1 < v1).
			slices.SortFunc(list, version.CompareKubeAwareVersionStrings)
			return schema.GroupVersion{Group: gk.Group, Version: list[len(list)-1]}.String(), nil
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return schema.GroupVersion{Group: gk.Group, Version: v.Name}.String(), nil
		}
	}
	return "", fmt.Errorf("the CustomResourceDefinition of %s has no contract label and no storage version", gk)
}
