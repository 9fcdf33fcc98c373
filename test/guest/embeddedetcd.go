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

package guest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// What RKE2 and K3s servers (the same code, k3s pkg/etcd and pkg/deploy) do around their
// embedded etcd and their manifests directory.

// etcdRoleLabel is on the Node of a server that runs an etcd member.
const etcdRoleLabel = "node-role.kubernetes.io/etcd"

// The etcd member controller's Node annotations, after the distribution's prefix
// (etcd.rke2.cattle.io, etcd.k3s.cattle.io): a server's Node names its member; a control-plane
// provider asks for a member's removal with the second and waits for the third, which the
// controller sets to the removed member's name.
const (
	etcdNodeNameAnnotation    = "/node-name"
	etcdRemoveAnnotation      = "/remove"
	etcdRemovedNameAnnotation = "/removed-node-name"
)

// embeddedEtcdMemberName is an RKE2 or K3s server's etcd member name: its node name and eight
// random hex digits (k3s pkg/etcd); the providers take the node name back by cutting at the last
// '-'.
func embeddedEtcdMemberName(node string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return node + "-" + hex.EncodeToString(b)
}

// etcdRemoval plays the servers' etcd member controller: a Node annotated with
// <prefix>/remove=true has its member removed, then carries the removed member's name in
// <prefix>/removed-node-name, which the providers' pre-terminate hooks wait for.
type etcdRemoval struct {
	client client.Client
	etcd   *stackedEtcd
	prefix string
}

func setUpEtcdRemoval(mgr ctrl.Manager, etcd *stackedEtcd, prefix string) error {
	return ctrl.NewControllerManagedBy(mgr).Named("etcd-member-removal").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		For(&corev1.Node{}).
		Complete(&etcdRemoval{client: mgr.GetClient(), etcd: etcd, prefix: prefix})
}

func (r *etcdRemoval) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if node.Annotations[r.prefix+etcdRemoveAnnotation] != "true" || node.Annotations[r.prefix+etcdRemovedNameAnnotation] != "" {
		return ctrl.Result{}, nil
	}
	member, err := r.etcd.remove(ctx, node.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := node.DeepCopy()
	node.Annotations[r.prefix+etcdRemovedNameAnnotation] = member
	return ctrl.Result{}, r.client.Patch(ctx, node, client.MergeFrom(base))
}

// manifestsIn returns the manifests in files under dir, by path.
func manifestsIn(files map[string][]byte, dir string) [][]byte {
	if dir == "" {
		return nil
	}
	var out [][]byte
	for _, path := range slices.Sorted(maps.Keys(files)) {
		if strings.HasPrefix(path, dir+"/") && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".json")) {
			out = append(out, files[path])
		}
	}
	return out
}

// applyManifests applies each object of the manifests to the guest, as a server's deploy
// controller does with the files of its manifests directory: every object it can, returning
// what it could not.
func applyManifests(ctx context.Context, c client.Client, manifests [][]byte) error {
	var errs []error
	for _, m := range manifests {
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(m), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := decoder.Decode(&u.Object); err != nil {
				if !errors.Is(err, io.EOF) {
					errs = append(errs, fmt.Errorf("reading a manifest: %w", err))
				}
				break
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("deploy"), client.ForceOwnership); err != nil {
				errs = append(errs, fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err))
			}
		}
	}
	return errors.Join(errs...)
}
