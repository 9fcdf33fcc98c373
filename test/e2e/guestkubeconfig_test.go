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
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
)

// The agents the two ClusterCaches of the bed send: the shipped manager's and CAPI core's
// (in-process, test/testenv/capi.go).
const (
	managerAgent  = "agent=cluster-api-provider-harvester "
	capiCoreAgent = "agent=capi-in-process "
)

// provisionedCluster makes a Cluster whose infrastructure counts as provisioned, the state in
// which every ClusterCache connects to the guest through the `<name>-kubeconfig` Secret.
func provisionedCluster(namespace, name string) *clusterv1.Cluster {
	Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name,
			},
		},
	}
	Expect(mgmt().Create(ctx, cluster)).To(Succeed())
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	Expect(mgmt().Status().Patch(ctx, cluster, patch)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt().Delete(ctx, cluster))).To(Succeed()) })
	return cluster
}

func kubeconfigSecret(namespace, cluster string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster + "-kubeconfig",
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": kubeconfig},
	}
}

var _ = Describe("Hostile guest kubeconfigs", func() {
	// A tenant writes its Cluster's `<name>-kubeconfig` Secret. Handed to client-go as it is (CAPI
	// core's ClusterCache does that), a tokenFile sends the reader's own ServiceAccount token to
	// the tenant's server, and exec would run the tenant's program in the reader (CAPI's
	// ClusterCache refuses exec since v1.14; v1.13's ran it). The shipped manager runs a
	// ClusterCache too, and reads the Secret through its kubeconfig policy.
	It("never makes the manager send a file's content or run a program, while CAPI core's own ClusterCache sends the file's content", func() {
		server := newTenantServer()
		defer server.Close()
		dir := GinkgoT().TempDir()
		token := filepath.Join(dir, "token")
		Expect(os.WriteFile(token, []byte("readers-own-token"), 0o600)).To(Succeed())
		// The program writes which executable ran it.
		marker := filepath.Join(dir, "ran-by")

		byFile := provisionedCluster("guest-kubeconfig-a", "by-file")
		Expect(mgmt().Create(ctx, kubeconfigSecret(byFile.Namespace, byFile.Name, tenantKubeconfig(server, func(u *clientcmdapi.AuthInfo) {
			u.TokenFile = token
		})))).To(Succeed())
		byExec := provisionedCluster("guest-kubeconfig-a", "by-exec")
		Expect(mgmt().Create(ctx, kubeconfigSecret(byExec.Namespace, byExec.Name, tenantKubeconfig(server, func(u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{
				APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh",
				Args:            []string{"-c", "readlink /proc/$PPID/exe >> " + marker + "; echo '{}'"},
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			}
		})))).To(Succeed())

		// The exposure is real: CAPI core's ClusterCache (in this test process) sends the file's
		// content.
		Eventually(func(g Gomega) {
			g.Expect(server.seen()).To(ContainElement(And(ContainSubstring(capiCoreAgent), ContainSubstring("readers-own-token"))))
		}).Should(Succeed())

		// The manager refuses both and says so on each Cluster, naming the field only.
		for _, c := range []struct {
			cluster *clusterv1.Cluster
			field   string
		}{{byFile, "users[tenant].user.tokenFile"}, {byExec, "users[tenant].user.exec"}} {
			Eventually(func(g Gomega) {
				events := &corev1.EventList{}
				g.Expect(mgmt().List(ctx, events, client.InNamespace(c.cluster.Namespace))).To(Succeed())
				var found []string
				for _, e := range events.Items {
					if e.InvolvedObject.Kind == "Cluster" && e.InvolvedObject.Name == c.cluster.Name && e.Reason == controllers.GuestKubeconfigRefusedReason {
						found = append(found, e.Message)
					}
				}
				g.Expect(found).To(ContainElement(ContainSubstring(c.field)))
				g.Expect(strings.Join(found, "\n")).NotTo(ContainSubstring(dir), "the refused value is not quoted")
			}).Should(Succeed())
		}
		self, err := os.Executable()
		Expect(err).NotTo(HaveOccurred())
		manager, err := filepath.EvalSymlinks(providerOptions.Binary)
		Expect(err).NotTo(HaveOccurred())
		var runners []string
		Consistently(func(g Gomega) {
			for _, r := range server.seen() {
				g.Expect(r).NotTo(ContainSubstring(managerAgent), "the manager made no request to the tenant's server")
			}
			ran, _ := os.ReadFile(marker)
			runners = strings.Fields(string(ran))
			g.Expect(runners).NotTo(ContainElement(manager), "the manager ran the program")
			// CAPI v1.14's ClusterCache (in this process) refuses exec.
			g.Expect(runners).NotTo(ContainElement(self), "CAPI core's ClusterCache ran the program")
		}, 3*time.Second).Should(Succeed())
		// Another provider's manager built on an earlier CAPI (the bed's RKE2 control-plane
		// provider, when an earlier spec started it) may run it: the shipped management webhook
		// (the next spec) is what stops that.
		if len(runners) > 0 {
			GinkgoWriter.Printf("other managers ran the hostile kubeconfig's program: %v\n", runners)
		}
	})

	It("are refused in front of every reader by the shipped management webhook, inline ones are not", func() {
		remove, err := testBed.Provider.ApplyValidatingWebhookFile(ctx, "config/management/guest-kubeconfig-webhook.yaml")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(remove)
		server := newTenantServer()
		defer server.Close()
		namespace := "guest-kubeconfig-b"
		cluster := provisionedCluster(namespace, "guarded")
		hostile := tenantKubeconfig(server, func(u *clientcmdapi.AuthInfo) {
			u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		})

		// The webhook may take a moment to be called after it is created.
		Eventually(func() error {
			return mgmt().Create(ctx, kubeconfigSecret(namespace, cluster.Name, hostile))
		}).Should(MatchError(And(ContainSubstring("users[tenant].user.tokenFile"), Not(ContainSubstring("/var/run")))))

		// An inline kubeconfig is written, and cannot be turned into a hostile one.
		inline := kubeconfigSecret(namespace, cluster.Name, tenantKubeconfig(server, func(u *clientcmdapi.AuthInfo) { u.Token = "guest-token" }))
		Expect(mgmt().Create(ctx, inline)).To(Succeed())
		inline.Data["value"] = tenantKubeconfig(server, func(u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/true"}
		})
		Expect(mgmt().Update(ctx, inline)).To(MatchError(ContainSubstring("users[tenant].user.exec")))

		// Other Secrets are not the webhook's business.
		Expect(mgmt().Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "notes"},
			Data:       map[string][]byte{"value": hostile},
		})).To(Succeed())

		// No reader ever saw the refused kubeconfig: the tenant's server got only the inline
		// token, from CAPI core and the manager alike.
		Eventually(server.seen).ShouldNot(BeEmpty())
		Consistently(func(g Gomega) {
			for _, r := range server.seen() {
				g.Expect(r).To(HaveSuffix("auth=Bearer guest-token"))
			}
		}, 2*time.Second).Should(Succeed())
	})
})
