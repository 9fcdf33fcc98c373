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

package transport

import (
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// Every failure of a Harvester request becomes one Error, whose Kind tells the reconcilers when
// to look again and whose reason and message go on a condition.
func TestClassifyErrorGivesEveryFailureAKindAndReason(t *testing.T) {
	vms := schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachines"}
	refused := &url.Error{Op: "Get", URL: "https://harvester.example:6443/api", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		name   string
		err    error
		kind   Kind
		reason string
		says   string
	}{
		{"401", apierrors.NewUnauthorized("token expired"), KindAccess, infrav1.UnauthorizedReason, "(401)"},
		{"403", apierrors.NewForbidden(vms, "vm-1", errors.New("no")), KindAccess, infrav1.ForbiddenReason, "(403) on virtualmachines.kubevirt.io"},
		{"a webhook's refusal", apierrors.NewBadRequest("admission webhook denied: quota exceeded"), KindRefused, infrav1.HarvesterRefusedReason, "quota exceeded"},
		{"a conflict", apierrors.NewConflict(vms, "vm-1", errors.New("changed")), KindRefused, infrav1.HarvesterRefusedReason, "HTTP 409"},
		{"refused connection", refused, KindUnreachable, infrav1.HarvesterUnreachableReason, "refused the connection at harvester.example:6443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := ClassifyError(tc.err, "creating VM guests/vm-1")
			e, ok := AsError(err)
			g.Expect(ok).To(BeTrue())
			g.Expect(e.Kind).To(Equal(tc.kind))
			g.Expect(e.Reason).To(Equal(tc.reason))
			g.Expect(e.Message).To(HavePrefix("creating VM guests/vm-1: "))
			g.Expect(e.Message).To(ContainSubstring(tc.says))
			g.Expect(errors.Is(err, tc.err)).To(BeTrue(), "the cause stays in the chain, for logs")
		})
	}

	g := NewWithT(t)
	g.Expect(ClassifyError(nil, "anything")).To(Succeed())
	ref := ReferenceError(infrav1.ImageNotFoundReason, "image %s does not exist", "a/b")
	g.Expect(ClassifyError(ref, "again")).To(BeIdenticalTo(ref), "an Error passes through unchanged")
}
