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

import "os"

// Full tells whether the tests run at full size (TEST_FULL=1, `make test-full`): a long scenario
// repeats its steps fewer times in `make test`, which must stay within its time budget
// (docs/development.md), and as many as it was written for here.
func Full() bool { return os.Getenv("TEST_FULL") == "1" }

// Scale is full under TEST_FULL=1, else bounded: how many times a long scenario repeats a step.
func Scale(full, bounded int) int {
	if Full() {
		return full
	}
	return bounded
}
