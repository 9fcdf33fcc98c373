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
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is what one bench run measured; `make bench` writes it as out/bench/report.json (which
// hack/benchplot draws) and out/bench/report.md.
type Report struct {
	Started  time.Time `json:"started"`
	Machine  string    `json:"machine"`
	Machines int       `json:"machines"`
	Clusters int       `json:"clusters"`
	// Setup says how the provider ran and what the figures include.
	Setup []string `json:"setup"`

	P1 Latency `json:"p1"`
	// P1Queue is where the HarvesterMachine controller's time went over the creation phase.
	P1Queue QueueTimes `json:"p1Queue"`
	// P1StatusWrites are the management apiserver's round trips of the provider's
	// HarvesterMachine status patches over the creation, beside a bare patch's: how much of P1
	// is the apiserver's write.
	P1StatusWrites *Latency `json:"p1StatusWrites,omitempty"`
	// P1Relay is P1 beside a bare relay under the same load (the relay probe): what the
	// simulator, the apiservers and the bench's watches allow for the provider's last step.
	P1Relay *Latency `json:"p1Relay,omitempty"`
	// P3Webhooks are the creation's admission calls to the manager's webhooks, timed from both
	// ends.
	P3Webhooks *WebhookLatency `json:"p3Webhooks,omitempty"`
	// P3WebhookTax is the same creates timed with the provider's webhooks and without them.
	P3WebhookTax *WebhookTax `json:"p3WebhookTax,omitempty"`
	P2           Scale       `json:"p2"`
	P3           APICost     `json:"p3"`
	// P4 is empty when the run did not measure it (see Notes).
	P4       *Latency   `json:"p4,omitempty"`
	ScaleOut []ScaleOut `json:"scaleOut,omitempty"`
	Notes    []string   `json:"notes,omitempty"`
	// Series are the curves of the plot.
	Series Series `json:"series"`
}

// Latency is a distribution of durations, for the provider and for the bare-client baseline.
type Latency struct {
	What     string       `json:"what"`
	Provider Percentiles  `json:"provider"`
	Baseline *Percentiles `json:"baseline,omitempty"`
}

// WebhookLatency is the admission calls to the manager's webhooks over a phase: RoundTrip as the
// management apiserver times each (from its apiserver_admission_webhook_admission_duration_seconds,
// the provider's webhooks only): the wait a call adds to someone's write, with the connection,
// TLS and the manager's queueing; Handling as the manager's webhook server times it
// (controller_runtime_webhook_latency_seconds: reading the request, the defaulting or
// validation, the answer). Both come from histograms: their quantiles are bucket bounds, the
// means exact.
type WebhookLatency struct {
	What      string      `json:"what"`
	RoundTrip Percentiles `json:"roundTrip"`
	Handling  Percentiles `json:"handling"`
}

// WebhookTax is what the provider's webhooks add to a create: Creates HarvesterMachines made one
// after the other through them (On) and as many where the apiserver skips them (Off), in the
// same run; each create as its client waits for it, the seconds their sums.
type WebhookTax struct {
	What       string      `json:"what"`
	Creates    int         `json:"creates"`
	OnSeconds  float64     `json:"onSeconds"`
	OffSeconds float64     `json:"offSeconds"`
	On         Percentiles `json:"on"`
	Off        Percentiles `json:"off"`
}

// Percentiles of a sample, in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P95 float64 `json:"p95Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
	// Mean is set where the figure comes from a histogram (whose quantiles are bucket bounds).
	Mean float64 `json:"meanMs,omitempty"`
}

// Phase is one timed phase of a run (creation or deletion of everything).
type Phase struct {
	Seconds float64 `json:"seconds"`
	// CPUSeconds and PeakRSSMiB are the bench process's: the bed (simulator, CAPI core, node
	// agent) and the bench's own clients.
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMiB float64 `json:"peakRssMiB"`
	// ManagerCPUSeconds and ManagerPeakRSSMiB are the provider's manager process's.
	ManagerCPUSeconds float64 `json:"managerCpuSeconds,omitempty"`
	ManagerPeakRSSMiB float64 `json:"managerPeakRssMiB,omitempty"`
	// ControlPlaneCPUSeconds is the CPU time of the test control planes the bench process
	// started (envtest's kube-apiservers and etcds, its child processes), by environment and
	// program ("management kube-apiserver", "harvester etcd"): the rest of the machine's time.
	ControlPlaneCPUSeconds map[string]float64 `json:"controlPlaneCpuSeconds,omitempty"`
}

