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

package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// settleQuiet is how long no watched object may change before the steady window starts, and
// settleMax how long the bench waits for that before it starts the window anyway.
const (
	settleQuiet = 3 * time.Second
	settleMax   = 2 * time.Minute
)

// eventTally counts the watch events of some kinds in a cache, by "<cluster> <Kind> <event>
// <writer>", where the writer of an update is the field manager (and subresource) whose
// managedFields entry the update changed: it says who keeps objects moving at steady state,
// and so what wakes the provider's controllers.
type eventTally struct {
	mu     sync.Mutex
	counts map[string]int
}

func newEventTally() *eventTally { return &eventTally{counts: map[string]int{}} }

// add counts the events of obj's kind in c, labelled with cluster ("management", "harvester").
func (t *eventTally) add(ctx context.Context, c cache.Cache, cluster string, obj client.Object) error {
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	count := func(event, writer string) {
		t.mu.Lock()
		t.counts[cluster+" "+kind+" "+event+" "+writer]++
		t.mu.Unlock()
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { count("add", "") },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(client.Object)
			n, ok2 := newObj.(client.Object)
			if !ok1 || !ok2 {
				return
			}
			if o.GetResourceVersion() == n.GetResourceVersion() {
				count("resync", "")
				return
			}
			count("update", writers(o.GetManagedFields(), n.GetManagedFields()))
		},
		DeleteFunc: func(any) { count("delete", "") },
	})
	return err
}

func (t *eventTally) snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts)
}

// writers names the field managers whose entries differ between two versions of an object:
// "manager/subresource", joined by "+"; "?" when none does (a change within the same second by
// a manager that owned the same fields already).
func writers(old, cur []metav1.ManagedFieldsEntry) string {
	key := func(e metav1.ManagedFieldsEntry) string {
		k := e.Manager
		if e.Subresource != "" {
			k += "/" + e.Subresource
		}
		return k
	}
	before := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range old {
		before[key(e)] = e
	}
	var out []string
	for _, e := range cur {
		b, ok := before[key(e)]
		if !ok || !b.Time.Equal(e.Time) || (b.FieldsV1 == nil) != (e.FieldsV1 == nil) ||
			(b.FieldsV1 != nil && string(b.FieldsV1.Raw) != string(e.FieldsV1.Raw)) {
			out = append(out, key(e))
		}
	}
	if len(out) == 0 {
		return "?"
	}
	sort.Strings(out)
	return strings.Join(out, "+")
}

// reconcileResults reads controller-runtime's reconcile counter from gathered metrics, by
// "<controller> <result>" (success, error, requeue, requeue_after).
func reconcileResults(families []*dto.MetricFamily) map[string]int {
	out := map[string]int{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := metricLabels(m)
			if v := int(m.GetCounter().GetValue()); v > 0 {
				out[l["controller"]+" "+l["result"]] += v
			}
		}
	}
	return out
}

// processMetrics are this process's metrics (the bed's controllers: CAPI core, the simulator's).
func processMetrics() []*dto.MetricFamily {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil
	}
	return families
}

func (t *eventTally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, v := range t.counts {
		n += v
	}
	return n
}

// waitQuiet waits until no event has been tallied for quiet, at most limit; it tells whether
// that happened.
func waitQuiet(ctx context.Context, t *eventTally, quiet, limit time.Duration) bool {
	last, changed := t.total(), time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, limit, false, func(context.Context) (bool, error) {
		if n := t.total(); n != last {
			last, changed = n, time.Now()
		}
		return time.Since(changed) >= quiet, nil
	})
	return err == nil
}

// QueueTimes are the HarvesterMachine controller's work-queue wait (added -> picked by a
// worker) and reconcile time over a phase, from controller-runtime's histograms; quantiles are
// the upper bounds of the histogram buckets they fall in.
type QueueTimes struct {
	Reconciles  int     `json:"reconciles"`
	WaitMeanMs  float64 `json:"waitMeanMs"`
	WaitP50Ms   float64 `json:"waitP50Ms"`
	WaitP99Ms   float64 `json:"waitP99Ms"`
	RunMeanMs   float64 `json:"reconcileMeanMs"`
	RunP50Ms    float64 `json:"reconcileP50Ms"`
	RunP99Ms    float64 `json:"reconcileP99Ms"`
	BusySeconds float64 `json:"busySeconds"`
}

