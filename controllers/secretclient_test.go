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
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestSecretClientReadsASecretAgainOnlyWhenItChanged(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "ns", Name: "identity"}
	live := 0
	base := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string][]byte{"k": []byte("v1")}}).
		Build()
	counted := interceptor.NewClient(base, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			live++
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	// The fake client stands for both: its PartialObjectMetadata reads are the metadata cache's.
	c := newSecretClient(counted, base)
	get := func() *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := c.Get(ctx, key, s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	if s := get(); string(s.Data["k"]) != "v1" || live != 1 {
		t.Fatalf("first read: data %q, live reads %d; want v1, 1", s.Data["k"], live)
	}
	s := get()
	s.Data["k"] = []byte("changed by the caller")
	if s := get(); string(s.Data["k"]) != "v1" || live != 1 {
		t.Fatalf("unchanged Secret: data %q, live reads %d; want v1 (the caller's copy is its own), 1", s.Data["k"], live)
	}

	// Changed by someone else: its resourceVersion moves, and it is read again.
	other := &corev1.Secret{}
	if err := base.Get(ctx, key, other); err != nil {
		t.Fatal(err)
	}
	other.Data["k"] = []byte("v2")
	if err := base.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if s := get(); string(s.Data["k"]) != "v2" || live != 2 {
		t.Fatalf("changed Secret: data %q, live reads %d; want v2, 2", s.Data["k"], live)
	}

	// Written through it: what the API server returned is kept.
	s = get()
	s.Data["k"] = []byte("v3")
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s := get(); string(s.Data["k"]) != "v3" || live != 2 {
		t.Fatalf("after its own update: data %q, live reads %d; want v3, 2", s.Data["k"], live)
	}

	if err := c.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.size(); n != 0 {
		t.Fatalf("a deleted Secret is still held (%d)", n)
	}
	if err := c.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted Secret: got %v, want NotFound", err)
	}

	// Other kinds are the manager client's.
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ConfigMap: got %v, want NotFound from the client", err)
	}
}

// A tenant who points its cluster at a new Secret round after round, deleting the old one or
// not, with Secrets of 1 MiB or of 100 KiB, grows what the client holds by nothing or up to its
// bound; a Secret deleted by someone else is forgotten on the metadata watch's delete.
func TestSecretClientHoldsABoundedSetWhateverTenantsDo(t *testing.T) {
	ctx := context.Background()
	base := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	c := newSecretClient(base, base)
	secret := func(name string, size int) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name}, Data: map[string][]byte{"kubeconfig": make([]byte, size)}}
		if err := base.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	read := func(name string) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: name}, &corev1.Secret{}); err != nil {
			t.Fatal(err)
		}
	}

	for i := range 100 {
		read(secret(fmt.Sprintf("big-%d", i), 1<<20).Name)
	}
	if n, bytes := c.size(); n != 0 || bytes != 0 {
		t.Fatalf("after reading 100 Secrets of 1 MiB: %d held, %d bytes; want none (read live each time)", n, bytes)
	}

	for i := range 400 {
		read(secret(fmt.Sprintf("small-%d", i), 100<<10).Name)
		read("small-0") // in use all along
	}
	n, bytes := c.size()
	if bytes > maxRememberedBytes || n == 0 {
		t.Fatalf("after reading 400 Secrets of 100 KiB: %d held, %d bytes; want some, at most %d bytes", n, bytes, maxRememberedBytes)
	}
	c.mu.Lock()
	_, kept := c.read[client.ObjectKey{Namespace: "tenant", Name: "small-0"}]
	c.mu.Unlock()
	if !kept {
		t.Error("the Secret read all along was forgotten before ones read once")
	}

	// Deleted by the tenant: the metadata informer's delete (also as a tombstone) forgets it.
	handler := c.forgetDeleted()
	before, _ := c.size()
	handler.OnDelete(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "small-0"}})
	handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "tenant/small-399", Obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "small-399"}}})
	if after, _ := c.size(); after != before-2 {
		t.Errorf("after two deletes: %d held, want %d", after, before-2)
	}
}
