package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ccmapp "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider/app"
)

// CCMDeployment is the Deployment of our cloud controller manager in templates/addons/ccm.yaml.
const CCMDeployment = "harvester-cloud-controller-manager"

var quietKlogOnce sync.Once

// quietKlog lets several CCMs share the process, and keeps their logs out of the test output
// unless TEST_LOG is set: the framework applies its (default) logging configuration on every
// start, which is applied here first so that those become no-ops and klog's logger stays.
func quietKlog() {
	quietKlogOnce.Do(func() {
		logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
		_ = logsapi.ValidateAndApply(logs.NewOptions(), utilfeature.DefaultFeatureGate)
		// Everything the CCMs log (at the verbosity their Deployment sets: klog's default) is
		// kept for tests that read it, e.g. to check that no secret ever reaches a log.
		klog.SetLogger(funcr.New(func(prefix, args string) {
			ccmLog.mu.Lock()
			defer ccmLog.mu.Unlock()
			ccmLog.buf.WriteString(prefix + " " + args + "\n")
			if os.Getenv("TEST_LOG") != "" {
				fmt.Fprintln(os.Stderr, prefix, args)
			}
		}, funcr.Options{}))
	})
}

// ccmLog holds what klog wrote in this process: the guests' CCMs' logs.
var ccmLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// CCMLog returns what the guests' CCMs (and anything else using klog in this process) logged.
func CCMLog() string {
	ccmLog.mu.Lock()
	defer ccmLog.mu.Unlock()
	return ccmLog.buf.String()
}

// ccmPod plays the kubelet of the CCM's pod in a guest: once the ClusterResourceSet has
// delivered the CCM's Deployment and the Secrets it mounts, it runs our CCM command in-process
// with the Deployment's own arguments, the Secret volumes written to a directory (and kept in
// sync, as kubelet does, so a renewed Harvester token reaches the CCM's tokenFile) and the
// credentials of the Deployment's ServiceAccount, so the CCM works within the RBAC the addon
// grants it. Two flags are overridden: --leader-elect=false (a lost lease ends the process,
// here the whole test run) and --secure-port=0 (the guests' CCMs share one process).
type ccmPod struct {
	guest *Cluster
	dir   string
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	err   error
	// stopOnce: the pod stops when its nodes are gone or with the guest, whichever is first.
	stopOnce sync.Once
	stopErr  error
	// synced are the resourceVersions of the Secrets written, by name.
	synced map[string]string
}

// RunCCM starts the CCM pod stand-in of g; it stops with g.
func (g *Cluster) RunCCM(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "ccm-"+g.Name+"-")
	if err != nil {
		return err
	}
	quietKlog()
	p := &ccmPod{guest: g, dir: dir, stop: make(chan struct{}), done: make(chan struct{}), synced: map[string]string{}}
	g.ccm = p
	go p.run(ctx)
	return nil
}

func (p *ccmPod) run(ctx context.Context) {
	defer close(p.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	var exited chan struct{}
	defer func() {
		if exited != nil {
			<-exited
		}
	}()
	// Like kubelet, look again periodically: for the pod's objects before it starts, for
	// changed Secrets after.
	_ = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		args, ready, err := p.sync(ctx)
		if err != nil || !ready || exited != nil {
			return false, nil //nolint:nilerr // retried like a pod that cannot start yet
		}
		command, err := ccmapp.NewCommand(p.stop)
		if err != nil {
			p.setErr(err)
			return true, nil
		}
		command.SetArgs(args)
		command.SetOut(io.Discard)
		command.SetErr(io.Discard)
		exited = make(chan struct{})
		go func() {
			defer close(exited)
			p.setErr(command.Execute())
		}()
		return false, nil
	})
}

// sync writes the pod's Secret volumes and credentials and returns the CCM's arguments; ready
// is false while the Deployment, its Secrets or its ServiceAccount are not in the guest yet.
func (p *ccmPod) sync(ctx context.Context) ([]string, bool, error) {
	c := p.guest.Env.Client
	deploy := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: CCMDeployment}, deploy); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	spec := deploy.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		return nil, false, errors.New("the CCM Deployment has no container")
	}
	container := spec.Containers[0]
	mounts := map[string]string{}
	for _, m := range container.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			dir := filepath.Join(p.dir, m.Name)
			ok, err := p.writeSecret(ctx, v.Secret.SecretName, dir, m.MountPath)
			if err != nil || !ok {
				return nil, false, err
			}
			mounts[m.MountPath] = dir
		}
	}
	kubeconfig, err := p.writeKubeconfig(ctx, spec.ServiceAccountName)
	if err != nil || kubeconfig == "" {
		return nil, false, err
	}
	args := make([]string, 0, len(container.Args)+3)
	for _, a := range container.Args {
		if strings.HasPrefix(a, "--leader-elect=") || strings.HasPrefix(a, "--secure-port=") {
			continue
		}
		for mountPath, dir := range mounts {
			a = strings.ReplaceAll(a, mountPath, dir)
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0")
	return args, true, nil
}

// writeSecret writes a Secret's keys into dir when it changed, with the mount path in their
// content pointing at dir instead (the cloud-config's tokenFile names the mounted token).
func (p *ccmPod) writeSecret(ctx context.Context, name, dir, mountPath string) (bool, error) {
	secret := &corev1.Secret{}
	if err := p.guest.Env.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: name}, secret); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if p.synced[name] == secret.ResourceVersion {
		return true, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	for key, value := range secret.Data {
		content := strings.ReplaceAll(string(value), mountPath, dir)
		// Write then rename, as kubelet swaps a volume's files atomically.
		tmp := filepath.Join(dir, "."+key+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			return false, err
		}
		if err := os.Rename(tmp, filepath.Join(dir, key)); err != nil {
			return false, err
		}
	}
	p.synced[name] = secret.ResourceVersion
	return true, nil
}

// writeKubeconfig writes, once, a kubeconfig for the guest with a token of the ServiceAccount,
// as a pod's in-cluster credentials; "" while the ServiceAccount does not exist.
func (p *ccmPod) writeKubeconfig(ctx context.Context, serviceAccount string) (string, error) {
	path := filepath.Join(p.dir, "kubeconfig")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if serviceAccount == "" {
		return "", errors.New("the CCM Deployment names no ServiceAccount")
	}
	sa := &corev1.ServiceAccount{}
	if err := p.guest.Env.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: serviceAccount}, sa); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := p.guest.Env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for %s: %w", serviceAccount, err)
	}
	cfg := p.guest.Env.Config
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"guest": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{serviceAccount: {Token: tr.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"guest": {Cluster: "guest", AuthInfo: serviceAccount}},
		CurrentContext: "guest",
	})
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, data, 0o600)
}

func (p *ccmPod) setErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// CCMErr is what the guest's CCM command failed with, if it stopped on its own (nil while it
// runs, after a normal stop, or without a CCM): tests show it rather than time out blind.
func (g *Cluster) CCMErr() error {
	if g.ccm == nil {
		return nil
	}
	g.ccm.mu.Lock()
	defer g.ccm.mu.Unlock()
	return g.ccm.err
}

// Stop stops the CCM and waits for it.
func (p *ccmPod) Stop() error {
	p.stopOnce.Do(func() {
		close(p.stop)
		<-p.done
		p.stopErr = os.RemoveAll(p.dir)
	})
	return p.stopErr
}

// CCMRunning tells whether the guest's CCM stand-in runs (false when it has none).
func (g *Cluster) CCMRunning() bool {
	if g.ccm == nil {
		return false
	}
	select {
	case <-g.ccm.done:
		return false
	default:
		return true
	}
}
