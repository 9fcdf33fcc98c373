package harvester

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

// A kubeconfig that does not parse must not have its content echoed into conditions: YAML
// errors quote the offending value, which can be the token.
func TestKubeconfigErrorNeverEchoesContent(t *testing.T) {
	g := NewWithT(t)
	for _, bad := range []string{
		"users: s3cr3t-t0ken-value",
		"apiVersion: v1\nclusters:\n- cluster: s3cr3t-t0ken-value\n",
		"{\"users\": \"s3cr3t-t0ken-value\"",
	} {
		_, err := clientcmd.RESTConfigFromKubeConfig([]byte(bad))
		g.Expect(err).To(HaveOccurred(), bad)
		msg := kubeconfigError(err)
		g.Expect(msg).NotTo(ContainSubstring("s3cr3t"), "parser said: %v", err)
		g.Expect(msg).NotTo(BeEmpty())
	}
}

func TestHashedNamesAreUniqueLabels(t *testing.T) {
	g := NewWithT(t)
	a, b := LoadBalancerName("a-b", "c"), LoadBalancerName("a", "b-c")
	g.Expect(a).NotTo(Equal(b))
	g.Expect(GuestServiceAccountName("ns", "My_Cluster.1")).To(MatchRegexp(`^guest-my-cluster-1-[0-9a-f]{10}$`))
	g.Expect(len(LoadBalancerName("ns", strings.Repeat("x", 100)))).To(BeNumerically("<=", 63))
}
