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
	"strings"
	"sync"
)

// inProcessErrors keeps the last errors that the controllers running inside the test process
// (Cluster API's core controllers, the environments' managers) logged, so that a failed wait can
// say what they reported while it waited. Their logs go nowhere otherwise (TEST_LOG unset).
var inProcessErrors = &lineRing{max: 2000}

// lineRing is an io.Writer that keeps the last max lines written to it.
type lineRing struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  string
	// total counts the lines ever written; lines holds the last of them.
	total int
}

func (r *lineRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	text := r.part + string(p)
	parts := strings.Split(text, "\n")
	r.part = parts[len(parts)-1]
	for _, line := range parts[:len(parts)-1] {
		r.lines = append(r.lines, line)
		r.total++
	}
	if over := len(r.lines) - r.max; over > 0 {
		r.lines = append(r.lines[:0:0], r.lines[over:]...)
	}
	return len(p), nil
}

// mark is the number of lines written so far, for since.
func (r *lineRing) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// matching returns the last n lines that contain every one of words.
func (r *lineRing) matching(n int, words ...string) []string { return r.since(0, n, words...) }

// since returns the last n lines written after mark that contain every one of words.
func (r *lineRing) since(mark, n int, words ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := max(0, len(r.lines)-(r.total-mark))
	var out []string
	for i := len(r.lines) - 1; i >= first && len(out) < n; i-- {
		keep := true
		for _, w := range words {
			if !strings.Contains(r.lines[i], w) {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, r.lines[i])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// InProcessErrors returns the last n errors logged by the controllers running in the test
// process whose line contains every one of words (for instance a namespace and a cluster's name).
// With TEST_LOG set they go to stderr instead and this returns nothing.
func InProcessErrors(n int, words ...string) []string { return inProcessErrors.matching(n, words...) }

// InProcessErrorsMark marks where the in-process errors stand now, for InProcessErrorsSince.
func InProcessErrorsMark() int { return inProcessErrors.mark() }

// InProcessErrorsSince returns the last n in-process errors logged after mark.
func InProcessErrorsSince(mark, n int) []string { return inProcessErrors.since(mark, n) }
