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
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RequestMetrics counts and times the requests a ClientFactory's connections send to Harvester,
// labelled by connection (the identity Secret's `namespace/name`: a name, never a value of the
// Secret), verb, resource and result.
type RequestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewRequestMetrics makes the Harvester request metrics (capi_harvester_requests_total and
// capi_harvester_request_duration_seconds) and registers them with reg.
func NewRequestMetrics(reg prometheus.Registerer) (*RequestMetrics, error) {
	return newRequestMetrics(reg, "capi_harvester_request", "Harvester")
}

// NewManagementRequestMetrics makes the same metrics for the manager's own connection to the
// management cluster (capi_harvester_management_requests_total and
// capi_harvester_management_request_duration_seconds, connection "management"), so an operator
// sees what the provider costs that apiserver, by resource.
func NewManagementRequestMetrics(reg prometheus.Registerer) (*RequestMetrics, error) {
	return newRequestMetrics(reg, "capi_harvester_management_request", "the management cluster")
}

func newRequestMetrics(reg prometheus.Registerer, prefix, target string) (*RequestMetrics, error) {
	m := &RequestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "s_total",
			Help: "Requests sent to " + target + ", by connection (for Harvester: the identity Secret's namespace/name), verb, resource and result (HTTP status code, or \"error\" when no response came).",
		}, []string{"connection", "verb", "resource", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "_duration_seconds",
			Help:    "Time until " + target + " answered a request (for watches: until the stream opened), by connection, verb and resource.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"connection", "verb", "resource"}),
	}
	// Several managers in one process (tests) share the collectors registered first.
	if err := reg.Register(m.requests); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return nil, err
		}
		m.requests = already.ExistingCollector.(*prometheus.CounterVec) //nolint:forcetypeassert // registered here
	}
	if err := reg.Register(m.duration); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return nil, err
		}
		m.duration = already.ExistingCollector.(*prometheus.HistogramVec) //nolint:forcetypeassert // registered here
	}
	return m, nil
}

// WrapTransport returns a rest.Config WrapTransport that records the requests of connection.
func (m *RequestMetrics) WrapTransport(connection string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &countingRoundTripper{next: rt, metrics: m, connection: connection}
	}
}

type countingRoundTripper struct {
	next       http.RoundTripper
	metrics    *RequestMetrics
	connection string
}

func (c *countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := RequestVerbResource(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
	start := time.Now()
	resp, err := c.next.RoundTrip(req)
	result := "error"
	if err == nil {
		result = strconv.Itoa(resp.StatusCode)
	}
	c.metrics.requests.WithLabelValues(c.connection, verb, resource, result).Inc()
	c.metrics.duration.WithLabelValues(c.connection, verb, resource).Observe(time.Since(start).Seconds())
	return resp, err
}

// RequestVerbResource names a Kubernetes API request as the apiserver's audit log does: the verb
// (get, list, watch, create, update, patch, delete, deletecollection) and the resource,
// `group/resource` or, for the core group, `resource`, with a subresource after a slash
// (`serviceaccounts/token`). Requests that name no resource (discovery, /version) are
// `get`/`list` of resource `nonresource`. Names and namespaces are left out, so the labels stay
// few.
func RequestVerbResource(method, path, watch string) (verb, resource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	var group string
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, rest = parts[1], parts[3:]
	}
	// namespaces/<ns>/<resource>/... is a namespaced resource, except for the namespace's own
	// subresources (status, finalize) and the namespace itself.
	if len(rest) >= 3 && rest[0] == "namespaces" && !(len(rest) == 3 && (rest[2] == "status" || rest[2] == "finalize")) {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		resource = "nonresource"
	} else {
		resource = rest[0]
		if len(rest) >= 3 {
			resource += "/" + rest[2]
		}
		if group != "" {
			resource = group + "/" + resource
		}
	}
	named := len(rest) >= 2
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch == "true" || watch == "1":
			verb = "watch"
		case named || resource == "nonresource":
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
		verb = strings.ToLower(method)
	}
	return verb, resource
}
