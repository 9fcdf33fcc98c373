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
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Defaults of a connection's requestGuard.
const (
	// DefaultRequestTimeout bounds one request to Harvester (not a watch). The provider's
	// requests are small (one object, or a label-selected list of one namespace).
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxInFlight is how many requests one connection has out at a time: the reconcilers'
	// workers are shared by every Harvester, and one that stops answering must not hold them all.
	DefaultMaxInFlight = 4
	// A request waits for one of those as long as a request may take (the request timeout):
	// a Harvester that answers frees them as fast as it answers, which behind a Rancher proxy or
	// a long link is hundreds of milliseconds a request, so a queue of them is no outage (a
	// silent Harvester is told by its unanswered requests, see silence). A request that waited
	// its whole time fails with a BusyError, which no condition reports.
	// firstProbeDelay and maxProbeDelay bound the wait between probes of a silent Harvester: it
	// doubles after each unanswered probe, so that a black-holed Harvester holds a worker for a
	// request's timeout once per wait, not at every reconcile of each of its clusters.
	firstProbeDelay = 5 * time.Second
	maxProbeDelay   = 2 * time.Minute
	// MaxAnswerBytes bounds one answer of Harvester's (not a watch): the provider's lists are
	// label-selected and paged, and a server that streams without end (a tenant's identity
	// kubeconfig can name any server) must not grow the manager's heap past its limit.
	MaxAnswerBytes = 64 << 20
	// MaxWatchEventBytes bounds one event of a watch (one JSON object, up to its newline).
	MaxWatchEventBytes = 16 << 20
)

// TooLargeError is an answer cut off at its bound.
type TooLargeError struct {
	Host  string
	Limit int64
}

// tooLargeText is in every TooLargeError's message.
const tooLargeText = "sent an answer larger than"

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("Harvester at %s %s %d MiB; the provider reads no more of it", e.Host, tooLargeText, e.Limit>>20)
}

// requestGuard sits in a connection's HTTP transport and keeps a Harvester that does not answer
// from tying up the provider: each request (watches aside, which are long by design and are
// told apart by their query) gets a deadline, at most maxInFlight are out at once, and once a
// request went unanswered the connection sends one request at a time, a probe, while the
// others fail at once (a timeout error, so conditions say Harvester does not answer) until
// Harvester answers again. Any answer, an HTTP error status included, is an answer.
type requestGuard struct {
	next    http.RoundTripper
	host    string
	timeout time.Duration
	slots   chan struct{}
	*silence
}

// silence is what a guard remembers of its Harvester's answers. The client factory keeps it per
// identity and server beyond the transports that use it (see ClientFactory.silenceOf).
type silence struct {
	mu          sync.Mutex
	silentSince time.Time // zero while Harvester answers
	probing     bool
	// nextProbe is when a silent Harvester may be probed again; probeDelay the wait after it.
	nextProbe  time.Time
	probeDelay time.Duration
	now        func() time.Time
}

func newSilence() *silence { return &silence{now: time.Now} }

func newRequestGuard(next http.RoundTripper, host string, timeout time.Duration, maxInFlight int, s *silence) *requestGuard {
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	if s == nil {
		s = newSilence()
	}
	return &requestGuard{next: next, host: host, timeout: timeout, slots: make(chan struct{}, maxInFlight), silence: s}
}

// BusyError fails a request that found no free slot in its time: the connection's requests are
// queueing behind a slow Harvester (not a silent one, which silentError reports).
type BusyError struct{ msg string }

func (e *BusyError) Error() string { return e.msg }

// silentError fails a request without sending it.
type silentError struct{ msg string }

func (e *silentError) Error() string { return e.msg }

// Timeout makes the error read as Harvester not answering in time (see ReachError).
func (e *silentError) Timeout() bool { return true }

// Temporary is what net.Error asks as well.
func (e *silentError) Temporary() bool { return true }

func (g *requestGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1" {
		resp, err := g.next.RoundTrip(req)
		g.observe(req, err, false)
		if err == nil {
			resp.Body = &eventLimitedBody{ReadCloser: resp.Body, limit: MaxWatchEventBytes, host: g.host}
		}
		return resp, err
	}
	probe, err := g.admit()
	if err != nil {
		return nil, err
	}
	select {
	case g.slots <- struct{}{}:
	case <-req.Context().Done():
		g.endProbe(probe)
		return nil, req.Context().Err()
	case <-time.After(g.timeout):
		g.endProbe(probe)
		return nil, &BusyError{msg: fmt.Sprintf("Harvester at %s still had %d requests of the provider outstanding after %s", g.host, cap(g.slots), g.timeout)}
	}
	if !probe {
		// Harvester may have gone silent while this request waited for its slot.
		if probe, err = g.admit(); err != nil {
			<-g.slots
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(req.Context(), g.timeout)
	resp, err := g.next.RoundTrip(req.WithContext(ctx))
	g.observe(req, err, probe)
	if err != nil {
		cancel()
		<-g.slots
		return nil, err
	}
	// The slot and the deadline hold until the answer is read; it is read up to its bound.
	resp.Body = &releasingBody{
		ReadCloser: &limitedBody{ReadCloser: resp.Body, left: MaxAnswerBytes, limit: MaxAnswerBytes, host: g.host},
		release:    func() { cancel(); <-g.slots },
	}
	return resp, nil
}

// admit fails a request at once while Harvester is silent and a probe is out or not yet due;
// otherwise it lets it through, as the probe when Harvester is silent.
func (g *requestGuard) admit() (probe bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.silentSince.IsZero() {
		return false, nil
	}
	if g.probing || g.now().Before(g.nextProbe) {
		return false, &silentError{msg: fmt.Sprintf("Harvester at %s has not answered for %s; the provider sends it one request at a time, less often the longer it is silent, until it does",
			g.host, g.now().Sub(g.silentSince).Round(time.Second))}
	}
	g.probing = true
	return true, nil
}

func (g *requestGuard) endProbe(probe bool) {
	if !probe {
		return
	}
	g.mu.Lock()
	g.probing = false
	g.mu.Unlock()
}

// observe records whether Harvester answered. A request its caller cancelled tells nothing.
func (g *requestGuard) observe(req *http.Request, err error, probe bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if probe {
		g.probing = false
	}
	switch {
	case err == nil:
		g.silentSince, g.nextProbe, g.probeDelay = time.Time{}, time.Time{}, 0
	case req.Context().Err() != nil:
	case g.silentSince.IsZero():
		g.silentSince = g.now()
		g.probeDelay = firstProbeDelay
		g.nextProbe = g.silentSince.Add(g.probeDelay)
	case probe:
		g.probeDelay = min(2*g.probeDelay, maxProbeDelay)
		g.nextProbe = g.now().Add(g.probeDelay)
	}
}

// Silent tells whether the connection's Harvester has stopped answering (for tests and logs).
func (g *silence) Silent() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.silentSince.IsZero()
}

type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// limitedBody fails a read once more than limit bytes came.
type limitedBody struct {
	io.ReadCloser
	left, limit int64
	host        string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, &TooLargeError{Host: b.host, Limit: b.limit}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// eventLimitedBody fails a watch's read once more than limit bytes came without a newline: the
// API server ends every JSON watch event with one.
type eventLimitedBody struct {
	io.ReadCloser
	limit int64
	run   int64
	host  string
}

func (b *eventLimitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			b.run = 0
			continue
		}
		b.run++
		if b.run > b.limit {
			return 0, &TooLargeError{Host: b.host, Limit: b.limit}
		}
	}
	return n, err
}
