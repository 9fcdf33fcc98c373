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

package webhookguard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

const defaultPath = "/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestercluster"

// recorder is a webhook.Server that keeps what is registered, so that a test calls the guarded
// handler as the server's mux would.
type recorder struct {
	webhook.Server
	handlers map[string]http.Handler
}

func (r *recorder) Register(path string, h http.Handler) { r.handlers[path] = h }

// defaulting returns the provider's HarvesterCluster defaulting webhook behind a guard.
func defaulting(t *testing.T, options Options) http.Handler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{handlers: map[string]http.Handler{}}
	Wrap(rec, options).Register(defaultPath, admission.WithDefaulter[*infrav1.HarvesterCluster](scheme, &infrav1.HarvesterClusterWebhook{}))
	return rec.handlers[defaultPath]
}

// empties is a JSON array of n empty objects: the attack's shape (many tiny values that decode
// into large structs).
func empties(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("{},", n), ",") + "]"
}

// review is a CREATE review of a HarvesterCluster whose status holds conditions empty objects.
func review(t *testing.T, conditions int) []byte {
	t.Helper()
	status := ""
	if conditions > 0 {
		status = `"conditions":` + empties(conditions)
	}
	return reviewOf(t, "", status)
}

// reviewOf is a CREATE review of a HarvesterCluster with more metadata fields and a status.
func reviewOf(t *testing.T, metadata, status string) []byte {
	t.Helper()
	if metadata != "" {
		metadata = "," + metadata
	}
	object := `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"HarvesterCluster",` +
		`"metadata":{"name":"c","namespace":"n"` + metadata + `},` +
		`"spec":{"server":"https://harvester.example:6443","identitySecret":{"name":"s","namespace":"n"},"targetNamespace":"n"},` +
		`"status":{` + status + `}}`
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("1"), Operation: admissionv1.Create, Namespace: "n", Name: "c",
			Kind:     metav1.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "HarvesterCluster"},
			Resource: metav1.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "harvesterclusters"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The object goes in raw: json.Marshal of a RawExtension would re-encode it.
	return bytes.Replace(body, []byte(`"request":{`), []byte(`"request":{"object":`+object+`,`), 1)
}

// serve posts body to h and returns the response and how many bytes the heap allocated meanwhile.
func serve(h http.Handler, body []byte) (*httptest.ResponseRecorder, uint64) {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, defaultPath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
	goruntime.ReadMemStats(&after)
	return w, after.TotalAlloc - before.TotalAlloc
}

func TestARealReviewPasses(t *testing.T) {
	w, _ := serve(defaulting(t, DefaultOptions("/hooks")), review(t, 0))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Response == nil || !answer.Response.Allowed || len(answer.Response.Patch) == 0 {
		t.Fatalf("want an allowed review with the defaults' patch, got %s", w.Body)
	}
}

// A body of 7 MiB of empty objects (the largest controller-runtime reads) cost the defaulting
// webhook gigabytes; behind the guard it is refused after a scan that builds nothing.
func TestManyTinyValuesAreRefusedBeforeDecoding(t *testing.T) {
	h := defaulting(t, DefaultOptions("/hooks"))
	body := review(t, (4<<20)/3-1000) // just under the 4 MiB limit
	w, allocated := serve(h, body)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "more than 256 elements") {
		t.Fatalf("want 400 for a long array, got %d: %s", w.Code, w.Body)
	}
	t.Logf("%d-byte attack refused, %d MiB allocated", len(body), allocated>>20)
	if allocated > 1<<20 {
		t.Errorf("refusing a %d-byte body allocated %d KiB; want under 1 MiB", len(body), allocated>>10)
	}

	// Many arrays, none too long, are refused for their tokens.
	body = reviewOf(t, `"finalizers":["a","b"]`, `"conditions":`+empties(200)+`,"failureDomains":[`+strings.Repeat(`{"name":"a","attributes":{"a":"b"}},`, 255)+`{}]`)
	w, _ = serve(h, body)
	if w.Code != http.StatusOK {
		t.Fatalf("arrays at the limit: want 200, got %d: %s", w.Code, w.Body)
	}

	// The most the guard lets through: every array of objects the kind has, at the limit.
	body = reviewOf(t, `"managedFields":`+empties(256)+`,"ownerReferences":`+empties(256),
		`"conditions":`+empties(256)+`,"failureDomains":`+empties(256))
	w, allocated = serve(h, body)
	t.Logf("%d-byte review with four arrays of 256 empty objects: status %d, %d MiB allocated", len(body), w.Code, allocated>>20)
	if w.Code != http.StatusOK {
		t.Fatalf("want 200 (the webhook's own answer), got %d: %s", w.Code, w.Body)
	}
	if allocated > 32<<20 {
		t.Errorf("a review the guard lets through allocated %d MiB; want at most 32", allocated>>20)
	}

	// For the record (docs/security.md): what the same shape costs unguarded, at a size a test
	// can afford.
	unguarded := defaulting(t, Options{MaxInFlight: 1, QueueWait: time.Second, Limits: Limits{MaxBytes: 8 << 20, MaxTokens: 1 << 30, MaxDepth: 1 << 10, MaxArrayLen: 1 << 30}})
	body = review(t, 30_000)
	_, allocated = serve(unguarded, body)
	t.Logf("unguarded: a %d-byte review of 30,000 empty conditions allocated %d MiB", len(body), allocated>>20)
}

