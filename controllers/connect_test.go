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
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// One mapping from a service's error to a reconcile's end: what is reported, and when the
// reconcile comes back.
func TestHarvesterResultReportsAndRetriesByKind(t *testing.T) {
	notSynced := &transport.Error{Kind: transport.KindUnreachable, Reason: infrav1.HarvesterUnreachableReason,
		Message: "waiting", Err: fmt.Errorf("cache: %w", transport.ErrNotSynced)}
	plain := errors.New("the management apiserver said no")
	for _, tc := range []struct {
		name     string
		err      error
		result   ctrl.Result
		returned error
		reported string
	}{
		{"no error", nil, ctrl.Result{}, nil, ""},
		{"a management-side error", plain, ctrl.Result{}, plain, ""},
		{"unreachable", &transport.Error{Kind: transport.KindUnreachable, Reason: infrav1.HarvesterUnreachableReason}, ctrl.Result{RequeueAfter: unreachableRecheck}, nil, infrav1.HarvesterUnreachableReason},
		{"a cache still filling", notSynced, ctrl.Result{RequeueAfter: syncRecheck}, nil, infrav1.HarvesterUnreachableReason},
		{"access", &transport.Error{Kind: transport.KindAccess, Reason: infrav1.UnauthorizedReason}, ctrl.Result{RequeueAfter: accessRecheck}, nil, infrav1.UnauthorizedReason},
		{"a reference", &transport.Error{Kind: transport.KindReference, Reason: infrav1.ImageNotFoundReason}, ctrl.Result{RequeueAfter: referenceRecheck}, nil, infrav1.ImageNotFoundReason},
		{"invalid input", &transport.Error{Kind: transport.KindInvalid, Reason: infrav1.UnsupportedBootstrapFormatReason}, ctrl.Result{}, nil, infrav1.UnsupportedBootstrapFormatReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reported := ""
			result, err := harvesterResult(context.Background(), tc.err, func(reason, _ string) { reported = reason })
			g.Expect(result).To(Equal(tc.result))
			if tc.returned == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(BeIdenticalTo(tc.returned))
			}
			g.Expect(reported).To(Equal(tc.reported))
		})
	}

	// A refusal goes back to the controller for its back-off, and is reported.
	g := NewWithT(t)
	refused := &transport.Error{Kind: transport.KindRefused, Reason: infrav1.HarvesterRefusedReason, Message: "quota"}
	reported := ""
	result, err := harvesterResult(context.Background(), refused, func(reason, _ string) { reported = reason })
	g.Expect(result).To(Equal(ctrl.Result{}))
	g.Expect(err).To(BeIdenticalTo(refused))
	g.Expect(reported).To(Equal(infrav1.HarvesterRefusedReason))
}

// --reference-recheck-interval changes when a machine looks again at a missing image, key pair or
// network, and nothing else.
func TestMachineReferenceRecheckIsConfigurable(t *testing.T) {
	g := NewWithT(t)
	report := func(string, string) {}
	r := &HarvesterMachineReconciler{ReferenceRecheck: 2 * time.Second}
	missing := &transport.Error{Kind: transport.KindReference, Reason: infrav1.KeyPairNotFoundReason}
	g.Expect(r.harvesterResult(context.Background(), missing, report)).To(Equal(ctrl.Result{RequeueAfter: 2 * time.Second}))
	unreachable := &transport.Error{Kind: transport.KindUnreachable, Reason: infrav1.HarvesterUnreachableReason}
	g.Expect(r.harvesterResult(context.Background(), unreachable, report)).To(Equal(ctrl.Result{RequeueAfter: unreachableRecheck}))
	notSynced := &transport.Error{Kind: transport.KindReference, Reason: infrav1.ImageNotFoundReason, Err: transport.ErrNotSynced}
	g.Expect(r.harvesterResult(context.Background(), notSynced, report)).To(Equal(ctrl.Result{RequeueAfter: syncRecheck}))
	unset := &HarvesterMachineReconciler{}
	g.Expect(unset.harvesterResult(context.Background(), missing, report)).To(Equal(ctrl.Result{RequeueAfter: DefaultReferenceRecheck}))
}
