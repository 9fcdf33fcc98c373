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

import "time"

// CrashBackoff is the kubelet's restart back-off for a container that ends by itself
// (restartPolicy Always): Initial after the first end, doubled after each further one, at most
// Max; a run that lasted ResetAfter or longer starts the doubling again, as the kubelet forgets
// a container's back-off once it has run ten minutes without a problem. The bed's processes
// (the manager, KubeVirt's and Harvester's programs) end by themselves when a loaded apiserver
// lets their leader lease lapse; without the reset, a long test run would wait minutes for a
// program that ended a few times an hour.
type CrashBackoff struct {
	Initial, Max, ResetAfter time.Duration
	// ends counts the ends since the last reset.
	ends int
}

// KubeletCrashBackoff is the kubelet's: 10 s, doubled, at most 5 minutes, reset after 10 minutes.
func KubeletCrashBackoff() CrashBackoff {
	return CrashBackoff{Initial: 10 * time.Second, Max: 5 * time.Minute, ResetAfter: 10 * time.Minute}
}

// Next records an end after a run of ranFor and says how long to wait before the next start.
func (b *CrashBackoff) Next(ranFor time.Duration) time.Duration {
	if b.ResetAfter > 0 && ranFor >= b.ResetAfter {
		b.ends = 0
	}
	b.ends++
	d := b.Initial
	for i := 1; i < b.ends && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}
