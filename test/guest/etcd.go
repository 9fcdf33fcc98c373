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

package guest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// etcdPort is the client port of kubeadm's etcd static pod, which KCP's etcd client port-forwards
// to (sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg, EtcdClientGenerator).
const etcdPort = 2379

// stackedEtcd is the etcd a control plane stacks on its machines (kubeadm's, RKE2's embedded
// one): one real etcd process per control-plane node (the envtest etcd binary), serving with
// certificates of the cluster's etcd CA from the bootstrap data and requiring client
// certificates of it, as kubeadm's static pod and RKE2's etcd do. The first server starts the
// first member; a joining one is added as a learner, started and promoted once it has caught
// up (kubeadm's learner mode; RKE2 does the same); a member whose VM is gone stops but stays in
// the member list until someone removes it (KCP through its etcd client, CAPRKE2 through RKE2's
// Node annotation, see etcdRemoval). The guest's kube-apiserver keeps its own storage: this
// etcd is what the control-plane providers (through the kubelet endpoint, see kubeletNetwork)
// check, change and move leadership in.
type stackedEtcd struct {
	binary string
	dir    string
	ca     *clusterCA
	// memberName is the etcd member name of a node: kubeadm uses the node's name, RKE2 the
	// node's name and a random suffix.
	memberName func(node string) string

	// change serialises membership changes (join, remove), which call etcd; mu guards members
	// and their processes, and is never held across a call to etcd, so that a port-forward to
	// a member does not wait for a learner's promotion.
	change sync.Mutex
	mu     sync.Mutex
	// members by node name.
	members map[string]*etcdMember
}

type etcdMember struct {
	name                 string
	clientAddr, peerAddr string
	// initialCluster and state are the member's first start's; a restart reads its data
	// directory instead.
	initialCluster, state string
	proc                  *process
}