// histogram is a cumulative histogram's count, sum and buckets (upper bound -> cumulative count).
type histogram struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{count: h.count - o.count, sum: h.sum - o.sum, buckets: map[float64]uint64{}}
	for ub, c := range h.buckets {
		out.buckets[ub] = c - o.buckets[ub]
	}
	return out
}

func (h histogram) plus(o histogram) histogram {
	out := histogram{count: h.count + o.count, sum: h.sum + o.sum, buckets: map[float64]uint64{}}
	for ub, c := range h.buckets {
		out.buckets[ub] = c
	}
	for ub, c := range o.buckets {
		out.buckets[ub] += c
	}
	return out
}

// histogramOf is a Prometheus histogram sample as a histogram.
func histogramOf(m *dto.Histogram) histogram {
	h := histogram{count: m.GetSampleCount(), sum: m.GetSampleSum(), buckets: map[float64]uint64{}}
	for _, b := range m.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) { // the text format lists +Inf; the count is that bucket
			h.buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
	}
	return h
}

// bucketBounds are a histogram's finite bucket bounds, in seconds, sorted.
func bucketBounds(h histogram) []float64 { return slices.Sorted(maps.Keys(h.buckets)) }

// bucketed puts durations into a histogram with bounds (seconds) as its buckets, to compare
// them with a histogram the manager exported.
func bucketed(ds []time.Duration, bounds []float64) histogram {
	h := histogram{buckets: map[float64]uint64{}}
	for _, ub := range bounds {
		h.buckets[ub] = 0
	}
	for _, d := range ds {
		h.count++
		h.sum += d.Seconds()
		for _, ub := range bounds {
			if d.Seconds() <= ub {
				h.buckets[ub]++
			}
		}
	}
	return h
}

// quantile is the upper bound of the bucket holding quantile q, in milliseconds; -1 when it is
// beyond the last finite bucket.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	for _, ub := range bucketBounds(h) {
		if float64(h.buckets[ub]) >= q*float64(h.count) {
			return round3(ub * 1000)
		}
	}
	return -1
}

// percentiles are the histogram's quantiles (bucket upper bounds: p50 "250" reads "at most 250")
// and its exact mean.
func (h histogram) percentiles() Percentiles {
	p := Percentiles{N: int(h.count), P50: h.quantile(0.5), P95: h.quantile(0.95), P99: h.quantile(0.99), Max: h.quantile(1)}
	if h.count > 0 {
		p.Mean = round3(h.sum / float64(h.count) * 1000)
	}
	return p
}

type machineQueue struct{ wait, run histogram }

// machineQueueTimes reads the HarvesterMachine controller's histograms from gathered metrics.
func machineQueueTimes(families []*dto.MetricFamily) machineQueue {
	read := func(name, label string) histogram {
		h := histogram{buckets: map[float64]uint64{}}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if metricLabels(m)[label] == "harvestermachine" {
					h = h.plus(histogramOf(m.GetHistogram()))
				}
			}
		}
		return h
	}
	return machineQueue{
		wait: read("workqueue_queue_duration_seconds", "name"),
		run:  read("controller_runtime_reconcile_time_seconds", "controller"),
	}
}

func (q machineQueue) since(before machineQueue) QueueTimes {
	w, r := q.wait.minus(before.wait), q.run.minus(before.run)
	mean := func(h histogram) float64 {
		if h.count == 0 {
			return 0
		}
		return round3(h.sum / float64(h.count) * 1000)
	}
	return QueueTimes{
		Reconciles: int(r.count),
		WaitMeanMs: mean(w), WaitP50Ms: w.quantile(0.5), WaitP99Ms: w.quantile(0.99),
		RunMeanMs: mean(r), RunP50Ms: r.quantile(0.5), RunP99Ms: r.quantile(0.99),
		BusySeconds: round3(r.sum),
	}
}

// metricLabels are a metric's labels by name.
func metricLabels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
