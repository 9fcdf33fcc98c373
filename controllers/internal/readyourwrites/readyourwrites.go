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

// Package readyourwrites is a client whose reads of the kinds it is given are never older than
// its own last write of the object.
//
// Why: a reconcile that writes an object (a finalizer, conditions, the status) is often followed
// by another event of the same object before the informer has delivered that write. Read from
// the cache, the object is then a version the server has replaced: CAPI's patch.Helper patches
// conditions locked to the version it reads, so it gets a conflict, waits its back-off and reads
// again, once per write the cache lags behind. make bench measured it (docs/performance.md): on
// patch.Helper alone, 87 refused status patches in a 100-machine creation and P1 twice its
// floor at p99. The client keeps, per object, the server's answer to its last write until the
// cache has that version or a newer one (resource versions compared as the apiserver defines
// them, k8s.io/apimachinery's resourceversion), and answers a read with it meanwhile.
package readyourwrites

import (
	"context"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Client reads and writes through the client it wraps, and remembers its writes of the kinds
// it was made for.
type Client struct {
	client.Client
	kinds map[reflect.Type]bool
	last  sync.Map // key -> client.Object, the server's answer to the last write
}

type key struct {
	kind reflect.Type
	client.ObjectKey
}

// New wraps c; the objects name the kinds (by Go type) whose writes it remembers.
func New(c client.Client, kinds ...client.Object) *Client {
	k := map[reflect.Type]bool{}
	for _, o := range kinds {
		k[reflect.TypeOf(o)] = true
	}
	return &Client{Client: c, kinds: k}
}

func (c *Client) keyOf(obj client.Object, name client.ObjectKey) (key, bool) {
	t := reflect.TypeOf(obj)
	return key{kind: t, ObjectKey: name}, c.kinds[t]
}

// Get reads obj; when the client's own last write of it is newer than what was read, obj is that
// write instead.
func (c *Client) Get(ctx context.Context, name client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, tracked := c.keyOf(obj, name)
	err := c.Client.Get(ctx, name, obj, opts...)
	if !tracked {
		return err
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			c.last.Delete(k)
		}
		return err
	}
	v, ok := c.last.Load(k)
	if !ok {
		return nil
	}
	written := v.(client.Object)
	if newer, cmpErr := resourceversion.CompareResourceVersion(written.GetResourceVersion(), obj.GetResourceVersion()); cmpErr == nil && newer > 0 {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(written.DeepCopyObject()).Elem())
		return nil
	}
	c.last.CompareAndDelete(k, v) // the read has caught up
	return nil
}

// wrote remembers obj, the server's answer to a write, when it is of a tracked kind.
func (c *Client) wrote(obj client.Object) {
	k, tracked := c.keyOf(obj, client.ObjectKeyFromObject(obj))
	if !tracked || obj.GetResourceVersion() == "" {
		return
	}
	w := obj.DeepCopyObject().(client.Object)
	w.SetManagedFields(nil) // as the cache holds it
	c.last.Store(k, w)
}

// Patch writes and remembers the server's answer.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	c.wrote(obj)
	return nil
}

// Update writes and remembers the server's answer.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	c.wrote(obj)
	return nil
}

// Delete deletes, and forgets the object (a deletion the server finishes at once leaves nothing
// to read; one that waits for finalizers is read from the cache again).
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if k, tracked := c.keyOf(obj, client.ObjectKeyFromObject(obj)); tracked {
		c.last.Delete(k)
	}
	return c.Client.Delete(ctx, obj, opts...)
}

// Status writes the status subresource, remembering the server's answers.
func (c *Client) Status() client.SubResourceWriter {
	return &statusWriter{SubResourceWriter: c.Client.Status(), c: c}
}

type statusWriter struct {
	client.SubResourceWriter
	c *Client
}

func (w *statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	w.c.wrote(obj)
	return nil
}

func (w *statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := w.SubResourceWriter.Update(ctx, obj, opts...); err != nil {
		return err
	}
	w.c.wrote(obj)
	return nil
}

// Len is how many objects the client remembers (for tests).
func (c *Client) Len() int {
	n := 0
	c.last.Range(func(any, any) bool { n++; return true })
	return n
}