// Scale is P2: everything created (or deleted) at once, for the provider and the baseline.
type Scale struct {
	Create         Phase `json:"create"`
	Delete         Phase `json:"delete"`
	BaselineCreate Phase `json:"baselineCreate"`
	BaselineDelete Phase `json:"baselineDelete"`
}

// APICost is P3: requests to Harvester, by "verb" or "verb resource".
type APICost struct {
	// ClientPerMachine is the provider's lifecycle requests by verb, counted by its own
	// per-connection round-tripper (capi_harvester_requests_total), divided by the machines.
	ClientPerMachine map[string]float64 `json:"clientPerMachine"`
	// ServerPerMachine is the same counted by the simulated Harvester's fault proxy, by the
	// provider's User-Agent.
	ServerPerMachine map[string]float64 `json:"serverPerMachine"`
	// BaselinePerMachine is the bare client's, counted by the fault proxy.
	BaselinePerMachine map[string]float64 `json:"baselinePerMachine"`
	// ServerByResource is the provider's lifecycle requests by "verb resource" (server side).
	ServerByResource map[string]int `json:"serverByResource"`
	// SettleSeconds is how long after the last machine was provisioned the watched objects
	// kept changing (CAPI's controllers reacting), before the steady window; its requests count
	// in the lifecycle. SettleQuiet is false when they never stopped (the window then started
	// anyway).
	SettleSeconds float64 `json:"settleSeconds"`
	SettleQuiet   bool    `json:"settleQuiet"`
	// SteadyWindowSeconds is how long the steady state was watched, everything provisioned.
	SteadyWindowSeconds float64 `json:"steadyWindowSeconds"`
	// SteadyPerMinute is the provider's requests per minute in that window, by verb (server
	// side; watches that stay open count once, when they open).
	SteadyPerMinute map[string]float64 `json:"steadyPerMinute"`
	// SteadyByResource is the provider's requests in that window by "verb resource" (server
	// side): what to remove to reach 0.
	SteadyByResource map[string]int `json:"steadyByResource"`
	// SteadyClientPerMinute is the same counted by the provider's round-tripper.
	SteadyClientPerMinute map[string]float64 `json:"steadyClientPerMinute"`
	// ManagementPerMachine is the provider's requests to the management cluster per machine
	// lifecycle, by verb (capi_harvester_management_requests_total); ManagementByResource the
	// same by "verb resource", in all; ManagementSteadyPerMinute those of the steady state.
	ManagementPerMachine      map[string]float64 `json:"managementPerMachine"`
	ManagementByResource      map[string]int     `json:"managementByResource"`
	ManagementSteadyPerMinute map[string]float64 `json:"managementSteadyPerMinute"`
	// ManagementConflicts are the provider's management requests answered 409 Conflict over the
	// whole run, by "verb resource" (a write from a stale read, retried).
	ManagementConflicts map[string]int `json:"managementConflicts"`
	// ManagementSteadyByResource is the steady window's management requests by "verb resource".
	ManagementSteadyByResource map[string]int `json:"managementSteadyByResource"`
	// WebhookCalls are the admission and conversion requests the management apiserver sent the
	// manager over the machines' lifecycle, by path (controller_runtime_webhook_requests_total):
	// each is a round trip the apiserver waits for inside a write of CAPI's or the provider's.
	WebhookCalls map[string]int `json:"webhookCalls"`
	// SteadyEvents are the watch events in the steady window, by "<cluster> <Kind> <event>
	// <writer>" (the writer of an update: the field managers whose managedFields entries it
	// changed): what could wake a controller while nothing is meant to change.
	SteadyEvents map[string]int `json:"steadyEvents"`
	// SteadyReconciles are the reconciles in the steady window, by "<controller> <result>"
	// (controller-runtime's reconcile counters of the bed's managers and of the provider's).
	SteadyReconciles map[string]int `json:"steadyReconciles"`
	// Connections is how many connections (identity Secrets) the round-tripper counted.
	Connections int `json:"connections"`
}

