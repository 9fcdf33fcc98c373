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
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// CCMDeployment is the Deployment of our cloud controller manager in templates/addons/ccm.yaml.
const CCMDeployment = "harvester-cloud-controller-manager"

// ccmLabel is the label the CCM Deployment's pods carry.
const ccmLabel = "app.kubernetes.io/name"

func isCCMPod(pod *corev1.Pod) bool {
	return pod.Namespace == "kube-system" && pod.Labels[ccmLabel] == CCMDeployment
}

// ccmContainer is our CCM's container in its pod, run as the kubelet of the pod's node would:
// the binary of the CCM image (its entrypoint), with the pod's command arguments and env, its
// Secret volumes written to a directory (and kept in step with their Secrets, so a renewed
// Harvester token reaches the CCM's tokenFile), and a token of the pod's ServiceAccount bound to
// the pod. What a process outside a pod needs differently, and only that, is overridden:
//   - --kubeconfig names a kubeconfig with that token and the guest apiserver's address, instead
//     of the in-cluster configuration (whose token path is fixed);
//   - Secret volumes live in a directory of their own instead of their mountPath: arguments and
//     file contents naming the mountPath are rewritten to it;
//   - --secure-port is a free loopback port instead of the declared host port (10258): the guests
//     of one test run share the host's loopback, as their nodes would not.
//
// Leader election stays on: a lost lease ends the process, and the kubelet restarts it.
type ccmContainer struct {
	uid      types.UID
	dir      string
	synced   map[string]string
	proc     *process
	restarts int
	endedAt  time.Time
}

// runCCM starts or keeps running the CCM container of pod; started is false while the pod's
// Secrets or ServiceAccount are missing or the container waits out a restart back-off (retry).
func (k *kubelets) runCCM(ctx context.Context, pod *corev1.Pod) (started bool, retry time.Duration, err error) {
	key := client.ObjectKeyFromObject(pod)
	k.mu.Lock()
	c := k.ccm[key]
	k.mu.Unlock()
	if c != nil && c.uid != pod.UID {
		k.stopCCM(key)
		c = nil
	}
	if c == nil {
		dir, err := os.MkdirTemp("", "ccm-"+k.g.Name+"-")
		if err != nil {
			return false, 0, err
		}
		c = &ccmContainer{uid: pod.UID, dir: dir, synced: map[string]string{}}
		k.mu.Lock()
		k.ccm[key] = c
		k.mu.Unlock()
	}
	if len(pod.Spec.Containers) == 0 {
		return false, 0, errors.New("the CCM pod has no container")
	}
	container := pod.Spec.Containers[0]
	mounts, ok, err := k.syncVolumes(ctx, pod, container, c)
	if err != nil || !ok {
		return false, time.Second, err
	}
	if c.proc != nil {
		if ended := c.proc.exited(); ended == nil {
			return true, 0, nil
		} else if c.endedAt.IsZero() {
			c.endedAt = time.Now()
			c.restarts++
			k.setExited(fmt.Errorf("the CCM container of pod %s ended (restart %d): %w\n%s", key, c.restarts, ended, c.proc.log.tail(3000)))
		}
		if wait := time.Until(c.endedAt.Add(backoff(c.restarts))); wait > 0 {
			return false, wait, nil
		}
	}
	args, env, err := k.ccmCommand(ctx, pod, container, c, mounts)
	if err != nil || args == nil {
		return false, time.Second, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false, 0, nil // the guest is stopping
	}
	proc, err := startProcess(ctx, "the CCM", k.ccmBinary, newCCMLog(), env, args...)
	if err != nil {
		return false, 0, err
	}
	c.proc, c.endedAt = proc, time.Time{}
	k.exited = nil
	go func() {
		<-proc.done
		k.exits <- event.TypedGenericEvent[*corev1.Pod]{Object: pod}
	}()
	return true, 0, nil
}

