// Package webhookguard bounds what one peer can make the manager spend through its webhook port.
//
// The port serves the admission webhooks (defaulting and validation of the provider's kinds, the
// optional kubeconfig-Secret policy) and, with --in-place-updates, Cluster API's runtime hooks.
// Anything that reaches the port can post to it: Kubernetes does not make the API server
// authenticate to admission webhooks unless the cluster's admin configures it, and the Runtime SDK
// does not either. Decoding is where a request costs: a few MiB of JSON made of many tiny values
// (an array of empty objects, say) decode into structs hundreds of times that size, and a
// defaulting webhook then computes a patch over all of it. So, before a handler sees a request,
// the guard
//   - refuses anything but a POST;
//   - holds at most MaxInFlight requests at once; the next waits up to QueueWait for a place,
//     then is refused with 429 Too Many Requests;
//   - reads at most MaxBytes of the body (413 Request Entity Too Large past that, unread);
//   - scans the JSON once, without building it, and refuses (400) a body that is not JSON, holds
//     more than MaxTokens tokens, or nests deeper than MaxDepth.
//
// What the API server sends for a real object is far inside these limits: the API server stores
// objects of at most 1.5 MiB, a review carries at most two of them, and the provider's kinds are
// a few hundred tokens each with their managed fields.
package webhookguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Limits bound one request.
type Limits struct {
	// MaxBytes is the largest body read.
	MaxBytes int64
	// MaxTokens is the most JSON tokens (delimiters, keys and values) a body may hold.
	MaxTokens int
	// MaxDepth is the deepest nesting of objects and arrays a body may have.
	MaxDepth int
	// MaxArrayLen is the most elements one array may have.
	MaxArrayLen int
}

// Options configure a guarded server.
type Options struct {
	// MaxInFlight is how many requests are served at once (for every path together).
	MaxInFlight int
	// QueueWait is how long a request waits for a place before it is refused.
	QueueWait time.Duration
	// Limits apply to every path not in Paths.
	Limits Limits
	// Paths give some paths limits of their own.
	Paths map[string]Limits
}

// DefaultOptions are the manager's: admission reviews of the provider's kinds and of Secrets
// (4 MiB, 20,000 tokens), Cluster API's runtime hooks (which carry a machine's objects, current
// and desired: 10 MiB, 50,000 tokens, under the 20 MiB Cluster API's own server reads), 8
// requests at once.
func DefaultOptions(hookPathPrefix string) Options {
	return Options{
		MaxInFlight: 8,
		QueueWait:   5 * time.Second,
		Limits:      Limits{MaxBytes: 4 << 20, MaxTokens: 20_000, MaxDepth: 48, MaxArrayLen: 256},
		Paths:       map[string]Limits{hookPathPrefix: {MaxBytes: 10 << 20, MaxTokens: 50_000, MaxDepth: 48, MaxArrayLen: 256}},
	}
}

// Server is a webhook.Server whose every registered handler is guarded.
type Server struct {
	webhook.Server
	options Options
	places  chan struct{}
}

var _ webhook.Server = &Server{}

// Wrap guards every handler registered on inner from now on (through the returned Server).
func Wrap(inner webhook.Server, options Options) *Server {
	if options.MaxInFlight < 1 {
		options.MaxInFlight = 1
	}
	return &Server{Server: inner, options: options, places: make(chan struct{}, options.MaxInFlight)}
}

// Register registers the guarded handler.
func (s *Server) Register(path string, handler http.Handler) {
	s.Server.Register(path, s.Guard(path, handler))
}

// limitsFor returns the limits of the longest path prefix in Paths that path starts with, else
// the default ones.
func (s *Server) limitsFor(path string) Limits {
	limits, best := s.options.Limits, -1
	for prefix, l := range s.options.Paths {
		if len(prefix) > best && len(path) >= len(prefix) && path[:len(prefix)] == prefix {
			limits, best = l, len(prefix)
		}
	}
	return limits
}

// Guard returns handler behind the guard's checks, with path's limits.
func (s *Server) Guard(path string, handler http.Handler) http.Handler {
	limits := s.limitsFor(path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "webhooks take POST only", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > limits.MaxBytes {
			http.Error(w, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, limits.MaxBytes), http.StatusRequestEntityTooLarge)
			return
		}
		wait := time.NewTimer(s.options.QueueWait)
		defer wait.Stop()
		select {
		case s.places <- struct{}{}:
			defer func() { <-s.places }()
		case <-wait.C:
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("%d requests are being served; try again", s.options.MaxInFlight), http.StatusTooManyRequests)
			return
		case <-r.Context().Done():
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limits.MaxBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("request body is over the limit of %d bytes", limits.MaxBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := CheckShape(body, limits); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		handler.ServeHTTP(w, r)
	})
}

// CheckShape scans body as JSON without building it, and fails when it is not one JSON value or
// is larger, in tokens, depth or the length of an array, than limits allow.
func CheckShape(body []byte, limits Limits) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	tokens := 0
	// One entry per open object (-1) or array (the elements seen so far).
	open := make([]int, 0, 16)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("request body is not JSON: %w", err)
		}
		tokens++
		if tokens > limits.MaxTokens {
			return fmt.Errorf("request body holds more than %d JSON tokens", limits.MaxTokens)
		}
		d, delim := tok.(json.Delim)
		if delim && (d == '}' || d == ']') {
			open = open[:len(open)-1]
		} else if n := len(open); n > 0 && open[n-1] >= 0 {
			open[n-1]++
			if open[n-1] > limits.MaxArrayLen {
				return fmt.Errorf("request body has an array of more than %d elements", limits.MaxArrayLen)
			}
		}
		if delim && (d == '{' || d == '[') {
			if len(open) == limits.MaxDepth {
				return fmt.Errorf("request body nests deeper than %d", limits.MaxDepth)
			}
			if d == '{' {
				open = append(open, -1)
			} else {
				open = append(open, 0)
			}
		}
		if len(open) == 0 && dec.More() {
			return errors.New("request body holds more than one JSON value")
		}
	}
	if tokens == 0 {
		return errors.New("request body is empty")
	}
	return nil
}
