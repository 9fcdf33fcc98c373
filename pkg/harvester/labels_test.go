package harvester

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestVMNameKeepsLabelsAndHashesTheRest(t *testing.T) {
	g := NewWithT(t)

	// Every name that worked before stays: existing VMs are still found by it.
	for _, name := range []string{"cp-abcde", "md-0-7c9f8-x2kqz", strings.Repeat("a", 63)} {
		g.Expect(VMName(name)).To(Equal(name))
		g.Expect(MachineLabelValue(name)).To(Equal(name))
	}

	// CAPI names a machine after its MachineDeployment: two machines of one long deployment
	// share all but their last characters.
	deployment := "prod-eu-west-1-" + strings.Repeat("workers-gpu-a100-", 6)
	a, b := deployment+"7c9f8-x2kqz", deployment+"7c9f8-p4r7m"
	dotted := "worker.eu-west-1.example"
	for _, name := range []string{a, b, dotted, "Upper_Case.Name", strings.Repeat("9", 300), "-.-"} {
		vm := VMName(name)
		g.Expect(validation.IsDNS1123Label(vm)).To(BeEmpty(), "%q -> %q", name, vm)
		g.Expect(len(vm)).To(BeNumerically("<=", 63))
		g.Expect(VMName(name)).To(Equal(vm), "stable across calls")
		label := MachineLabelValue(name)
		g.Expect(validation.IsValidLabelValue(label)).To(BeEmpty(), "%q -> %q", name, label)
	}
	g.Expect(VMName(a)).NotTo(Equal(VMName(b)), "names that share a long prefix stay distinct")
	g.Expect(VMName(a)).To(HavePrefix("prod-eu-west-1-workers-gpu-a100-"), "the start stays readable")
	g.Expect(VMName(a)).To(MatchRegexp(`-[0-9a-f]{10}$`))
	g.Expect(MachineLabelValue(a)).To(Equal(VMName(a)), "a name too long for a label is labelled with the VM's name")
	g.Expect(VMName(dotted)).NotTo(Equal(dotted), "a dot is not allowed in a hostname")
	g.Expect(MachineLabelValue(dotted)).To(Equal(dotted), "but it fits a label value")
}

func TestLongMachineNamesReachTheVM(t *testing.T) {
	g := NewWithT(t)
	in := testInput()
	long := strings.Repeat("cluster-with-a-long-name-", 4) + "md-0-7c9f8-x2kqz"
	in.Machine.Name = long

	vm, err := BuildVM(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Name).To(Equal(VMName(long)))
	g.Expect(vm.Spec.Template.Spec.Hostname).To(Equal(vm.Name), "the guest's hostname is the VM's name")
	g.Expect(vm.Annotations).To(HaveKeyWithValue(AnnotationMachine, long))
	g.Expect(vm.Spec.Template.ObjectMeta.Annotations).To(HaveKeyWithValue(AnnotationMachine, long), "VMIs map back to the machine too")
	for _, labels := range []map[string]string{vm.Labels, vm.Spec.Template.ObjectMeta.Labels} {
		for k, v := range labels {
			g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), "label %s=%q", k, v)
		}
	}
	g.Expect(OwnedBy(vm.Labels, in.Machine)).To(BeTrue())

	ns, name, ok := MachineOf(vm)
	g.Expect(ok).To(BeTrue())
	g.Expect(ns + "/" + name).To(Equal(in.Machine.Namespace + "/" + long))

	// A VM made before the annotation existed maps back by its label.
	delete(vm.Annotations, AnnotationMachine)
	vm.Labels[LabelMachine] = "cp-abcde"
	_, name, _ = MachineOf(vm)
	g.Expect(name).To(Equal("cp-abcde"))

	g.Expect(cloudInitSecretOf(vm)).To(Equal(in.UserDataSecret), "the Secret is read from the VM, not derived from its name")
}
