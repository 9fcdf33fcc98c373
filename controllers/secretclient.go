package controllers

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
type secretClient struct {
	client.Client
	metadata client.Reader

	mu   sync.Mutex
	read map[client.ObjectKey]*corev1.Secret
}

func newSecretClient(c client.Client, metadata client.Reader) *secretClient {
	return &secretClient{Client: c, metadata: metadata, read: map[client.ObjectKey]*corev1.Secret{}}
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
		c.mu.Unlock()
		if last != nil && last.ResourceVersion == meta.ResourceVersion {
			last.DeepCopyInto(secret)
			return nil
		}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read[client.ObjectKeyFromObject(secret)] = secret.DeepCopy()
}

func (c *secretClient) forget(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.read, key)
}

// size is how many Secrets are held (tests).
func (c *secretClient) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.read)
}
