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
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// diagnosticsReader is the management ServiceAccount the bench reads the manager's diagnostics
// endpoint as (metrics and pprof): the shipped endpoint authenticates and authorises its callers
// with the management cluster, and the bench uses it that way.
const diagnosticsReader = "bench-diagnostics"

// diagnosticsToken makes diagnosticsReader, allowed to GET /metrics and /debug/pprof/*, and
// returns a token of it.
func diagnosticsToken(ctx context.Context, c client.Client) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: diagnosticsReader}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: diagnosticsReader},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics", "/debug/pprof/*"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: diagnosticsReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: diagnosticsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, obj)); err != nil {
			return "", err
		}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](6 * 3600)}}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("a token for %s: %w", diagnosticsReader, err)
	}
	return req.Status.Token, nil
}

// managerScope is what a manager reconciles (main.go's --watch-filter and --namespace) and, for
// one of several managers, its shard name.
type managerScope struct{ filter, namespace, shard string }

// providerManager is the shipped manager binary (extracted from its image), installed from its
// rendered components and run with its RBAC by bed.InstallProvider, as clusterctl and a pod would.
type providerManager struct {
	*bed.Provider
	token string
}

// startManager installs and starts the manager with the Deployment's arguments plus the bench's
// settings (each a flag of main.go) and scope.
func startManager(ctx context.Context, tb *bed.Bed, scope managerScope, s settings) (*providerManager, error) {
	args := []string{
		"--sync-period=" + s.syncPeriod.String(),
		fmt.Sprintf("--harvestermachine-concurrency=%d", s.machineConcurrency),
		fmt.Sprintf("--kube-api-qps=%g", s.kubeQPS), fmt.Sprintf("--kube-api-burst=%d", s.kubeBurst),
		fmt.Sprintf("--harvester-api-qps=%g", s.harvesterQPS), fmt.Sprintf("--harvester-api-burst=%d", s.harvesterBurst),
	}
	if scope.filter != "" {
		args = append(args, "--watch-filter="+scope.filter)
	}
	if scope.namespace != "" {
		args = append(args, "--namespace="+scope.namespace)
	}
	if scope.shard != "" {
		// Each shard of a fleet is its own Deployment with its own lease; the bench also has it
		// log every reconcile (controller-runtime's "Reconciling", at V(5)) to tell which
		// objects each shard touched.
		args = append(args, "--leader-election-id=capi-harvester-"+scope.shard, "--v=5")
	}
	p, err := tb.InstallProvider(ctx, bed.ProviderOptions{Binary: s.binary, ExtraArgs: args})
	if err != nil {
		return nil, err
	}
	m := &providerManager{Provider: p, token: s.token}
	// Ready (webhooks serving) does not mean the diagnostics server listens yet.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := m.metrics(ctx)
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the manager's metrics endpoint: %w", err)
	}
	return m, nil
}

// get GETs path from the manager's diagnostics endpoint.
func (m *providerManager) get(ctx context.Context, path string, timeout time.Duration) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.MetricsAddr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	c := bed.MetricsClient()
	c.Timeout = timeout
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// metrics scrapes the manager's metrics.
func (m *providerManager) metrics(ctx context.Context) ([]*dto.MetricFamily, error) {
	body, err := m.get(ctx, "/metrics", 30*time.Second)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	return out, nil
}

// writeProfile saves one of the manager's pprof profiles (e.g. "heap") to path.
func (m *providerManager) writeProfile(ctx context.Context, profile, path string, timeout time.Duration) error {
	body, err := m.get(ctx, "/debug/pprof/"+profile, timeout)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// profileCPU records the manager's CPU profile in consecutive chunks (dir/manager-cpu-NN.pprof,
// `go tool pprof` merges them) until the returned stop is called; the chunk running then is lost.
func (m *providerManager) profileCPU(ctx context.Context, dir string, chunk time.Duration) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			path := filepath.Join(dir, fmt.Sprintf("manager-cpu-%02d.pprof", i))
			err := m.writeProfile(ctx, fmt.Sprintf("profile?seconds=%d", int(chunk.Seconds())), path, chunk+30*time.Second)
			if err != nil && ctx.Err() == nil {
				firstErr = err
				return
			}
		}
	})
	return func() error { cancel(); wg.Wait(); return firstErr }
}

// reconciled counts the manager's reconciles by "controller namespace/name", from the
// "Reconciling" lines its log has at --v=5.
func (m *providerManager) reconciled() (map[string]int, error) {
	log, err := m.Log()
	if err != nil {
		return nil, err
	}
	return reconcileLines(log), nil
}

var (
	logController = regexp.MustCompile(`\bcontroller="([^"]+)"`)
	logNamespace  = regexp.MustCompile(`\bnamespace="([^"]*)"`)
	logName       = regexp.MustCompile(`\bname="([^"]+)"`)
)

// reconcileLines reads klog's text lines of controller-runtime's "Reconciling" message.
func reconcileLines(log []byte) map[string]int {
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `] "Reconciling"`) {
			continue
		}
		c, n := logController.FindStringSubmatch(line), logName.FindStringSubmatch(line)
		if c == nil || n == nil {
			continue // a controller whose requests are not objects
		}
		ns := ""
		if m := logNamespace.FindStringSubmatch(line); m != nil {
			ns = m[1]
		}
		out[c[1]+" "+ns+"/"+n[1]]++
	}
	return out
}

// managerSample is what the manager's metrics say at one moment.
type managerSample struct {
	// harvester are its Harvester requests (capi_harvester_requests_total).
	harvester requestCounts
	// management are its management-cluster requests by "verb resource", conflicts those
	// answered 409 (capi_harvester_management_requests_total).
	management, conflicts map[string]int
	// webhooks are the calls its webhook server answered, by path.
	webhooks map[string]int
	// statusPatch is the round trip of its HarvesterMachine status patches.
	statusPatch histogram
	// webhookHandling is its webhook server's time per call, every path.
	webhookHandling histogram
	queue           machineQueue
	reconciles      map[string]int
}

// machineStatusPatch is the provider's request that marks a machine provisioned.
const machineStatusPatch = "patch infrastructure.cluster.x-k8s.io/harvestermachines/status"

func (m *providerManager) sample(ctx context.Context) (managerSample, error) {
	families, err := m.metrics(ctx)
	if err != nil {
		return managerSample{}, err
	}
	out := managerSample{
		harvester: clientRequests(families), management: map[string]int{}, conflicts: map[string]int{}, webhooks: map[string]int{},
		statusPatch: histogram{buckets: map[float64]uint64{}}, webhookHandling: histogram{buckets: map[float64]uint64{}},
		queue: machineQueueTimes(families), reconciles: reconcileResults(families),
	}
	for _, f := range families {
		switch f.GetName() {
		case "capi_harvester_management_requests_total":
			for _, mm := range f.GetMetric() {
				l := metricLabels(mm)
				key, n := l["verb"]+" "+l["resource"], int(mm.GetCounter().GetValue())
				out.management[key] += n
				if l["result"] == "409" {
					out.conflicts[key] += n
				}
			}
		case "controller_runtime_webhook_requests_total":
			for _, mm := range f.GetMetric() {
				out.webhooks[metricLabels(mm)["webhook"]] += int(mm.GetCounter().GetValue())
			}
		case "controller_runtime_webhook_latency_seconds":
			for _, mm := range f.GetMetric() {
				out.webhookHandling = out.webhookHandling.plus(histogramOf(mm.GetHistogram()))
			}
		case "capi_harvester_management_request_duration_seconds":
			for _, mm := range f.GetMetric() {
				if l := metricLabels(mm); l["verb"]+" "+l["resource"] == machineStatusPatch {
					out.statusPatch = out.statusPatch.plus(histogramOf(mm.GetHistogram()))
				}
			}
		}
	}
	return out, nil
}
