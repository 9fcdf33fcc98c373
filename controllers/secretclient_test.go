package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
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
	if c.size() != 0 {
		t.Fatalf("a deleted Secret is still held (%d)", c.size())
	}
	if err := c.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted Secret: got %v, want NotFound", err)
	}

	// Other kinds are the manager client's.
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ConfigMap: got %v, want NotFound from the client", err)
	}
}
