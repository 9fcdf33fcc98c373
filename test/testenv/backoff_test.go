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

package testenv

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The kubelet's back-off doubles while a program keeps ending soon after it starts, stops at five
// minutes, and starts again at ten seconds once a run lasted ten minutes.
func TestCrashBackoffDoublesAndForgetsALongRun(t *testing.T) {
	g := NewWithT(t)
	b := KubeletCrashBackoff()
	var waits []time.Duration
	for range 7 {
		waits = append(waits, b.Next(time.Minute))
	}
	g.Expect(waits).To(Equal([]time.Duration{
		10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute,
	}))
	g.Expect(b.Next(10*time.Minute)).To(Equal(10*time.Second), "a ten-minute run resets it")
	g.Expect(b.Next(9*time.Minute)).To(Equal(20*time.Second), "a shorter one does not")
}
