package harvestersim

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A VM's claims are created once: later reconciles of the VM find them and send nothing, and a
// claim deleted while the VM lives is made again.
func TestClaimsAreCreatedOnlyWhenMissing(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	creates := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				creates++
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	r := &vmReconciler{Client: c}
	ctx := context.Background()
	vm := SampleVM("guests", "once", "")
	claim := claimNames(vm.Spec.Template)[0]

	for range 3 {
		if err := r.ensureClaims(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	if creates != 1 {
		t.Fatalf("three reconciles of one VM created its claim %d times, want 1", creates)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "guests", Name: claim}, pvc); err != nil {
		t.Fatalf("the claim was not made: %v", err)
	}

	if err := c.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := r.ensureClaims(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if creates != 2 {
		t.Fatalf("a claim deleted under a living VM was created %d times in all, want 2", creates)
	}
}
