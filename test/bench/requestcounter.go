package bench

import (
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// requestCounter counts the requests a client sends, by "verb resource" named as the provider's
// Harvester request metrics name them; the bench puts one on the provider's management-cluster
// connection, which has no metrics of its own.
// It also times the round trip of each request of the kinds in timed (after client-go's
// client-side rate limiter, which runs before the round-tripper).
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	timed  map[string][]time.Duration
	// conflicts are the requests answered 409 Conflict, by "verb resource".
	conflicts map[string]int
}

func newRequestCounter(timed ...string) *requestCounter {
	c := &requestCounter{counts: map[string]int{}, timed: map[string][]time.Duration{}, conflicts: map[string]int{}}
	for _, k := range timed {
		c.timed[k] = nil
	}
	return c
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		verb, resource := harvester.RequestVerbResource(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
		key := verb + " " + resource
		c.mu.Lock()
		c.counts[key]++
		_, timed := c.timed[key]
		c.mu.Unlock()
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		took := time.Since(start)
		c.mu.Lock()
		defer c.mu.Unlock()
		if timed {
			c.timed[key] = append(c.timed[key], took)
		}
		if resp != nil && resp.StatusCode == http.StatusConflict {
			c.conflicts[key]++
		}
		return resp, err
	})
}

// conflictCounts are the 409 answers so far, by "verb resource".
func (c *requestCounter) conflictCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.conflicts)
}

// durations are the round trips of key's requests timed so far.
func (c *requestCounter) durations(key string) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.timed[key])
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