func TestTheGuardRefusesWhatCannotBeAReview(t *testing.T) {
	h := defaulting(t, DefaultOptions("/hooks"))
	for _, c := range []struct {
		name   string
		req    *http.Request
		status int
	}{
		{"GET", httptest.NewRequest(http.MethodGet, defaultPath, nil), http.StatusMethodNotAllowed},
		{"declared too large", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, defaultPath, strings.NewReader("{}"))
			r.ContentLength = 5 << 20
			return r
		}(), http.StatusRequestEntityTooLarge},
		{"streamed too large", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, defaultPath, strings.NewReader(`"`+strings.Repeat("a", 5<<20)+`"`))
			r.ContentLength = -1
			return r
		}(), http.StatusRequestEntityTooLarge},
		{"deep", httptest.NewRequest(http.MethodPost, defaultPath, strings.NewReader(strings.Repeat("[", 100)+strings.Repeat("]", 100))), http.StatusBadRequest},
		{"not JSON", httptest.NewRequest(http.MethodPost, defaultPath, strings.NewReader("{nope")), http.StatusBadRequest},
		{"two values", httptest.NewRequest(http.MethodPost, defaultPath, strings.NewReader("{} {}")), http.StatusBadRequest},
		{"empty", httptest.NewRequest(http.MethodPost, defaultPath, strings.NewReader("")), http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, c.req)
			if w.Code != c.status {
				t.Errorf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
		})
	}
}

func TestRequestsBeyondMaxInFlightWaitThenAreRefused(t *testing.T) {
	rec := &recorder{handlers: map[string]http.Handler{}}
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	Wrap(rec, Options{MaxInFlight: 2, QueueWait: 200 * time.Millisecond, Limits: Limits{MaxBytes: 1 << 10, MaxTokens: 10, MaxDepth: 4, MaxArrayLen: 4}}).
		Register("/slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			entered.Done()
			<-release
			w.WriteHeader(http.StatusOK)
		}))
	h := rec.handlers["/slow"]
	var done sync.WaitGroup
	for range 2 {
		done.Add(1)
		go func() {
			defer done.Done()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader("{}")))
		}()
	}
	entered.Wait()

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader("{}")))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("a third request while two are served: status %d (Retry-After %q), want 429", w.Code, w.Header().Get("Retry-After"))
	}

	// One that gives up while waiting holds no place either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader("{}")).WithContext(ctx))

	close(release)
	done.Wait()
	w = httptest.NewRecorder()
	entered.Add(1)
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader("{}")))
	if w.Code != http.StatusOK {
		t.Errorf("once the two are done: status %d, want 200", w.Code)
	}
}

func TestHookPathsHaveTheirOwnLimits(t *testing.T) {
	s := Wrap(&recorder{handlers: map[string]http.Handler{}}, DefaultOptions("/hooks.runtime.cluster.x-k8s.io/"))
	if got := s.limitsFor("/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/can-update-machine"); got.MaxBytes != 8<<20 {
		t.Errorf("a hook path gets %+v, want the hooks' limits", got)
	}
	if got := s.limitsFor(defaultPath); got.MaxBytes != 4<<20 {
		t.Errorf("an admission path gets %+v, want the default limits", got)
	}
}

// countingReader counts what is read from it.
type countingReader struct {
	r    *bytes.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

// A body of the wrong shape is refused once the part read shows it: the rest is never read, so a
// peer cannot make the manager hold megabytes to refuse them.
func TestTheWrongShapeIsRefusedBeforeTheRestIsRead(t *testing.T) {
	h := defaulting(t, DefaultOptions("/hooks"))
	body := review(t, (4<<20)/3-1000)
	in := &countingReader{r: bytes.NewReader(body)}
	r := httptest.NewRequest(http.MethodPost, defaultPath, in)
	r.ContentLength = -1 // nothing reserved up front either but the limit
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if in.read > 2*readChunk {
		t.Errorf("read %d bytes of a %d-byte body to refuse it; want at most %d", in.read, len(body), 2*readChunk)
	}
}

// What looks like structure inside a string is text: it neither opens, closes nor counts.
func TestStringsAreText(t *testing.T) {
	limits := Limits{MaxBytes: 1 << 20, MaxTokens: 8, MaxDepth: 2, MaxArrayLen: 2}
	for _, ok := range []string{
		`{"a":"[[[[{{{{,,,,"}`,
		`{"a\"[[[":"\\"}`,
		`["\u005b\"]]]]","x"]`,
		` [1, 2] `,
		`"just a string"`,
		`-1.5e3`,
	} {
		if err := CheckShape([]byte(ok), limits); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		`[1,2,3]`:                   "more than 2 elements",
		`[["a"],["b"],[]]`:          "more than 2 elements",
		`[[[]]]`:                    "deeper than 2",
		`{"a":"\"}`:                 "ends inside a value",
		`{"a":1}}`:                  "closes what it did not open",
		`1 2`:                       "more than one JSON value",
		`{"a":tru}`:                 "not JSON",
		`{"a":1,"b":2,"c":3,"d":4}`: "more than 8 JSON tokens",
	} {
		if err := CheckShape([]byte(bad), limits); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", bad, err, want)
		}
	}
}