// newStackedEtcd returns the stacked etcd of a cluster whose etcd CA is caCert and caKey.
func newStackedEtcd(caCert, caKey []byte, dir string, memberName func(string) string) (*stackedEtcd, error) {
	ca, err := parseClusterCA(caCert, caKey)
	if err != nil {
		return nil, fmt.Errorf("the etcd CA: %w", err)
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	return &stackedEtcd{binary: filepath.Join(assets, "etcd"), dir: dir, ca: ca, memberName: memberName, members: map[string]*etcdMember{}}, nil
}

// kubeadmEtcd returns the stacked etcd of a kubeadm cluster whose ClusterConfiguration is
// clusterConfiguration and whose etcd CA is in files, members named after their nodes; nil
// when the cluster uses an external etcd, which kubeadm then does not run.
func kubeadmEtcd(clusterConfiguration string, files map[string][]byte, dir string) (*stackedEtcd, error) {
	var cc struct {
		Etcd struct {
			External *struct{} `json:"external"`
		} `json:"etcd"`
	}
	if err := yaml.Unmarshal([]byte(clusterConfiguration), &cc); err != nil {
		return nil, fmt.Errorf("reading the ClusterConfiguration: %w", err)
	}
	if cc.Etcd.External != nil {
		return nil, nil
	}
	return newStackedEtcd(files[pkiDir+"etcd/ca.crt"], files[pkiDir+"etcd/ca.key"], dir, func(node string) string { return node })
}

// join makes node a running, voting member: the first member starts a new cluster, later ones
// are added as learners and promoted. It is idempotent: a node's agent calls it on every
// reconcile of its VM.
func (e *stackedEtcd) join(ctx context.Context, node string) error {
	e.change.Lock()
	defer e.change.Unlock()
	e.mu.Lock()
	m := e.members[node]
	e.mu.Unlock()
	if m != nil {
		if e.process(m).exited() != nil {
			// The VM was stopped and runs again: kubelet starts the static pod, which finds
			// its data (and exits again at once if the member was removed meanwhile).
			return e.start(ctx, m)
		}
		return e.promote(ctx, m)
	}
	m, err := e.newMember(e.memberName(node))
	if err != nil {
		return err
	}
	initialCluster := []string{m.name + "=https://" + m.peerAddr}
	m.state = "new"
	if running := e.running(); len(running) > 0 {
		c, err := e.client(running)
		if err != nil {
			return err
		}
		defer c.Close()
		added, err := c.MemberAddAsLearner(ctx, []string{"https://" + m.peerAddr})
		if err != nil {
			return fmt.Errorf("adding %s to etcd: %w", m.name, err)
		}
		m.state = "existing"
		for _, member := range added.Members {
			if member.ID != added.Member.ID && member.Name != "" {
				initialCluster = append(initialCluster, member.Name+"="+member.PeerURLs[0])
			}
		}
	}
	m.initialCluster = strings.Join(initialCluster, ",")
	if err := e.start(ctx, m); err != nil {
		return err
	}
	e.mu.Lock()
	e.members[node] = m
	e.mu.Unlock()
	if m.state == "new" {
		return nil
	}
	return e.promote(ctx, m)
}

// promote promotes node's member if it is a learner, waiting for it to catch up as kubeadm does.
func (e *stackedEtcd) promote(ctx context.Context, m *etcdMember) error {
	// A learner answers no member calls: ask the others. A member alone votes.
	others := slices.DeleteFunc(e.running(), func(addr string) bool { return addr == m.clientAddr })
	if len(others) == 0 {
		return nil
	}
	c, err := e.client(others)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		list, err := c.MemberList(ctx)
		if err == nil {
			// A learner has no name until it has started: find it by its peer URL.
			i := slices.IndexFunc(list.Members, func(member *etcdserverpb.Member) bool {
				return slices.Contains(member.PeerURLs, "https://"+m.peerAddr)
			})
			if i < 0 {
				return fmt.Errorf("the etcd member %s is not in its cluster's member list", m.name)
			}
			if !list.Members[i].IsLearner {
				return nil
			}
			if _, err = c.MemberPromote(ctx, list.Members[i].ID); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promoting the etcd member %s: %w", m.name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// remove removes node's member from the cluster, as RKE2's and K3s's member controller does when
// its Node asks for it, and returns the member's name; etcd stops the removed member's process
// itself.
func (e *stackedEtcd) remove(ctx context.Context, node string) (string, error) {
	e.change.Lock()
	defer e.change.Unlock()
	e.mu.Lock()
	m := e.members[node]
	e.mu.Unlock()
	if m == nil {
		return "", fmt.Errorf("node %s runs no etcd member", node)
	}
	running := e.running()
	if len(running) == 0 {
		return "", fmt.Errorf("no etcd member runs to remove %s", m.name)
	}
	c, err := e.client(running)
	if err != nil {
		return "", err
	}
	defer c.Close()
	list, err := c.MemberList(ctx)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(list.Members, func(member *etcdserverpb.Member) bool {
		return slices.Contains(member.PeerURLs, "https://"+m.peerAddr)
	})
	if i >= 0 {
		if _, err := c.MemberRemove(ctx, list.Members[i].ID); err != nil {
			return "", fmt.Errorf("removing the etcd member %s: %w", m.name, err)
		}
	}
	return m.name, nil
}

// stop stops node's member, as powering its VM off does; it stays in the member list.
func (e *stackedEtcd) stop(node string) {
	e.mu.Lock()
	m := e.members[node]
	e.mu.Unlock()
	if m != nil {
		e.process(m).stop()
	}
}

// stopAll stops every member.
func (e *stackedEtcd) stopAll() {
	e.mu.Lock()
	var procs []*process
	for _, m := range e.members {
		procs = append(procs, m.proc)
	}
	e.mu.Unlock()
	for _, p := range procs {
		p.stop()
	}
}

// process returns m's current process.
func (e *stackedEtcd) process(m *etcdMember) *process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return m.proc
}

// memberOf returns the name of node's member; empty when it has none.
func (e *stackedEtcd) memberOf(node string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.members[node]; m != nil {
		return m.name
	}
	return ""
}

// clientAddr returns the address node's member serves clients on, while it runs.
func (e *stackedEtcd) clientAddr(node string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.members[node]
	if m == nil || m.proc.exited() != nil {
		return "", false
	}
	return m.clientAddr, true
}

// EtcdMembers returns the names of the members of the guest's stacked etcd and which of them
// are learners, as etcd lists them.
func (c *Cluster) EtcdMembers(ctx context.Context) (names, learners []string, err error) {
	if c.etcd == nil {
		return nil, nil, errors.New("the guest runs no stacked etcd")
	}
	return c.etcd.memberNames(ctx)
}

func (e *stackedEtcd) memberNames(ctx context.Context) ([]string, []string, error) {
	c, err := e.client(e.running())
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	list, err := c.MemberList(ctx)
	if err != nil {
		return nil, nil, err
	}
	var names, learners []string
	for _, m := range list.Members {
		names = append(names, m.Name)
		if m.IsLearner {
			learners = append(learners, m.Name)
		}
	}
	slices.Sort(names)
	return names, learners, nil
}

// running returns the client addresses of the running members.
func (e *stackedEtcd) running() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var addrs []string
	for _, m := range e.members {
		if m.proc.exited() == nil {
			addrs = append(addrs, m.clientAddr)
		}
	}
	return addrs
}

func (e *stackedEtcd) newMember(node string) (*etcdMember, error) {
	ports, err := testenv.FreeLoopbackPorts(2)
	if err != nil {
		return nil, err
	}
	return &etcdMember{
		name:       node,
		clientAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		peerAddr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
	}, nil
}

// start writes the member's serving and peer certificate (kubeadm's etcd/server and etcd/peer,
// one here) and starts its process.
func (e *stackedEtcd) start(ctx context.Context, m *etcdMember) error {
	dir := filepath.Join(e.dir, m.name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cert, key, err := e.ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: m.name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost", m.name},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	})
	if err != nil {
		return fmt.Errorf("issuing the etcd certificate of %s: %w", m.name, err)
	}
	files := map[string][]byte{"ca.crt": e.ca.certPEM, "server.crt": cert, "server.key": key}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	args := []string{
		"--name=" + m.name, "--data-dir=" + path("data"),
		"--listen-client-urls=https://" + m.clientAddr, "--advertise-client-urls=https://" + m.clientAddr,
		"--listen-peer-urls=https://" + m.peerAddr, "--initial-advertise-peer-urls=https://" + m.peerAddr,
		"--initial-cluster=" + m.initialCluster, "--initial-cluster-state=" + m.state,
		"--cert-file=" + path("server.crt"), "--key-file=" + path("server.key"),
		"--trusted-ca-file=" + path("ca.crt"), "--client-cert-auth=true",
		"--peer-cert-file=" + path("server.crt"), "--peer-key-file=" + path("server.key"),
		"--peer-trusted-ca-file=" + path("ca.crt"), "--peer-client-cert-auth=true",
		// What the bed cannot afford on two cores, and which changes nothing KCP sees.
		"--unsafe-no-fsync=true", "--log-level=warn",
	}
	p, err := startProcess(ctx, "etcd "+m.name, e.binary, &logBuffer{}, nil, args...)
	if err != nil {
		return err
	}
	e.mu.Lock()
	m.proc = p
	e.mu.Unlock()
	return nil
}

// client returns an etcd client of the bed with a client certificate of the etcd CA, as
// kubeadm's etcdctl calls use.
func (e *stackedEtcd) client(addrs []string) (*clientv3.Client, error) {
	certPEM, keyPEM, err := e.ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-etcd-healthcheck-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(e.ca.cert)
	endpoints := make([]string, len(addrs))
	for i, a := range addrs {
		endpoints[i] = "https://" + a
	}
	return clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	})
}
