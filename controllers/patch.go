package controllers

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ignoreGone drops the NotFound errors of a final patch: once a deleted object's last
// finalizer is removed, the apiserver deletes it and the status patch that follows finds
// nothing, which is the expected end, not an error to retry.
func ignoreGone(err error, obj client.Object) error {
	if err == nil || obj.GetDeletionTimestamp().IsZero() || len(obj.GetFinalizers()) > 0 {
		return err
	}
	var agg kerrors.Aggregate
	if !errors.As(err, &agg) {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return kerrors.FilterOut(agg, apierrors.IsNotFound)
}
