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

package controllers

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretClient is the manager's client with one change: a Secret it read before is read again
// only when the manager's cache of Secrets' metadata (a watch, which holds no data) shows a
// resourceVersion other than the one it read. The manager does not cache Secrets' data (see
// UncachedObjects), so without it every reconcile of a HarvesterCluster read its identity,
// cloud-config and addon Secrets live (about six GETs); it holds only the Secrets the provider
// reads, not every Secret of the management cluster.
//
// It is as fresh as the metadata cache: a Secret changed by someone else is read live once its
// watch event has arrived, and that event also brings a reconcile (the HarvesterCluster watches
// Secrets' metadata).
//
// What it holds is bounded whatever tenants do with their Secrets: a Secret is forgotten when it
// is deleted (the metadata watch's delete, forgetDeleted), a Secret larger than
// maxRememberedSecret is never held (it is read live each time), and past
// maxRememberedBytes in all the least recently read are forgotten first.
type secretClient struct {
	client.Client
	metadata client.Reader

	mu    sync.Mutex
	read  map[client.ObjectKey]*remembered
	bytes int64
	clock uint64
}

// remembered is a Secret as last read, its size, and when it was last used (a counter).
type remembered struct {
	secret *corev1.Secret
	size   int64
	used   uint64
}

const (
	// maxRememberedSecret is the largest Secret held: identity kubeconfigs, cloud-configs and
	// addon Secrets are a few KiB.
	maxRememberedSecret = 256 << 10
	// maxRememberedBytes bounds all the Secrets held together.
	maxRememberedBytes = 16 << 20
)

func newSecretClient(c client.Client, metadata client.Reader) *secretClient {
	return &secretClient{Client: c, metadata: metadata, read: map[client.ObjectKey]*remembered{}}
}

// forgetDeleted is a handler for the Secrets' metadata informer: a deleted Secret is forgotten.
func (c *secretClient) forgetDeleted() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(client.Object); ok {
			c.forget(client.ObjectKeyFromObject(o))
		}
	}}
}

// Get reads a Secret from what was read before while its resourceVersion is unchanged, live
// otherwise; other kinds go to the manager's client.
func (c *secretClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.metadata.Get(ctx, key, meta); err == nil {
		c.mu.Lock()
		last := c.read[key]
		if last != nil && last.secret.ResourceVersion == meta.ResourceVersion {
			c.clock++
			last.used = c.clock
			last.secret.DeepCopyInto(secret)
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
	}
	// Not read yet, changed, or not in the metadata cache (which may lag a creation): live.
	if err := c.Client.Get(ctx, key, secret, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(key)
		}
		return err
	}
	c.remember(secret)
	return nil
}

// Create, Update and Patch remember the Secret as the API server returned it.
func (c *secretClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.wrote(obj, c.Client.Create(ctx, obj, opts...))
}

func (c *secretClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.wrote(obj, c.Client.Update(ctx, obj, opts...))
}

func (c *secretClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.wrote(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c *secretClient) wrote(obj client.Object, err error) error {
	if secret, ok := obj.(*corev1.Secret); ok {
		if err == nil {
			c.remember(secret)
		} else {
			c.forget(client.ObjectKeyFromObject(obj))
		}
	}
	return err
}

// Delete forgets a deleted Secret.
func (c *secretClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	if _, ok := obj.(*corev1.Secret); ok && (err == nil || apierrors.IsNotFound(err)) {
		c.forget(client.ObjectKeyFromObject(obj))
	}
	return err
}

func (c *secretClient) remember(secret *corev1.Secret) {
	key := client.ObjectKeyFromObject(secret)
	size := secretSize(secret)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(key)
	if size > maxRememberedSecret {
		return
	}
	for c.bytes+size > maxRememberedBytes && len(c.read) > 0 {
		var oldest client.ObjectKey
		oldestUse := ^uint64(0)
		for k, r := range c.read {
			if r.used < oldestUse {
				oldest, oldestUse = k, r.used
			}
		}
		c.drop(oldest)
	}
	c.clock++
	c.read[key] = &remembered{secret: secret.DeepCopy(), size: size, used: c.clock}
	c.bytes += size
}

func (c *secretClient) forget(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(key)
}

// drop forgets key; c.mu is held.
func (c *secretClient) drop(key client.ObjectKey) {
	if r, ok := c.read[key]; ok {
		c.bytes -= r.size
		delete(c.read, key)
	}
}

// secretSize is about what a Secret holds in memory: its data, labels and annotations.
func secretSize(s *corev1.Secret) int64 {
	n := int64(len(s.Namespace) + len(s.Name) + len(s.ResourceVersion) + 256)
	for k, v := range s.Data {
		n += int64(len(k) + len(v))
	}
	for k, v := range s.StringData {
		n += int64(len(k) + len(v))
	}
	for k, v := range s.Labels {
		n += int64(len(k) + len(v))
	}
	for k, v := range s.Annotations {
		n += int64(len(k) + len(v))
	}
	return n
}

// size is how many Secrets are held, and their bytes (tests).
func (c *secretClient) size() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.read), c.bytes
}
