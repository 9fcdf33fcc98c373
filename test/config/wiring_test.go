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

package config_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The test bed calls the webhooks at a loopback URL instead of through their Service (nothing
// routes ClusterIPs here), so the Service wiring a cluster uses is checked here, statically:
// every webhook names the webhook Service on port 443, the Service forwards to the container's
// webhook port, the Certificate is valid for the Service's DNS names and lands in the Secret the
// Deployment mounts where the manager reads its certificate.
func TestWebhookServiceWiring(t *testing.T) {
	g := NewWithT(t)
	objs := render(t)
	svc := convert[corev1.Service](t, ofKind(objs, "Service")[0])
	d := convert[appsv1.Deployment](t, ofKind(objs, "Deployment")[0])
	manager := d.Spec.Template.Spec.Containers[0]
	cert := ofKind(objs, "Certificate")[0]

	var refs []*admissionv1.ServiceReference
	for _, u := range ofKind(objs, "MutatingWebhookConfiguration") {
		for _, w := range convert[admissionv1.MutatingWebhookConfiguration](t, u).Webhooks {
			refs = append(refs, w.ClientConfig.Service)
		}
	}
	for _, u := range ofKind(objs, "ValidatingWebhookConfiguration") {
		for _, w := range convert[admissionv1.ValidatingWebhookConfiguration](t, u).Webhooks {
			refs = append(refs, w.ClientConfig.Service)
		}
	}
	g.Expect(refs).NotTo(BeEmpty())
	for _, ref := range refs {
		g.Expect(ref).NotTo(BeNil())
		g.Expect(ref.Name).To(Equal(svc.Name))
		g.Expect(ref.Namespace).To(Equal(svc.Namespace))
		g.Expect(*ref.Path).To(HavePrefix("/"))
		port := int32(443)
		if ref.Port != nil {
			port = *ref.Port
		}
		g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Port", port)))
	}
	g.Expect(svc.Spec.Ports[0].TargetPort).To(Equal(intstr.FromString("webhook-server")))
	i := slices.IndexFunc(manager.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook-server" })
	g.Expect(i).To(BeNumerically(">=", 0), "the container declares the webhook port")
	g.Expect(manager.Args).NotTo(ContainElement(HavePrefix("--webhook-port")), "the manager's default port")
	g.Expect(manager.Ports[i].ContainerPort).To(Equal(int32(9443)), "the manager's --webhook-port default")
	for _, sel := range svc.Spec.Selector {
		g.Expect(d.Spec.Template.Labels).To(ContainElement(sel), "the Service selects the manager's pods")
	}

	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	g.Expect(dnsNames).To(ContainElements(svc.Name+"."+svc.Namespace+".svc", svc.Name+"."+svc.Namespace+".svc.cluster.local"))
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	var mounted string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secretName {
			mounted = v.Name
		}
	}
	g.Expect(mounted).NotTo(BeEmpty(), "the Deployment mounts the Certificate's Secret")
	g.Expect(manager.VolumeMounts).To(ContainElement(And(HaveField("Name", mounted),
		HaveField("MountPath", "/tmp/k8s-webhook-server/serving-certs"))), "where --webhook-cert-dir defaults to")
}

// The flags the test bed adds to the Deployment's arguments are the only ones a process outside
// a pod needs; each exists, and none is set by the Deployment already.
func TestBedOverridesOnlyWhatAProcessOutsideAPodNeeds(t *testing.T) {
	g := NewWithT(t)
	g.Expect(bed.ProcessOverrides).To(ConsistOf("--kubeconfig", "--health-addr", "--webhook-port", "--webhook-cert-dir"))
	d := convert[appsv1.Deployment](t, ofKind(render(t), "Deployment")[0])
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		for _, o := range bed.ProcessOverrides {
			g.Expect(strings.HasPrefix(arg, o)).To(BeFalse(), "the Deployment sets %s itself", o)
		}
	}
	help, _ := exec.Command("go", "run", testenv.RepoRoot(), "--help").CombinedOutput()
	for _, o := range bed.ProcessOverrides {
		g.Expect(string(help)).To(ContainSubstring(o+" "), "the manager has a %s flag", o)
	}
	g.Expect(d.Spec.Template.Spec.Containers[0].Env).To(ContainElement(And(HaveField("Name", "POD_NAMESPACE"),
		HaveField("ValueFrom.FieldRef.FieldPath", "metadata.namespace"))), "leader election finds its namespace outside a pod too")
}

// The manager's Go runtime knows the container's memory limit (GOMEMLIMIT, in bytes, from the
// Downward API), and the bed starts it with the value the kubelet would give.
func TestTheManagerKnowsItsMemoryLimit(t *testing.T) {
	g := NewWithT(t)
	d := convert[appsv1.Deployment](t, ofKind(render(t), "Deployment")[0])
	c := d.Spec.Template.Spec.Containers[0]
	g.Expect(c.Env).To(ContainElement(And(HaveField("Name", "GOMEMLIMIT"),
		HaveField("ValueFrom.ResourceFieldRef.ContainerName", c.Name),
		HaveField("ValueFrom.ResourceFieldRef.Resource", "limits.memory"))))
	g.Expect(c.Resources.Limits.Memory().String()).To(Equal("512Mi"))
	env, err := bed.ContainerEnv(c, d)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(ContainElement("GOMEMLIMIT=536870912"))
}