// Bodies held at once are bounded in bytes, whatever their number: a request declaring more than
// what is left waits, then is refused.
func TestBodiesHeldAtOnceAreBoundedInBytes(t *testing.T) {
	rec := &recorder{handlers: map[string]http.Handler{}}
	release := make(chan struct{})
	entered := make(chan struct{})
	Wrap(rec, Options{MaxInFlight: 8, MaxBytesInFlight: 3 << 10, QueueWait: 200 * time.Millisecond, Limits: Limits{MaxBytes: 2 << 10, MaxTokens: 10, MaxDepth: 4, MaxArrayLen: 4}}).
		Register("/slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			entered <- struct{}{}
			<-release
			w.WriteHeader(http.StatusOK)
		}))
	h := rec.handlers["/slow"]
	padded := func(n int) *http.Request {
		return httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader(`"`+strings.Repeat("a", n-2)+`"`))
	}
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, padded(2<<10))
		done <- w.Code
	}()
	<-entered

	w := httptest.NewRecorder()
	h.ServeHTTP(w, padded(1<<10+1))
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("1 KiB + 1 while 2 of 3 KiB are held: status %d, want 429", w.Code)
	}
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, padded(1<<10))
		done <- w.Code
	}()
	<-entered // 1 KiB fits beside the 2 held
	close(release)
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("a request within the budget: status %d", code)
		}
	}
}

// For the record (docs/security.md): what a review of the largest body the guard lets through, one
// long string, costs the defaulting webhook; the budget in bytes is what bounds its multiple.
func TestTheLargestValidReviewCosts(t *testing.T) {
	h := defaulting(t, DefaultOptions("/hooks"))
	body := reviewOf(t, `"annotations":{"a":"`+strings.Repeat("x", (4<<20)-2048)+`"}`, "")
	w, allocated := serve(h, body)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %.200s", w.Code, w.Body)
	}
	times := float64(allocated) / float64(len(body))
	t.Logf("a %d-byte review of one long string: %d MiB allocated (%.1f times its size)", len(body), allocated>>20, times)
	// DefaultOptions' bound on memory, and the e2e test's, assume at most 28.
	if times > 28 {
		t.Errorf("a review costs %.1f times its size; DefaultOptions and the e2e bound assume at most 28", times)
	}
}

// A peer that declares a body and then sends it slowly holds its place and its bytes only until
// ReadTimeout: it gets 408 Request Timeout, and a request that waited for the place is served.
func TestASlowSenderGivesItsPlaceBackAfterTheReadTimeout(t *testing.T) {
	mux := http.NewServeMux()
	rec := &recorder{handlers: map[string]http.Handler{}}
	Wrap(rec, Options{MaxInFlight: 1, QueueWait: 5 * time.Second, ReadTimeout: 300 * time.Millisecond,
		Limits: Limits{MaxBytes: 1 << 20, MaxTokens: 10, MaxDepth: 4, MaxArrayLen: 4}}).
		Register("/hook", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	mux.Handle("/hook", rec.handlers["/hook"])
	server := httptest.NewServer(mux)
	defer server.Close()

	// The slow sender: 1 MiB declared, 10 bytes sent, then nothing.
	conn, err := net.Dial("tcp", server.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"a\":\"xxx", 1<<20); err != nil {
		t.Fatal(err)
	}
	slow := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			slow <- 0
			return
		}
		_ = resp.Body.Close()
		slow <- resp.StatusCode
	}()

	start := time.Now()
	resp, err := http.Post(server.URL+"/hook", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the request that waited for the slow sender's place: status %d, want 200", resp.StatusCode)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("it waited %s: the slow sender kept its place past the read timeout", waited)
	}
	select {
	case code := <-slow:
		if code != http.StatusRequestTimeout {
			t.Errorf("the slow sender: status %d, want 408", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("the slow sender got no answer")
	}
}
