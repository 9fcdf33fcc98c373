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

package readyourwrites

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// lagging reads through to the server until frozen, then answers every read with the copy it
// had when frozen, as an informer's cache that has not delivered the latest writes.
type lagging struct {
	frozen map[client.ObjectKey]client.Object
}

func (l *lagging) freeze(ctx context.Context, c client.Client, objs ...client.Object) error {
	l.frozen = map[client.ObjectKey]client.Object{}
	for _, o := range objs {
		cp := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), cp); err != nil {
			return err
		}
		l.frozen[client.ObjectKeyFromObject(o)] = cp
	}
	return nil
}

func (l *lagging) funcs() interceptor.Funcs {
	return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if o, ok := l.frozen[key]; ok {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}}
}

func TestReadsAreNeverOlderThanTheClientsOwnLastWrite(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tracked"}, Data: map[string]string{"v": "0"}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "untracked"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "with-status"}}
	server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm, other, pod).WithStatusSubresource(pod).Build()
	cache := &lagging{}
	c := New(interceptor.NewClient(server, cache.funcs()), &corev1.ConfigMap{}, &corev1.Pod{})
	read := func() *corev1.ConfigMap {
		t.Helper()
		got := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// The cache stops at version 0; the client writes 1 and then 2 (a patch, an update).
	if err := cache.freeze(ctx, server, cm); err != nil {
		t.Fatal(err)
	}
	stale := read()
	one := stale.DeepCopy()
	one.Data["v"] = "1"
	if err := c.Patch(ctx, one, client.MergeFrom(stale)); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Data["v"] != "1" || got.ResourceVersion != one.ResourceVersion {
		t.Fatalf("read after the patch: %v at %s, want the patch's answer at %s", got.Data, got.ResourceVersion, one.ResourceVersion)
	}
	two := read()
	two.Data["v"] = "2"
	if err := c.Update(ctx, two); err != nil {
		t.Fatal(err)
	}
	got := read()
	if got.Data["v"] != "2" {
		t.Fatalf("read after the update: %v, want the update's answer", got.Data)
	}
	// What a read returns is the caller's: changing it changes nothing remembered.
	got.Data["v"] = "changed by the caller"
	if read().Data["v"] != "2" {
		t.Fatal("a read shares its object with the client's memory")
	}
	if c.Len() != 1 {
		t.Fatalf("remembers %d objects, want 1", c.Len())
	}

	// A failed write is not remembered: the read is the cache's.
	conflict := stale.DeepCopy()
	conflict.Data["v"] = "refused"
	if err := c.Update(ctx, conflict); !apierrors.IsConflict(err) {
		t.Fatalf("update from a stale version: %v, want a conflict", err)
	}
	if read().Data["v"] != "2" {
		t.Fatal("a refused write changed what is read")
	}

	// The cache catches up (or someone else writes something newer): the cache's copy is read,
	// and the client forgets its write.
	cache.frozen = nil
	if got := read(); got.Data["v"] != "2" || c.Len() != 0 {
		t.Fatalf("after the cache caught up: %v, remembering %d", got.Data, c.Len())
	}

	// Kinds it was not made for pass through, unremembered.
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), s); err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{"a": "b"}
	if err := c.Update(ctx, s); err != nil || c.Len() != 0 {
		t.Fatalf("an untracked write: %v, remembering %d", err, c.Len())
	}

	// A status write is remembered too.
	if err := cache.freeze(ctx, server, pod); err != nil {
		t.Fatal(err)
	}
	readPod := func() *corev1.Pod {
		t.Helper()
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	stalePod := readPod()
	running := stalePod.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	if err := c.Status().Patch(ctx, running, client.MergeFrom(stalePod)); err != nil {
		t.Fatal(err)
	}
	if got := readPod(); got.Status.Phase != corev1.PodRunning || c.Len() != 1 {
		t.Fatalf("read after the status patch: %q, remembering %d", got.Status.Phase, c.Len())
	}

	// Deleting forgets the object, and so does a read that finds it gone.
	if err := c.Delete(ctx, running); err != nil || c.Len() != 0 {
		t.Fatalf("delete: %v, remembering %d", err, c.Len())
	}
	latest := read()
	labelled := latest.DeepCopy()
	labelled.Labels = map[string]string{"x": "y"}
	if err := c.Patch(ctx, labelled, client.MergeFrom(latest)); err != nil || c.Len() != 1 {
		t.Fatalf("patch: %v, remembering %d", err, c.Len())
	}
	if err := server.Delete(ctx, labelled); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) || c.Len() != 0 {
		t.Fatalf("read after another's deletion: %v, remembering %d", err, c.Len())
	}
}
