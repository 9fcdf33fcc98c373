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

package bed

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// TestMain lets this test binary play a manager (fakeManager) when the bed's test starts it so.
func TestMain(m *testing.M) {
	if os.Getenv("BED_FAKE_MANAGER") != "" {
		fakeManager()
		return
	}
	os.Exit(m.Run())
}

// fakeManager serves /readyz on BED_FAKE_HEALTH. Its first run (no BED_FAKE_MARKER file yet)
// ends by itself with status 1 once it has answered its first readiness probe, as a manager
// that lost its leader lease does; later runs serve until they are stopped.
func fakeManager() {
	first := false
	if _, err := os.Stat(os.Getenv("BED_FAKE_MARKER")); errors.Is(err, os.ErrNotExist) {
		first = true
		_ = os.WriteFile(os.Getenv("BED_FAKE_MARKER"), nil, 0o600)
	}
	l, err := net.Listen("tcp", os.Getenv("BED_FAKE_HEALTH"))
	if err != nil {
		os.Exit(2)
	}
	answered := make(chan struct{}, 1)
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			select {
			case answered <- struct{}{}:
			default:
			}
		}))
	}()
	if first {
		<-answered
		os.Exit(1)
	}
	select {}
}

// A manager that ends by itself (leadership lost, a crash) is started again after a back-off, as
// its Deployment's pod would be by the kubelet; one the bed stops or kills is not.
func TestAManagerThatEndsByItselfIsStartedAgain(t *testing.T) {
	g := NewWithT(t)
	newRestartBackoff = func() testenv.CrashBackoff {
		return testenv.CrashBackoff{Initial: 200 * time.Millisecond, Max: time.Second}
	}
	t.Cleanup(func() { newRestartBackoff = testenv.KubeletCrashBackoff })
	port, err := testenv.FreeLoopbackPort()
	g.Expect(err).NotTo(HaveOccurred())
	health := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := t.TempDir()
	exe, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	p := &Provider{binary: exe, workDir: dir, LogFile: filepath.Join(dir, "manager.log"), HealthAddr: health,
		env: append(os.Environ(), "BED_FAKE_MANAGER=1", "BED_FAKE_HEALTH="+health, "BED_FAKE_MARKER="+filepath.Join(dir, "ran"))}

	g.Expect(p.Start(t.Context())).To(Succeed())
	first := p.Pid()
	g.Eventually(func() int { n, _ := p.Restarts(); return n }, 2*time.Minute).Should(Equal(1), "started again once")
	g.Eventually(func() bool { pid := p.Pid(); return pid != 0 && pid != first }, 2*time.Minute).Should(BeTrue(), "a new process")
	g.Eventually(func() bool { exited, _ := p.Exited(); return exited }, 2*time.Second).Should(BeFalse())
	_, last := p.Restarts()
	g.Expect(last).To(MatchError(ContainSubstring("exit status 1")))
	log, err := p.Log()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(log)).To(ContainSubstring("the manager ended by itself"))

	g.Expect(p.Stop()).To(Succeed())
	g.Consistently(p.Pid, time.Second).Should(BeZero(), "a manager the bed stopped stays stopped")
	n, _ := p.Restarts()
	g.Expect(n).To(Equal(1))

	g.Expect(p.Start(t.Context())).To(Succeed())
	g.Expect(p.Kill()).To(Succeed())
	g.Consistently(p.Pid, time.Second).Should(BeZero(), "nor one the bed killed")
	n, _ = p.Restarts()
	g.Expect(n).To(Equal(1))
}