// ccmCommand is the container's command line and environment with the overrides above; nil
// while the ServiceAccount does not exist.
func (k *kubelets) ccmCommand(ctx context.Context, pod *corev1.Pod, container corev1.Container, c *ccmContainer, mounts map[string]string) ([]string, []string, error) {
	if len(container.Command) == 0 || path.Base(container.Command[0]) != filepath.Base(k.ccmBinary) {
		return nil, nil, fmt.Errorf("the CCM container's command %q is not the image's entrypoint %s", container.Command, filepath.Base(k.ccmBinary))
	}
	kubeconfig, err := k.writeKubeconfig(ctx, pod, c)
	if err != nil || kubeconfig == "" {
		return nil, nil, err
	}
	port, err := testenv.FreeLoopbackPort()
	if err != nil {
		return nil, nil, err
	}
	args := []string{}
	for _, a := range append(container.Command[1:], container.Args...) {
		if strings.HasPrefix(a, "--secure-port=") || strings.HasPrefix(a, "--kubeconfig=") {
			continue
		}
		for mountPath, dir := range mounts {
			a = strings.ReplaceAll(a, mountPath, dir)
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+kubeconfig, "--secure-port="+strconv.Itoa(port))
	env := []string{} // not nil: the container sees its own environment only
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			env = append(env, e.Name+"="+podField(pod, e.ValueFrom.FieldRef.FieldPath))
		default:
			return nil, nil, fmt.Errorf("the CCM container's env %s: only values and field references are played", e.Name)
		}
	}
	return args, env, nil
}

func podField(pod *corev1.Pod, field string) string {
	switch field {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName
	case "status.hostIP", "status.podIP":
		return pod.Status.HostIP
	}
	return ""
}

// syncVolumes writes the container's Secret volumes; ok is false while one is missing (the
// pod's container cannot be created yet). It returns their directories by mountPath.
func (k *kubelets) syncVolumes(ctx context.Context, pod *corev1.Pod, container corev1.Container, c *ccmContainer) (map[string]string, bool, error) {
	mounts := map[string]string{}
	for _, m := range container.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			dir := filepath.Join(c.dir, m.Name)
			ok, err := k.writeSecret(ctx, pod.Namespace, v.Secret.SecretName, dir, m.MountPath, c)
			if err != nil || !ok {
				return nil, false, err
			}
			mounts[m.MountPath] = dir
		}
	}
	return mounts, true, nil
}

// writeSecret writes a Secret's keys into dir when it changed, with the mount path in their
// content pointing at dir instead (the cloud-config's tokenFile names the mounted token).
func (k *kubelets) writeSecret(ctx context.Context, namespace, name, dir, mountPath string, c *ccmContainer) (bool, error) {
	secret := &corev1.Secret{}
	if err := k.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if c.synced[name] == secret.ResourceVersion {
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
	c.synced[name] = secret.ResourceVersion
	return true, nil
}

// writeKubeconfig writes a kubeconfig for the guest with a token of the pod's ServiceAccount
// bound to the pod, as its projected in-cluster credentials; "" while the ServiceAccount does
// not exist.
func (k *kubelets) writeKubeconfig(ctx context.Context, pod *corev1.Pod, c *ccmContainer) (string, error) {
	sa := &corev1.ServiceAccount{}
	name := pod.Spec.ServiceAccountName
	if name == "" {
		name = "default"
	}
	if err := k.g.Env.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, sa); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if err := k.g.Env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for %s: %w", name, err)
	}
	cfg := k.g.Env.Config
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"guest": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: tr.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"guest": {Cluster: "guest", AuthInfo: name}},
		CurrentContext: "guest",
	})
	if err != nil {
		return "", err
	}
	file := filepath.Join(c.dir, "kubeconfig")
	return file, os.WriteFile(file, data, 0o600)
}

// stopCCM stops the CCM container of a pod, if it runs.
func (k *kubelets) stopCCM(key types.NamespacedName) {
	k.mu.Lock()
	c := k.ccm[key]
	delete(k.ccm, key)
	k.mu.Unlock()
	if c == nil {
		return
	}
	if c.proc != nil {
		c.proc.stop()
	}
	_ = os.RemoveAll(c.dir)
}

func (k *kubelets) stopAll() {
	k.mu.Lock()
	k.stopped = true
	keys := make([]types.NamespacedName, 0, len(k.ccm))
	for key := range k.ccm {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.stopCCM(key)
	}
}

func (k *kubelets) setExited(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.exited = err
}

// CCMErr says why the guest's CCM does not run, when it should: its pod is Pending (with the
// scheduler's reason) or its container ended (with the end of its log). nil while it runs,
// before its Deployment arrives, or in a guest without our CCM.
func (c *Cluster) CCMErr() error {
	k := c.kubelets
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pending != "" {
		return errors.New("the CCM does not run: " + k.pending)
	}
	for _, ctr := range k.ccm {
		if ctr.proc != nil && ctr.proc.exited() == nil {
			return nil
		}
	}
	return k.exited
}

// CCMRunning tells whether a CCM container of the guest runs.
func (c *Cluster) CCMRunning() bool {
	k := c.kubelets
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ctr := range k.ccm {
		if ctr.proc != nil && ctr.proc.exited() == nil {
			return true
		}
	}
	return false
}
