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
//   - holds at most MaxInFlight requests, and MaxBytesInFlight bytes of their bodies, at once;
//     the next waits up to QueueWait for a place, then is refused with 429 Too Many Requests;
//   - reads at most MaxBytes of the body (413 Request Entity Too Large past that, unread), and
//     for at most ReadTimeout (408 Request Timeout past that): a peer that declares a large body
//     and sends it slowly gives its place and its bytes back then;
//   - follows the JSON as it arrives, without building it, and refuses (400) a body that holds
//     more than MaxTokens tokens, an array of more than MaxArrayLen elements, or nests deeper
//     than MaxDepth as soon as the part read shows it, and one that is not JSON once read.
//
// With RequireClientCert (the manager's --webhook-client-ca-file), a request to any path but the
// hooks' that came without a client certificate the server's client CAs verified is refused
// before all of that (ClientCA).
//
// What the API server sends for a real object is far inside these limits: the API server stores
// objects of at most 1.5 MiB, a review carries at most two of them, and the provider's kinds are
// a few hundred tokens each with their managed fields.
package webhookguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"golang.org/x/sync/semaphore"
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
	// MaxBytesInFlight is how many bytes of bodies are held at once (for every path together): a
	// request reserves its declared length (or its path's MaxBytes when it declares none) before
	// a byte of it is read. It is at least every path's MaxBytes.
	MaxBytesInFlight int64
	// QueueWait is how long a request waits for a place before it is refused.
	QueueWait time.Duration
	// ReadTimeout is how long a request's body may take to arrive once it has its place (0: no
	// bound).
	ReadTimeout time.Duration
	// Limits apply to every path not in Paths.
	Limits Limits
	// Paths give some paths limits of their own.
	Paths map[string]Limits
	// RequireClientCert refuses, before anything else, a request to any path not under one of
	// WithoutClientCert that came without a client certificate verified against the server's
	// client CAs (ClientCA): such a peer never holds a place or a byte of the budget.
	RequireClientCert bool
	WithoutClientCert []string
}

// DefaultOptions are the manager's: admission reviews of the provider's kinds and of Secrets
// (4 MiB, 20,000 tokens: a Secret of the API server's largest, old and new), Cluster API's
// runtime hooks (which carry a machine's objects, current and desired: 8 MiB, 50,000 tokens),
// 8 requests and 8 MiB of bodies at once, each body read within 10 s (the API server sends a
// review at once; its own call to a webhook times out after 10 s by default, 30 at most).
// Serving a review allocates about 23 times its size
// (controller-runtime's admission handler, TestTheLargestValidReviewCosts), so what the port can
// make the manager allocate at once stays under 28 times 8 MiB, whoever posts.
func DefaultOptions(hookPathPrefix string) Options {
	return Options{
		MaxInFlight:      8,
		MaxBytesInFlight: 8 << 20,
		QueueWait:        5 * time.Second,
		ReadTimeout:      10 * time.Second,
		Limits:           Limits{MaxBytes: 4 << 20, MaxTokens: 20_000, MaxDepth: 48, MaxArrayLen: 256},
		Paths:            map[string]Limits{hookPathPrefix: {MaxBytes: 8 << 20, MaxTokens: 50_000, MaxDepth: 48, MaxArrayLen: 256}},
	}
}

// Server is a webhook.Server whose every registered handler is guarded.
type Server struct {
	webhook.Server
	options Options
	places  chan struct{}
	bytes   *semaphore.Weighted
}

var _ webhook.Server = &Server{}

// Wrap guards every handler registered on inner from now on (through the returned Server).
func Wrap(inner webhook.Server, options Options) *Server {
	if options.MaxInFlight < 1 {
		options.MaxInFlight = 1
	}
	options.MaxBytesInFlight = max(options.MaxBytesInFlight, options.Limits.MaxBytes)
	for _, l := range options.Paths {
		options.MaxBytesInFlight = max(options.MaxBytesInFlight, l.MaxBytes)
	}
	return &Server{Server: inner, options: options, places: make(chan struct{}, options.MaxInFlight), bytes: semaphore.NewWeighted(options.MaxBytesInFlight)}
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
	needsCert := s.needsClientCert(path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if needsCert && !clientVerified(r) {
			http.Error(w, "this path serves only a client with a certificate signed by the webhook client CA (--webhook-client-ca-file)", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "webhooks take POST only", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > limits.MaxBytes {
			http.Error(w, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, limits.MaxBytes), http.StatusRequestEntityTooLarge)
			return
		}
		// A body of unknown length may be as long as the limit.
		size := limits.MaxBytes
		if r.ContentLength >= 0 {
			size = r.ContentLength
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.options.QueueWait)
		defer cancel()
		if !s.admit(ctx, size) {
			if r.Context().Err() != nil {
				return
			}
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("the manager is serving as many requests as it takes at once (%d, or %d bytes); try again", s.options.MaxInFlight, s.options.MaxBytesInFlight), http.StatusTooManyRequests)
			return
		}
		defer s.release(size)
		if s.options.ReadTimeout > 0 {
			// A writer that cannot take a deadline (a test's recorder) reads without one.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.options.ReadTimeout))
		}
		body, status, err := readShaped(http.MaxBytesReader(w, r.Body, limits.MaxBytes), size, limits)
		if err != nil {
			var timeout interface{ Timeout() bool }
			if errors.As(err, &timeout) && timeout.Timeout() {
				status, err = http.StatusRequestTimeout, fmt.Errorf("the request body did not arrive within %s", s.options.ReadTimeout)
			}
			http.Error(w, err.Error(), status)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		handler.ServeHTTP(w, r)
	})
}

