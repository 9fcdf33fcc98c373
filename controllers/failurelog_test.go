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
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// Each failure is logged once at Info with its kind, reason and the object's keys; its repeats
// go to V(4) until failureLogRepeat has passed; another message, or the same after a success,
// is logged at once. Access, reference and invalid-input failures are logged too (they used to
// be requeued silently).
func TestFailuresAreLoggedOncePerObjectAndMessage(t *testing.T) {
	g := NewWithT(t)
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 0})
	now := time.Unix(0, 0)
	f := &failureLog{entries: map[string]failureEntry{}, now: func() time.Time { return now }}
	saved := failures
	failures = f
	t.Cleanup(func() { failures = saved })

	ctx := ctrl.LoggerInto(context.Background(), logger.WithValues("HarvesterMachine", "ns/m"))
	ctx = withFailureKey(ctx, "HarvesterMachine", "ns/m")
	fail := func(kind transport.Kind, reason, message string) {
		_, _ = harvesterResult(ctx, &transport.Error{Kind: kind, Reason: reason, Message: message}, func(string, string) {})
	}
	for range 3 {
		fail(transport.KindUnreachable, infrav1.HarvesterUnreachableReason, "no answer")
	}
	g.Expect(lines).To(HaveLen(1), "an outage logs the object once, not every 5 s")
	g.Expect(lines[0]).To(And(ContainSubstring(`"kind"="Unreachable"`), ContainSubstring(`"reason"="HarvesterUnreachable"`),
		ContainSubstring(`"HarvesterMachine"="ns/m"`), ContainSubstring("no answer")))

	fail(transport.KindReference, infrav1.ImageNotFoundReason, "image default/x not found")
	g.Expect(lines).To(HaveLen(2), "a reference failure is logged")
	g.Expect(lines[1]).To(ContainSubstring(`"kind"="Reference"`))

	now = now.Add(failureLogRepeat)
	fail(transport.KindReference, infrav1.ImageNotFoundReason, "image default/x not found")
	g.Expect(lines).To(HaveLen(3), "repeated after the window")

	f.forget(ctx)
	fail(transport.KindReference, infrav1.ImageNotFoundReason, "image default/x not found")
	g.Expect(lines).To(HaveLen(4), "after a success, at once")

	other := withFailureKey(ctrl.LoggerInto(context.Background(), logger), "HarvesterMachine", "ns/other")
	_, _ = harvesterResult(other, &transport.Error{Kind: transport.KindAccess, Reason: infrav1.ForbiddenReason, Message: "forbidden"}, func(string, string) {})
	g.Expect(lines).To(HaveLen(5), "another object has its own entry")
	g.Expect(strings.Join(lines, "\n")).NotTo(ContainSubstring("token"))
}
