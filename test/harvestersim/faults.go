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

package harvestersim

import (
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Faults are the simulator's knobs for things going wrong. API faults act in the fault proxy,
// between clients that use a kubeconfig of this simulator (ProviderKubeconfig, Kubeconfig) and
// the apiserver; the admin client in Env.Client goes around them.
type Faults struct {
	mu       sync.Mutex
	rules    []*apiFault
	rand     *rand.Rand
	noIP     map[string]bool // VM namespace/name, or "*"
	requests map[string]int  // resource, and "verb resource", -> requests seen, for tests
	// byAgent counts the requests seen by User-Agent, then by "verb resource".
	byAgent map[string]map[string]int
	// tokenLifetime, when set, is the lifetime the TokenRequest API reports granting.
	tokenLifetime time.Duration
}

type apiFault struct {
	resource  string // plural resource, e.g. "virtualmachines"; "*" for all
	verb      string // get, list, watch, create, update, patch, delete; "*" for all
	code      int    // HTTP status to answer with; 0 for none (latency only)
	remaining int    // requests left to fail; <0 for no limit
	rate      float64
	latency   time.Duration
}

func newFaults() *Faults {
	return &Faults{rand: rand.New(rand.NewSource(1)), noIP: map[string]bool{}, requests: map[string]int{}, byAgent: map[string]map[string]int{}}
}

// FailRequests answers the next count requests for resource and verb ("*" for any) with the HTTP
// status code; count < 0 fails them until Clear.
func (f *Faults) FailRequests(resource, verb string, code, count int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &apiFault{resource: resource, verb: verb, code: code, remaining: count, rate: 1})
}

// ErrorRate fails the given fraction of requests for resource (any verb) with the HTTP status
// code. The draw is seeded, so a run is repeatable.
func (f *Faults) ErrorRate(resource string, rate float64, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &apiFault{resource: resource, verb: "*", code: code, remaining: -1, rate: rate})
}

// Latency delays every request for resource (any verb) by d.
func (f *Faults) Latency(resource string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &apiFault{resource: resource, verb: "*", remaining: -1, rate: 1, latency: d})
}

// NeverAssignIP keeps the guest agent of a VM's VMI silent, so it never reports addresses
// (as with an image without qemu-guest-agent). "*" for all VMs; namespace is then ignored.
func (f *Faults) NeverAssignIP(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "*" {
		f.noIP["*"] = true
		return
	}
	f.noIP[namespace+"/"+name] = true
}

// GrantTokenLifetime makes the TokenRequest API report that it granted tokens for d only (an
// apiserver may grant less than asked: --service-account-max-token-expiration, or a shorter
// bound in Harvester's configuration), below the API's own minimum of 10 minutes, so that tests
// see renewals follow the granted lifetime without waiting for it. The tokens themselves stay
// valid as long as asked. Zero turns it off.
func (f *Faults) GrantTokenLifetime(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokenLifetime = d
}

func (f *Faults) grantedTokenLifetime() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenLifetime
}

// Clear removes every fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
	f.noIP = map[string]bool{}
	f.tokenLifetime = 0
}

// Requests returns how many requests for a resource passed through the proxy.
func (f *Faults) Requests(resource string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[resource]
}

// RequestsByUserAgent returns how many requests clients whose User-Agent starts with prefix sent
// through the proxy, by "verb resource" (resource as requestAttributes names it). The simulator's
// own controllers use the admin client, which goes around the proxy, so their traffic never
// counts here.
func (f *Faults) RequestsByUserAgent(prefix string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for agent, counts := range f.byAgent {
		if !strings.HasPrefix(agent, prefix) {
			continue
		}
		for k, n := range counts {
			out[k] += n
		}
	}
	return out
}

func (f *Faults) countAgent(agent, resource, verb string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := f.byAgent[agent]
	if counts == nil {
		counts = map[string]int{}
		f.byAgent[agent] = counts
	}
	counts[verb+" "+resource]++
}

// RequestsOf returns how many requests of one verb (list, watch, get, ...) for a resource
// passed through the proxy.
func (f *Faults) RequestsOf(resource, verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[verb+" "+resource]
}

func (f *Faults) ipWithheld(namespace, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.noIP["*"] || f.noIP[namespace+"/"+name]
}

// decide returns the latency and the error status (0 for none) for a request.
func (f *Faults) decide(resource, verb string) (time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[resource]++
	f.requests[verb+" "+resource]++
	var latency time.Duration
	for _, r := range f.rules {
		if (r.resource != "*" && r.resource != resource) || (r.verb != "*" && r.verb != verb) {
			continue
		}
		latency += r.latency
		if r.code == 0 || r.remaining == 0 || f.rand.Float64() >= r.rate {
			continue
		}
		if r.remaining > 0 {
			r.remaining--
		}
		return latency, r.code
	}
	return latency, 0
}

// requestAttributes extracts the resource and verb of a Kubernetes API request path, e.g.
// GET /apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=true -> virtualmachines, watch.
func requestAttributes(r *http.Request) (resource, verb string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:] // api/v1/...
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:] // apis/group/version/...
	default:
		return "", strings.ToLower(r.Method)
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 { // a namespace itself
			parts = []string{"namespaces", parts[1]}
		} else {
			parts = parts[2:]
		}
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(r.Method)
	}
	return resource, verb
}
