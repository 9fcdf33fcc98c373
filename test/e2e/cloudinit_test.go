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
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// cloudConfigSchemaErrors is testenv.CloudConfigSchemaErrors: what cloud-init's own schema
// check refuses in user data.
func cloudConfigSchemaErrors(userData []byte) (string, error) {
	return testenv.CloudConfigSchemaErrors(userData)
}

// expectValidUserDataOf checks the user data of every VM of a cluster's machines (named
// <cluster>-...) in a Harvester namespace with cloud-init's schema check, and returns how many
// VMs it checked.
func expectValidUserDataOf(target, cluster string) int {
	GinkgoHelper()
	vms := &kubevirtv1.VirtualMachineList{}
	Expect(harvesterClient().List(ctx, vms, client.InNamespace(target))).To(Succeed())
	checked := 0
	for _, vm := range vms.Items {
		if !strings.HasPrefix(vm.Name, cluster+"-") || vm.Spec.Template == nil {
			continue
		}
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if v.CloudInitNoCloud == nil || v.CloudInitNoCloud.UserDataSecretRef == nil {
				continue
			}
			secret := &corev1.Secret{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: v.CloudInitNoCloud.UserDataSecretRef.Name}, secret)).To(Succeed())
			refused, err := cloudConfigSchemaErrors(secret.Data["userdata"])
			Expect(err).NotTo(HaveOccurred(), "VM %s", vm.Name)
			Expect(refused).To(BeEmpty(), "cloud-init refuses the user data of VM %s", vm.Name)
			checked++
		}
	}
	Expect(checked).To(BeNumerically(">", 0), "no VM of cluster %s in %s has user data to check", cluster, target)
	return checked
}

var _ = Describe("cloud-init's own schema check", func() {
	It("refuses invalid cloud-config, in a multipart message too, and passes a valid one", func() {
		valid := []byte("#cloud-config\nruncmd:\n- echo ok\nwrite_files:\n- path: /etc/x\n  content: x\n")
		refused, err := cloudConfigSchemaErrors(valid)
		Expect(err).NotTo(HaveOccurred())
		Expect(refused).To(BeEmpty())

		invalid := []byte("#cloud-config\nruncmd: 5\n")
		refused, err = cloudConfigSchemaErrors(invalid)
		Expect(err).NotTo(HaveOccurred())
		Expect(refused).To(ContainSubstring("runcmd"))

		multi := []byte("Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd: 5\n--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n--b--\n")
		refused, err = cloudConfigSchemaErrors(multi)
		Expect(err).NotTo(HaveOccurred())
		Expect(refused).To(ContainSubstring("runcmd"), "the cloud-config part of a multipart message is checked")

		jinja := []byte(testenv.JinjaHeader + "\n#cloud-config\nhostname: '{{ ds.meta_data.local_hostname }}'\nruncmd: 5\n")
		refused, err = cloudConfigSchemaErrors(jinja)
		Expect(err).NotTo(HaveOccurred())
		Expect(refused).To(ContainSubstring("runcmd"), "a Jinja template is checked as cloud-init renders it")

		_, err = cloudConfigSchemaErrors([]byte(testenv.JinjaHeader + "\n#cloud-config\nhostname: '{{ ds.meta_data.no_such_key }}'\n"))
		Expect(err).To(MatchError(ContainSubstring("instance data cloud-init does not have")))

		_, err = cloudConfigSchemaErrors([]byte("#!/bin/sh\necho no cloud-config\n"))
		Expect(err).To(MatchError(ContainSubstring("no cloud-config")))
	})
})
