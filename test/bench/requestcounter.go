package bench

import (
	"net/http"
	"sync"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// requestCounter counts the requests a client sends, by "verb resource" named as the provider's
// Harvester request metrics name them; the bench puts one on the provider's management-cluster
// connection, which has no metrics of its own.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: map[string]int{}} }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		verb, resource := harvester.RequestVerbResource(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
		c.mu.Lock()
		c.counts[verb+" "+resource]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
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
