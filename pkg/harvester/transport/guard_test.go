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
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// silentServer answers while answering is true and otherwise holds each request until the
// client gives up; it counts the requests that reached it.
type silentServer struct {
	answering atomic.Bool
	reached   atomic.Int32
	inFlight  atomic.Int32
	maxFlight atomic.Int32
	arrivals  chan struct{}
}

func (s *silentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.reached.Add(1)
	select {
	case s.arrivals <- struct{}{}:
	default:
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxFlight.Load()
		if n <= m || s.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if s.answering.Load() {
		w.WriteHeader(http.StatusOK)
		return
	}
	<-r.Context().Done()
}

func TestRequestGuard(t *testing.T) {
	srv := &silentServer{arrivals: make(chan struct{}, 64)}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	const timeout, maxInFlight = 300 * time.Millisecond, 2
	clock := &testClock{t: time.Now()}
	silent := newSilence()
	silent.now = clock.now
	c := &http.Client{Transport: newRequestGuard(http.DefaultTransport, ts.URL, timeout, maxInFlight, silent)}
	get := func(query string) error {
		resp, err := c.Get(ts.URL + "/api/v1/namespaces/a/pods" + query)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	guard := c.Transport.(*requestGuard)

	srv.answering.Store(true)
	if err := get(""); err != nil {
		t.Fatalf("an answering Harvester: %v", err)
	}

	// Silent: concurrent requests; at most maxInFlight reach it, each ends by the deadline, none
	// waits much longer than twice the deadline (its wait for a slot, then its own try).
	srv.answering.Store(false)
	var wg sync.WaitGroup
	start := time.Now()
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := get(""); err == nil {
				t.Error("a silent Harvester's request succeeded")
			}
		}()
	}
	wg.Wait()
	if took := time.Since(start); took > 2*timeout+time.Second {
		t.Errorf("requests to a silent Harvester took %s", took)
	}
	if m := srv.maxFlight.Load(); m > maxInFlight {
		t.Errorf("%d requests out at once, want at most %d", m, maxInFlight)
	}
	if !guard.Silent() {
		t.Fatal("the guard did not notice the silence")
	}

	// While silent, before the first probe is due: every request fails at once, without
	// reaching it.
	reached := srv.reached.Load()
	for range 5 {
		if err := get(""); err == nil {
			t.Error("a request to a silent Harvester before its probe is due succeeded")
		}
	}
	if got := srv.reached.Load() - reached; got != 0 {
		t.Errorf("%d requests reached the silent Harvester before a probe was due", got)
	}

	// Once due: one probe at a time; the others fail at once, as timeouts, without reaching it.
	clock.advance(firstProbeDelay)
	for len(srv.arrivals) > 0 {
		<-srv.arrivals
	}
	probeDone := make(chan error)
	go func() { probeDone <- get("") }()
	<-srv.arrivals // the probe is out
	failStart := time.Now()
	err := get("")
	var timeoutErr interface{ Timeout() bool }
	if err == nil || !errors.As(err, &timeoutErr) || !timeoutErr.Timeout() {
		t.Errorf("a request beside the probe: %v, want a timeout error", err)
	}
	if took := time.Since(failStart); took > 100*time.Millisecond {
		t.Errorf("a request beside the probe took %s, want an immediate failure", took)
	}
	if err := <-probeDone; err == nil {
		t.Error("the probe to a silent Harvester succeeded")
	}
	if got := srv.reached.Load() - reached; got != 1 {
		t.Errorf("%d requests reached the silent Harvester, want the probe only", got)
	}

	// An unanswered probe doubles the wait for the next one.
	clock.advance(firstProbeDelay)
	reached = srv.reached.Load()
	if err := get(""); err == nil {
		t.Error("a request before the doubled wait succeeded")
	}
	if got := srv.reached.Load() - reached; got != 0 {
		t.Errorf("%d requests reached the silent Harvester before the doubled wait ended", got)
	}
	clock.advance(firstProbeDelay)
	if err := get(""); err == nil {
		t.Error("the second probe to a silent Harvester succeeded")
	}
	if got := srv.reached.Load() - reached; got != 1 {
		t.Errorf("%d requests reached the silent Harvester after the doubled wait, want the probe", got)
	}

	// Watches pass untouched (no deadline of the guard); one that connects shows Harvester
	// answers again, and requests flow.
	srv.answering.Store(true)
	if err := get("?watch=true"); err != nil {
		t.Fatalf("a watch: %v", err)
	}
	if guard.Silent() {
		t.Error("still silent after Harvester answered")
	}
	if err := get(""); err != nil {
		t.Errorf("after Harvester answered again: %v", err)
	}
}

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A server that answers without end (a tenant's identity kubeconfig can name any server) is read
// up to a bound, for plain answers and for each watch event, and the error says so.
func TestAnswersAreReadUpToTheirBound(t *testing.T) {
	var written atomic.Int64
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for written.Load() < 1<<30 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer ts.Close()
	c := &http.Client{Transport: newRequestGuard(http.DefaultTransport, ts.URL, 30*time.Second, 2, nil)}
	for _, tc := range []struct {
		query string
		limit int64
	}{{"", MaxAnswerBytes}, {"?watch=true", MaxWatchEventBytes}} {
		written.Store(0)
		resp, err := c.Get(ts.URL + "/apis" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		read, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		var tooLarge *TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Limit != tc.limit {
			t.Errorf("%q: read %d bytes, error %v; want a TooLargeError at %d", tc.query, read, err, tc.limit)
		}
		if read > tc.limit {
			t.Errorf("%q: read %d bytes, more than the bound %d", tc.query, read, tc.limit)
		}
		if msg := ReachError(err); !strings.Contains(msg, "larger than") {
			t.Errorf("%q: the condition would say %q", tc.query, msg)
		}
		// Flattened into text by a caller (discovery does that), the bound is still named.
		if msg := ReachError(errors.New("discovery: " + err.Error())); !strings.Contains(msg, "sent an answer larger than the provider reads") {
			t.Errorf("%q: flattened, the condition would say %q", tc.query, msg)
		}
	}
	// Watch events that end with a newline pass, however many.
	events := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := append(bytes.Repeat([]byte("y"), 1<<20), '\n')
		for range 40 {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer events.Close()
	resp, err := c.Get(events.URL + "/apis?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != 40*(1<<20+1) {
		t.Errorf("40 events of 1 MiB: read %d bytes, error %v", n, err)
	}
}

// A slow Harvester (behind a Rancher proxy, 300 ms a request) with more requests queued than
// slots is busy, not silent: every request waits its turn and succeeds, the guard does not take
// the queue for an outage. With a 2 s wait for a slot, the later ones failed as timeouts, which
// conditions reported as HarvesterUnreachable.
func TestRequestGuardQueuesBehindASlowHarvester(t *testing.T) {
	const latency, maxInFlight, requests = 300 * time.Millisecond, 2, 16
	// The server's latency, not a wait of the test's: each answer comes latency after its
	// request (or never, if the client gives up).
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(latency):
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	guard := newRequestGuard(http.DefaultTransport, ts.URL, 5*time.Second, maxInFlight, nil)
	c := &http.Client{Transport: guard}
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(ts.URL + "/api/v1/namespaces/a/pods")
			if err == nil {
				err = resp.Body.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a queued request failed: %v", err)
		}
	}
	if guard.Silent() {
		t.Error("the guard took a queue for silence")
	}
}

// A request that found no slot in its whole time is busy: ClassifyError makes it KindBusy,
// which no condition reports, never KindUnreachable.
func TestBusyIsNotUnreachable(t *testing.T) {
	err := ClassifyError(&BusyError{msg: "queued"}, "reading a VM")
	e, ok := AsError(err)
	if !ok || e.Kind != KindBusy {
		t.Fatalf("got %#v", err)
	}
}
