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
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Export writes every CAPHV object of the management cluster into dir, one YAML file per object
// (`<namespace>/<Kind>-<name>.yaml`), as read in CAPHV's storage version, without the fields the
// API server sets on its own (resource version, managed fields). Its UID stays: a take-over
// derives the owner mark of its objects on Harvester from the HarvesterCluster's. Run again, it
// writes the objects as they are then, and leaves the files of objects since removed.
func Export(ctx context.Context, c client.Reader, dir string) (int, error) {
	n := 0
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return n, fmt.Errorf("listing CAPHV's %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if o.GetDeletionTimestamp() != nil {
				continue // removed by an earlier run (Remove) and held by another's finalizer: its file has it as it was
			}
			o.SetResourceVersion("")
			o.SetManagedFields(nil)
			raw, err := yaml.Marshal(o.Object)
			if err != nil {
				return n, err
			}
			path := filepath.Join(dir, o.GetNamespace(), gvk.Kind+"-"+o.GetName()+".yaml")
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return n, err
			}
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				return n, fmt.Errorf("exporting %s %s: %w", gvk.Kind, key(o), err)
			}
			n++
		}
	}
	return n, nil
}

// kinds are CAPHV's four kinds, in the order an export writes them.
var kinds = []schema.GroupVersionKind{ClusterGVK, MachineGVK, MachineTemplateGVK, ClusterTemplateGVK}

// Load reads an export back into an inventory of CAPHV's objects, with the Clusters and Machines
// that use them read live from c (they stay in the management cluster while CAPHV's CRDs are
// replaced). It returns an empty inventory for an empty or missing directory.
func Load(ctx context.Context, c client.Reader, dir string) (*Inventory, error) {
	exported, err := readExport(dir)
	if err != nil {
		return nil, err
	}
	byKind := map[string][]map[string]any{}
	for _, u := range exported {
		byKind[u.GetKind()] = append(byKind[u.GetKind()], u.Object)
	}
	inv, err := readCAPI(ctx, c)
	if err != nil {
		return nil, err
	}
	var clusterTemplates []struct {
		metav1.ObjectMeta `json:"metadata"`
	}
	for kind, out := range map[string]any{
		ClusterGVK.Kind: &inv.Clusters, MachineGVK.Kind: &inv.Machines, MachineTemplateGVK.Kind: &inv.MachineTemplates, ClusterTemplateGVK.Kind: &clusterTemplates,
	} {
		if err := decode(kind, byKind[kind], out); err != nil {
			return nil, err
		}
	}
	for _, t := range clusterTemplates {
		inv.ClusterTemplates = append(inv.ClusterTemplates, t.ObjectMeta)
	}
	return inv, nil
}

// readExport reads the objects of an export (none for a missing directory); a file that is not a
// CAPHV object is an error.
func readExport(dir string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(path) //nolint:gosec // the export directory the user names (--dir)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if u.GroupVersionKind().Group != ClusterGVK.Group {
			return fmt.Errorf("%s is not a CAPHV object (%s)", path, u.GroupVersionKind())
		}
		out = append(out, u)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return out, nil
}