// admit takes a place and size bytes of the budget, waiting until ctx is done; it tells whether
// it did.
func (s *Server) admit(ctx context.Context, size int64) bool {
	select {
	case s.places <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if err := s.bytes.Acquire(ctx, size); err != nil {
		<-s.places
		return false
	}
	return true
}

func (s *Server) release(size int64) {
	s.bytes.Release(size)
	<-s.places
}

// readChunk is how much of a body is read at a time; the shape of what is read is checked before
// the next read, so a body of the wrong shape is refused after at most this much more.
const readChunk = 32 << 10

// readShaped reads a body of about size bytes (two allocations when size is its length), checking
// its shape as it arrives, and returns it, or the HTTP status and error to refuse it with.
func readShaped(body io.Reader, size int64, limits Limits) ([]byte, int, error) {
	// The first chunk is checked before room for the rest is made: a body whose first bytes show
	// the wrong shape costs no more.
	buf := make([]byte, 0, min(size, readChunk))
	sc := newScanner(limits)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(readChunk, int(size)-len(buf)))
		}
		n, err := body.Read(buf[len(buf):min(cap(buf), len(buf)+readChunk)])
		if n > 0 {
			if err := sc.scan(buf[len(buf) : len(buf)+n]); err != nil {
				return nil, http.StatusBadRequest, err
			}
			buf = buf[:len(buf)+n]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is over the limit of %d bytes", limits.MaxBytes)
		}
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
		}
	}
	if err := sc.end(); err != nil {
		return nil, http.StatusBadRequest, err
	}
	// The scanner follows the text's structure only; the rest of JSON's grammar is checked here,
	// without building anything either.
	if !json.Valid(buf) {
		return nil, http.StatusBadRequest, errors.New("request body is not JSON")
	}
	return buf, 0, nil
}

// CheckShape checks body as the guard does: it fails when body is not one JSON value or is larger,
// in tokens, depth or the length of an array, than limits allow.
func CheckShape(body []byte, limits Limits) error {
	sc := newScanner(limits)
	if err := sc.scan(body); err != nil {
		return err
	}
	if err := sc.end(); err != nil {
		return err
	}
	if !json.Valid(body) {
		return errors.New("request body is not JSON")
	}
	return nil
}

// scanner follows a JSON text as it arrives, byte by byte, and counts what Limits bound without
// building any value: tokens (each brace and bracket, each key, each value), the depth of
// nesting, and the elements of each open array.
type scanner struct {
	limits Limits
	tokens int
	// One entry per open object (-1) or array (the elements seen so far).
	open []int
	// inString and escaped: within a string, and just after its backslash; inScalar: within a
	// number, true, false or null.
	inString, escaped, inScalar bool
	// values is how many values began at the top level.
	values int
}

func newScanner(limits Limits) *scanner {
	return &scanner{limits: limits, open: make([]int, 0, 16)}
}

// begin counts the start of a token; value tells whether the token begins a value (rather than
// being an object's key or a closing brace or bracket).
func (s *scanner) begin(value bool) error {
	s.tokens++
	if s.tokens > s.limits.MaxTokens {
		return fmt.Errorf("request body holds more than %d JSON tokens", s.limits.MaxTokens)
	}
	if !value {
		return nil
	}
	n := len(s.open)
	if n == 0 {
		s.values++
		if s.values > 1 {
			return errors.New("request body holds more than one JSON value")
		}
		return nil
	}
	if s.open[n-1] >= 0 {
		s.open[n-1]++
		if s.open[n-1] > s.limits.MaxArrayLen {
			return fmt.Errorf("request body has an array of more than %d elements", s.limits.MaxArrayLen)
		}
	}
	return nil
}

// inObject tells whether the innermost open container is an object: what begins there (a key or
// a member's value) is a token but not an array's element.
func (s *scanner) inObject() bool {
	n := len(s.open)
	return n > 0 && s.open[n-1] < 0
}

func (s *scanner) scan(p []byte) error {
	for _, c := range p {
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r', ':', ',':
			s.inScalar = false
		case '"':
			s.inScalar = false
			s.inString = true
			if err := s.begin(!s.inObject()); err != nil {
				return err
			}
		case '{', '[':
			s.inScalar = false
			if err := s.begin(true); err != nil {
				return err
			}
			if len(s.open) == s.limits.MaxDepth {
				return fmt.Errorf("request body nests deeper than %d", s.limits.MaxDepth)
			}
			if c == '{' {
				s.open = append(s.open, -1)
			} else {
				s.open = append(s.open, 0)
			}
		case '}', ']':
			s.inScalar = false
			if len(s.open) == 0 {
				return errors.New("request body is not JSON: it closes what it did not open")
			}
			s.open = s.open[:len(s.open)-1]
			if err := s.begin(false); err != nil {
				return err
			}
		default:
			if !s.inScalar {
				s.inScalar = true
				if err := s.begin(!s.inObject()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// end checks the text is complete.
func (s *scanner) end() error {
	if s.tokens == 0 {
		return errors.New("request body is empty")
	}
	if s.inString || len(s.open) > 0 {
		return errors.New("request body is not JSON: it ends inside a value")
	}
	return nil
}
