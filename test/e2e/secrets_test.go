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

package e2e

import (
	"bytes"
	"strings"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
)

// secretWatch gathers, while a cluster lives, every secret value the lifecycle handles: the
// identity's token, each guest token minted, the bootstrap data, the guest's CA keys and
// kubeconfig, so that a test can check none of it reached a log, an event or a condition.
type secretWatch struct {
	fragments map[string]string // fragment -> where it came from
	texts     []string          // condition messages seen
}

func newSecretWatch() *secretWatch { return &secretWatch{fragments: map[string]string{}} }

// add records a secret value: the whole of a one-line value (a token), and each long line of
// a multi-line one (PEM key material, kubeconfig credentials, bootstrap scripts' secrets).
func (w *secretWatch) add(from string, value []byte) {
	v := strings.TrimSpace(string(value))
	if !strings.Contains(v, "\n") {
		if len(v) >= 20 {
			w.fragments[v] = from
		}
		return
	}
	for _, line := range strings.Split(v, "\n") {
		line = strings.TrimSpace(line)
		if len(line) >= 40 && !strings.ContainsAny(line, " \t") && !strings.HasPrefix(line, "-----") {
			w.fragments[line] = from
		}
	}
}

// addKubeconfig records a kubeconfig's credentials (tokens, client keys).
func (w *secretWatch) addKubeconfig(from string, data []byte) {
	cfg, err := clientcmd.Load(data)
	Expect(err).NotTo(HaveOccurred(), from)
	for name, u := range cfg.AuthInfos {
		w.add(from+" user "+name+" token", []byte(u.Token))
		w.add(from+" user "+name+" key", u.ClientKeyData)
	}
}

// snapshot records the secrets and condition messages of a cluster in the management
// namespace: every Secret of the cluster (bootstrap data, CA keys, kubeconfig, cloud-config),
// the identity Secret, and the conditions of its Cluster, HarvesterCluster and machines.
func (w *secretWatch) snapshot(g Gomega, namespace, cluster string) {
	secrets := &corev1.SecretList{}
	g.Expect(mgmt().List(ctx, secrets, client.InNamespace(namespace))).To(Succeed())
	for _, s := range secrets.Items {
		for key, value := range s.Data {
			from := "Secret " + s.Name + " key " + key
			if bytes.Contains(value, []byte("apiVersion: v1")) && bytes.Contains(value, []byte("clusters:")) {
				w.addKubeconfig(from, value)
			}
			w.add(from, value)
		}
	}
	hcs := &infrav1.HarvesterClusterList{}
	hms := &infrav1.HarvesterMachineList{}
	machines := &clusterv1.MachineList{}
	clusters := &clusterv1.ClusterList{}
	for _, l := range []client.ObjectList{hcs, hms, machines, clusters} {
		g.Expect(mgmt().List(ctx, l, client.InNamespace(namespace))).To(Succeed())
	}
	for _, hc := range hcs.Items {
		for _, c := range hc.Status.Conditions {
			w.texts = append(w.texts, c.Message)
		}
	}
	for _, hm := range hms.Items {
		for _, c := range hm.Status.Conditions {
			w.texts = append(w.texts, c.Message)
		}
	}
	for _, m := range machines.Items {
		for _, c := range m.Status.Conditions {
			w.texts = append(w.texts, c.Message)
		}
	}
	for _, c := range clusters.Items {
		for _, cond := range c.Status.Conditions {
			w.texts = append(w.texts, cond.Message)
		}
	}
}

// expectNoneIn fails when a recorded secret appears in the manager's log, the guests' CCM log,
// the events of the namespace, or a condition message seen.
func (w *secretWatch) expectNoneIn(namespace string) {
	Expect(w.fragments).NotTo(BeEmpty(), "the lifecycle handled secrets to look for")
	managerLog, err := testBed.Provider.Log()
	Expect(err).NotTo(HaveOccurred())
	Expect(managerLog).NotTo(BeEmpty())
	events := &corev1.EventList{}
	Expect(mgmt().List(ctx, events, client.InNamespace(namespace))).To(Succeed())
	var eventText strings.Builder
	for _, e := range events.Items {
		eventText.WriteString(e.Message + "\n")
	}
	Expect(events.Items).NotTo(BeEmpty())
	sources := map[string]string{
		"the manager's log":   string(managerLog),
		"the guest CCMs' log": guest.CCMLog(),
		"events":              eventText.String(),
		"conditions":          strings.Join(w.texts, "\n"),
	}
	for fragment, from := range w.fragments {
		for where, text := range sources {
			Expect(strings.Contains(text, fragment)).To(BeFalse(), "%s (from %s) appears in %s", abbreviate(fragment), from, where)
		}
	}
}

func abbreviate(s string) string {
	if len(s) > 12 {
		return s[:6] + "…" + s[len(s)-4:]
	}
	return s
}
