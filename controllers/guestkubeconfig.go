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

package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// GuestKubeconfigRefusedReason is the reason of the Warning event on a Cluster whose
// `<cluster>-kubeconfig` Secret the manager refuses to use.
const GuestKubeconfigRefusedReason = "GuestKubeconfigRefused"

// guestKubeconfigReader is the Secret reader the manager gives CAPI's ClusterCache. The
// ClusterCache reads a Cluster's `<cluster>-kubeconfig` Secret and builds its client with
// client-go's loader, which honours tokenFile, exec, auth providers, file paths and proxies. That
// Secret lives in the tenant's namespace and the tenant can write it, so the manager would send
// its own ServiceAccount token to a server the tenant names, or run the tenant's program.
//
// The reader checks every kubeconfig Secret against the same policy as identity kubeconfigs and
// hands on one written anew from the admitted fields only; a refused kubeconfig is an error (the
// ClusterCache then does not connect) and a Warning event on the Cluster that names the refused
// field, never its value.
type guestKubeconfigReader struct {
	client.Reader
	Policy   transport.KubeconfigPolicy
	Recorder events.EventRecorder
}

// Get reads a Secret and, for a kubeconfig Secret, replaces its kubeconfig by the sanitized one.
// Other kinds are read as they are.
func (r *guestKubeconfigReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	data, ok := s.Data[secret.KubeconfigDataName]
	if !ok {
		return nil
	}
	clean, err := r.Policy.Sanitize(data)
	if err != nil {
		r.refused(key, err)
		// Nothing of the refused kubeconfig reaches the caller.
		delete(s.Data, secret.KubeconfigDataName)
		return fmt.Errorf("the kubeconfig Secret %s is refused: %w", key, err)
	}
	s.Data[secret.KubeconfigDataName] = clean
	return nil
}

// List is refused: the ClusterCache reads kubeconfig Secrets by name, and a list would hand on
// kubeconfigs unchecked.
func (r *guestKubeconfigReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the guest kubeconfig reader reads Secrets by name only")
}

// refused records a Warning event on the Cluster that owns the Secret (`<cluster>-kubeconfig`).
func (r *guestKubeconfigReader) refused(key client.ObjectKey, err error) {
	if r.Recorder == nil {
		return
	}
	name, ok := clusterOfKubeconfigSecret(key.Name)
	if !ok {
		return
	}
	cluster := &clusterv1.Cluster{}
	cluster.Namespace, cluster.Name = key.Namespace, name
	// The policy's errors name the refused field, never its value.
	r.Recorder.Eventf(cluster, nil, corev1.EventTypeWarning, GuestKubeconfigRefusedReason, "Connect",
		"The manager does not connect to the guest: its kubeconfig Secret %s is refused (%v)", key.Name, err)
}

func clusterOfKubeconfigSecret(name string) (string, bool) {
	suffix := "-" + string(secret.Kubeconfig)
	if len(name) <= len(suffix) || name[len(name)-len(suffix):] != suffix {
		return "", false
	}
	return name[:len(name)-len(suffix)], true
}
