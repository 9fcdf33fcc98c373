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
	"errors"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"

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

// setPausedCondition sets obj's Paused condition (CAPI's contract: True while its Cluster or
// the object itself is paused) and says whether it is paused. Unlike CAPI's
// paused.EnsurePausedCondition it writes nothing: the reconcile's one deferred patch does.
func setPausedCondition(obj interface {
	conditions.Setter
	client.Object
}, cluster *clusterv1.Cluster, kind string) bool {
	var why []string
	if cluster != nil && ptr.Deref(cluster.Spec.Paused, false) {
		why = append(why, "Cluster spec.paused is set to true")
	}
	if annotations.HasPaused(obj) {
		why = append(why, kind+" has the cluster.x-k8s.io/paused annotation")
	}
	c := metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason,
		ObservedGeneration: obj.GetGeneration()}
	if len(why) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, clusterv1.PausedReason, strings.Join(why, ", ")
	}
	conditions.Set(obj, c)
	return len(why) > 0
}