// ScaleOut is two managers on disjoint halves of the clusters.
type ScaleOut struct {
	// Mode is how the managers are sharded: "label" (--watch-filter) or "namespace" (--namespace).
	Mode     string `json:"mode"`
	Machines int    `json:"machines"`
	// Reconciled is how many distinct objects each manager reconciled, by manager.
	Reconciled map[string]int `json:"reconciled"`
	// Reconciles is how many reconciles each manager ran, by manager.
	Reconciles map[string]int `json:"reconciles"`
	// Both lists the objects reconciled by both managers (should be none).
	Both    []string `json:"both"`
	Seconds float64  `json:"seconds"`
}

// Series are offsets from the start of creation, in seconds, sorted.
type Series struct {
	ProviderProvisioned []float64 `json:"providerProvisioned"`
	BaselineRunning     []float64 `json:"baselineRunning"`
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	// Nearest rank: the smallest value with at least p% of the sample at or below it.
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return ms(s[max(i, 0)])
	}
	return Percentiles{N: len(s), P50: rank(50), P95: rank(95), P99: rank(99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

func offsets(start time.Time, ts []time.Time) []float64 {
	out := make([]float64, 0, len(ts))
	for _, t := range ts {
		out = append(out, math.Round(t.Sub(start).Seconds()*1000)/1000)
	}
	slices.Sort(out)
	return out
}

// processMeter measures the CPU time and peak resident memory over a phase of this process (the
// bed: simulator, CAPI core, node agent, the bench's clients) and of the manager's, by pid (0:
// none).
type processMeter struct {
	start       time.Time
	pid         int
	cpu, mgrCPU time.Duration
	// apiservers names the environments by their kube-apiservers' host:port; controlPlanes
	// holds the CPU time of each control-plane process at the start, by pid.
	apiservers    map[string]string
	controlPlanes map[int]time.Duration
}

// startMeter starts measuring; apiservers names the environments whose control planes' CPU is
// measured too, by their kube-apiserver's host:port (rest.Config's Host without the scheme).
func startMeter(managerPid int, apiservers map[string]string) processMeter {
	// Reset the kernel's peak-RSS marks (VmHWM) so the phase's peak is its own; older kernels
	// refuse and the peak is then the process's since it started.
	m := processMeter{start: time.Now(), pid: managerPid, apiservers: apiservers, controlPlanes: map[int]time.Duration{}}
	for pid := range controlPlanes(apiservers) {
		m.controlPlanes[pid] = processCPU(strconv.Itoa(pid))
	}
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	m.cpu = processCPU("self")
	if managerPid != 0 {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", managerPid), []byte("5"), 0)
		m.mgrCPU = processCPU(strconv.Itoa(managerPid))
	}
	return m
}

func (m processMeter) stop() Phase {
	p := Phase{
		Seconds:    round3(time.Since(m.start).Seconds()),
		CPUSeconds: round3((processCPU("self") - m.cpu).Seconds()),
		PeakRSSMiB: round3(peakRSSMiB("self")),
	}
	if m.pid != 0 {
		pid := strconv.Itoa(m.pid)
		p.ManagerCPUSeconds = round3((processCPU(pid) - m.mgrCPU).Seconds())
		p.ManagerPeakRSSMiB = round3(peakRSSMiB(pid))
	}
	for pid, name := range controlPlanes(m.apiservers) {
		// A process started within the phase spent all its time in it.
		used := processCPU(strconv.Itoa(pid)) - m.controlPlanes[pid]
		if p.ControlPlaneCPUSeconds == nil {
			p.ControlPlaneCPUSeconds = map[string]float64{}
		}
		p.ControlPlaneCPUSeconds[name] = round3(p.ControlPlaneCPUSeconds[name] + used.Seconds())
	}
	return p
}

// controlPlanes finds this process's children that are kube-apiservers or etcds and names each
// "<environment> kube-apiserver" or "<environment> etcd": an apiserver by its --secure-port in
// apiservers (host:port -> environment), an etcd by the apiserver whose --etcd-servers has its
// client port; a control plane of no named environment (a guest's) is "other".
func controlPlanes(apiservers map[string]string) map[int]string {
	if len(apiservers) == 0 {
		return nil
	}
	byPort := map[string]string{}
	for hostPort, env := range apiservers {
		if i := strings.LastIndexByte(hostPort, ':'); i >= 0 {
			byPort[hostPort[i+1:]] = env
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := strconv.Itoa(os.Getpid())
	type proc struct {
		pid  int
		comm string
		args []string
	}
	var procs []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name's closing parenthesis: state, ppid, ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != self {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		procs = append(procs, proc{pid: pid, comm: strings.TrimSpace(string(comm)), args: strings.Split(string(cmdline), "\x00")})
	}
	flag := func(args []string, name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	port := func(url string) string { // the port of the first URL of a list
		url, _, _ = strings.Cut(url, ",")
		return url[strings.LastIndexByte(url, ':')+1:]
	}
	etcdEnv := map[string]string{} // etcd client port -> environment
	out := map[int]string{}
	for _, p := range procs {
		if p.comm != "kube-apiserver" {
			continue
		}
		env, ok := byPort[flag(p.args, "secure-port")]
		if !ok {
			env = "other"
		}
		out[p.pid] = env + " kube-apiserver"
		if etcd := flag(p.args, "etcd-servers"); etcd != "" {
			etcdEnv[port(etcd)] = env
		}
	}
	for _, p := range procs {
		if p.comm != "etcd" {
			continue
		}
		env, ok := etcdEnv[port(flag(p.args, "listen-client-urls"))]
		if !ok {
			env = "other"
		}
		out[p.pid] = env + " etcd"
	}
	return out
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ: 100 on every Linux
// architecture Go builds for).
const clockTicks = 100

// processCPU is the user and system CPU time a process used so far ("self" or a pid), from
// /proc/<pid>/stat.
func processCPU(pid string) time.Duration {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count fields after its closing parenthesis,
	// where field 3 (state) is the first; utime and stime are fields 14 and 15.
	rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

func peakRSSMiB(pid string) float64 {
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kib / 1024
			}
		}
	}
	return 0
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func perMachine(counts map[string]int, machines int, key func(string) string) map[string]float64 {
	out := map[string]float64{}
	for k, n := range counts {
		out[key(k)] += float64(n) / float64(machines)
	}
	for k, v := range out {
		out[k] = round3(v)
	}
	return out
}

func verbOf(k string) string { v, _, _ := strings.Cut(k, " "); return v }

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return round3(s)
}

func writes(m map[string]float64) float64 {
	var s float64
	for _, v := range []string{"create", "update", "patch", "delete", "deletecollection"} {
		s += m[v]
	}
	return round3(s)
}

// Write puts report.json and report.md into dir and returns the markdown.
func (r *Report) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	md := r.Markdown()
	return md, os.WriteFile(filepath.Join(dir, "report.md"), []byte(md), 0o644)
}

// Markdown renders the report as the table docs/performance.md quotes.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Bench %s\n\n%d machines in %d clusters; %s.\n\n", r.Started.UTC().Format(time.RFC3339), r.Machines, r.Clusters, r.Machine)
	for _, s := range r.Setup {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString("\n| figure | provider | bare-client baseline | ratio |\n| --- | --- | --- | --- |\n")
	lat := func(name string, l *Latency) {
		base := l.Baseline
		row := func(label string, p, q float64) {
			qs, rs := "n/a", "n/a"
			if base != nil {
				qs, rs = fmt.Sprintf("%.0f ms", q), ratio(p, q)
			}
			fmt.Fprintf(&b, "| %s %s | %.0f ms | %s | %s |\n", name, label, p, qs, rs)
		}
		var q Percentiles
		if base != nil {
			q = *base
		}
		row("p50", l.Provider.P50, q.P50)
		row("p95", l.Provider.P95, q.P95)
		row("p99", l.Provider.P99, q.P99)
		row("max", l.Provider.Max, q.Max)
		if l.Provider.Mean > 0 {
			row("mean", l.Provider.Mean, q.Mean)
		}
	}
	lat("P1", &r.P1)
	q := r.P1Queue
	fmt.Fprintf(&b, "| P1 HarvesterMachine work queue over the creation: wait mean / p50 / p99 | %.0f / %.0f / %.0f ms | | |\n", q.WaitMeanMs, q.WaitP50Ms, q.WaitP99Ms)
	fmt.Fprintf(&b, "| P1 HarvesterMachine reconciles over the creation: count, mean / p50 / p99 | %d, %.0f / %.0f / %.0f ms | | |\n", q.Reconciles, q.RunMeanMs, q.RunP50Ms, q.RunP99Ms)
	if w := r.P1StatusWrites; w != nil {
		lat("P1 management apiserver status patch", w)
	}
	if l := r.P1Relay; l != nil {
		lat("P1 beside a bare relay under the same load", l)
	}
	if w := r.P3Webhooks; w != nil {
		fmt.Fprintf(&b, "| P3 webhook calls over the creation: round trip seen by the management apiserver, n, p50 / p99 / mean | %d, %.0f / %.0f / %.1f ms | | |\n", w.RoundTrip.N, w.RoundTrip.P50, w.RoundTrip.P99, w.RoundTrip.Mean)
		fmt.Fprintf(&b, "| P3 webhook calls over the creation: handling in the manager, n, p50 / p99 / mean | %d, %.0f / %.0f / %.1f ms | | |\n", w.Handling.N, w.Handling.P50, w.Handling.P99, w.Handling.Mean)
	}
	if w := r.P3WebhookTax; w != nil {
		fmt.Fprintf(&b, "| P3 %d HarvesterMachines created one after the other through the webhooks (baseline: the webhooks skipped) | %.2f s | %.2f s | %s |\n", w.Creates, w.OnSeconds, w.OffSeconds, ratio(w.OnSeconds, w.OffSeconds))
		fmt.Fprintf(&b, "| P3 one create through the webhooks (baseline: skipped), p50 / p99 | %.1f / %.1f ms | %.1f / %.1f ms | %s |\n", w.On.P50, w.On.P99, w.Off.P50, w.Off.P99, ratio(w.On.P50, w.Off.P50))
	}
	phase := func(name string, p, q Phase) {
		fmt.Fprintf(&b, "| P2 %s: wall | %.1f s | %.1f s | %s |\n", name, p.Seconds, q.Seconds, ratio(p.Seconds, q.Seconds))
		fmt.Fprintf(&b, "| P2 %s: CPU of the manager | %.1f s | | |\n", name, p.ManagerCPUSeconds)
		fmt.Fprintf(&b, "| P2 %s: peak RSS of the manager | %.0f MiB | | |\n", name, p.ManagerPeakRSSMiB)
		fmt.Fprintf(&b, "| P2 %s: CPU of the bench process | %.1f s | %.1f s | %s |\n", name, p.CPUSeconds, q.CPUSeconds, ratio(p.CPUSeconds, q.CPUSeconds))
		fmt.Fprintf(&b, "| P2 %s: peak RSS of the bench process | %.0f MiB | %.0f MiB | %s |\n", name, p.PeakRSSMiB, q.PeakRSSMiB, ratio(p.PeakRSSMiB, q.PeakRSSMiB))
		for _, k := range slices.Sorted(maps.Keys(p.ControlPlaneCPUSeconds)) {
			pc, qc := p.ControlPlaneCPUSeconds[k], q.ControlPlaneCPUSeconds[k]
			fmt.Fprintf(&b, "| P2 %s: CPU of the %s | %.1f s | %.1f s | %s |\n", name, k, pc, qc, ratio(pc, qc))
		}
	}
	phase("create -> all provisioned", r.P2.Create, r.P2.BaselineCreate)
	phase("delete -> LeakCheck empty", r.P2.Delete, r.P2.BaselineDelete)
	c := r.P3
	fmt.Fprintf(&b, "| P3 Harvester requests per machine lifecycle (client side) | %.1f | | |\n", sum(c.ClientPerMachine))
	fmt.Fprintf(&b, "| P3 Harvester requests per machine lifecycle (server side) | %.1f | %.1f | %s |\n", sum(c.ServerPerMachine), sum(c.BaselinePerMachine), ratio(sum(c.ServerPerMachine), sum(c.BaselinePerMachine)))
	fmt.Fprintf(&b, "| P3 Harvester writes per machine lifecycle (server side) | %.1f | %.1f | %s |\n", writes(c.ServerPerMachine), writes(c.BaselinePerMachine), ratio(writes(c.ServerPerMachine), writes(c.BaselinePerMachine)))
	fmt.Fprintf(&b, "| P3 settling after the last machine provisioned, until %s quiet | %.1f s | | |\n", settleQuiet, c.SettleSeconds)
	fmt.Fprintf(&b, "| P3 requests per minute at steady state (%.0f s window, server side) | %.1f | 0 (idle client) | |\n", c.SteadyWindowSeconds, sum(c.SteadyPerMinute))
	fmt.Fprintf(&b, "| P3 management-cluster requests per machine lifecycle (writes) | %.1f (%.1f) | | |\n", sum(c.ManagementPerMachine), writes(c.ManagementPerMachine))
	fmt.Fprintf(&b, "| P3 management-cluster requests per minute at steady state | %.1f | | |\n", sum(c.ManagementSteadyPerMinute))
	fmt.Fprintf(&b, "| P3 webhook calls to the manager per machine lifecycle | %.1f | | |\n", sum(perMachine(c.WebhookCalls, r.Machines, func(k string) string { return k })))
	if r.P4 != nil {
		lat("P4", r.P4)
	} else {
		b.WriteString("| P4 CCM: Harvester LB allocated -> guest Service has the address | not measured | | |\n")
	}
	b.WriteString("\nP3 by verb, per machine lifecycle:\n\n| verb | provider (client side) | provider (server side) | baseline (server side) |\n| --- | --- | --- | --- |\n")
	verbs := map[string]bool{}
	for _, m := range []map[string]float64{c.ClientPerMachine, c.ServerPerMachine, c.BaselinePerMachine} {
		for v := range m {
			verbs[v] = true
		}
	}
	for _, v := range slices.Sorted(func(yield func(string) bool) {
		for v := range verbs {
			if !yield(v) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f |\n", v, c.ClientPerMachine[v], c.ServerPerMachine[v], c.BaselinePerMachine[v])
	}
	fmt.Fprintf(&b, "\nManagement cluster, per machine lifecycle by verb: %v; at steady state, per minute: %v.\n", c.ManagementPerMachine, c.ManagementSteadyPerMinute)
	fmt.Fprintf(&b, "\nSteady state, requests per minute by verb (server side): %v; client side: %v; requests in the window by verb and resource (server side): %v.\n",
		c.SteadyPerMinute, c.SteadyClientPerMinute, c.SteadyByResource)
	fmt.Fprintf(&b, "\nManagement requests answered 409 Conflict (the whole run): %v.\n", c.ManagementConflicts)
	fmt.Fprintf(&b, "\nWebhook calls to the manager over the lifecycle, by path: %v.\n", c.WebhookCalls)
	fmt.Fprintf(&b, "\nSteady state, management requests by verb and resource: %v.\n", c.ManagementSteadyByResource)
	if !c.SettleQuiet {
		fmt.Fprintf(&b, "\n**The watched objects never stopped changing** (%.0f s after the last machine was provisioned): the steady window started anyway.\n", c.SettleSeconds)
	}
	fmt.Fprintf(&b, "\nSteady state, reconciles by controller and result: %v; watch events by cluster, kind, event and writer: %v.\n",
		c.SteadyReconciles, c.SteadyEvents)
	for _, so := range r.ScaleOut {
		how := "--watch-filter shard-a / shard-b"
		if so.Mode == "namespace" {
			how = "--namespace, one cluster each, one Harvester target namespace"
		}
		fmt.Fprintf(&b, "\nScale-out by %s: %d machines on two managers (%s), all provisioned in %.1f s. Objects reconciled: %v; reconciles: %v; reconciled by both: %d %v.\n",
			so.Mode, so.Machines, how, so.Seconds, so.Reconciled, so.Reconciles, len(so.Both), so.Both)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nNotes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}
