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

package harvester

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/yaml"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// The ClusterRoles a guest's credential is bound to (config/harvester/provider-identity.yaml):
// what its CCM and its CSI driver call, verb by verb, narrower than Harvester's own
// harvesterhci.io:cloudprovider and harvesterhci.io:csi-driver.
const (
	// CloudProviderRole is bound by a RoleBinding in the target namespace.
	CloudProviderRole = "capi-harvester-guest-cloudprovider"
	// CSIVolumesRole is bound by a RoleBinding in the target namespace (with CSI on).
	CSIVolumesRole = "capi-harvester-guest-csi-volumes"
	// CSIClusterRole holds what the CSI driver reads outside a namespace: a StorageClass it
	// names and its two Settings. It is bound cluster-wide (with CSI on).
	CSIClusterRole = "capi-harvester-guest-csi"
)

// Where the guest finds its Harvester credential: the Secret the addons mount (whole, no
// subPath, so that a renewed token reaches running readers), whose kubeconfig reads the token
// from the file next to it.
const (
	GuestCloudConfigSecret    = "harvester-cloud-config"
	GuestCloudConfigNamespace = "kube-system"
	GuestCloudConfigKey       = "cloud-config"
	GuestTokenKey             = "token"
	// GuestCloudConfigDir is where the addons mount the Secret.
	GuestCloudConfigDir = "/etc/kubernetes/harvester"
)

// AnnotationGuestCluster is an annotation that, on a guest's ServiceAccount on Harvester, names the guest cluster (its
// ClusterID, the CCM's --cluster-name). Harvester's admission policy
// (config/harvester/admission-policies.yaml) lets that ServiceAccount's load balancers name
// only this cluster in their pool selection; the guest's own credential cannot change it.
const AnnotationGuestCluster = "harvester.infrastructure.cluster.x-k8s.io/guest-cluster"

// LegacyCSIBindingName is the ClusterRoleBinding to Harvester's CSI role (every namespace) that
// versions before the CSI role was bound per namespace made; Ensure and Delete remove it.
func LegacyCSIBindingName(targetNamespace, serviceAccount string) string {
	sum := sha256.Sum256([]byte(targetNamespace + "/" + serviceAccount))
	return "capi-harvester-csi-" + hex.EncodeToString(sum[:])[:16]
}

// GuestIdentity is what a guest cluster gets on Harvester.
type GuestIdentity struct {
	Namespace      string // target namespace
	ServiceAccount string
	Labels         map[string]string // Guest.Labels
	// Cluster is the guest cluster's ID (Guest.ID), written on its ServiceAccount.
	Cluster string
	CSI     bool
}

// GuestIdentityService does the Harvester side of a guest cluster's own credential: the
// ServiceAccount its cloud provider and CSI driver use, their bindings, and its tokens.
type GuestIdentityService struct {
	C client.Client
}

// CSIRoleBindingName is the RoleBinding, in the target namespace, of a guest's CSI driver to
// CSIVolumesRole.
func CSIRoleBindingName(serviceAccount string) string {
	return naming.BoundedName(serviceAccount+"-csi", 63)
}

// Ensure creates the guest's ServiceAccount, its RoleBinding (in the target namespace) to
// CloudProviderRole and, only when CSI is on, its RoleBinding there to CSIVolumesRole and its
// ClusterRoleBinding to CSIClusterRole. A binding of an earlier version to another role
// (Harvester's own, of the same name) is replaced, and its ClusterRoleBinding to Harvester's CSI
// role (every namespace) removed. It removes the CSI bindings when CSI is off.
func (s *GuestIdentityService) Ensure(ctx context.Context, g GuestIdentity) error {
	c := s.C
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.ServiceAccount, Labels: g.Labels,
		Annotations: map[string]string{AnnotationGuestCluster: g.Cluster}}}
	err := c.Create(ctx, sa)
	if apierrors.IsAlreadyExists(err) {
		err = ensureGuestClusterAnnotation(ctx, c, sa)
	}
	if e, ok := transport.AsError(err); ok {
		return e
	}
	if err != nil {
		return transport.ClassifyError(err, "creating the guest's ServiceAccount")
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: g.Namespace, Name: g.ServiceAccount}}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.ServiceAccount, Labels: g.Labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CloudProviderRole},
		Subjects:   subject,
	}
	if err := ensureRoleBinding(ctx, c, rb, g.Cluster); err != nil {
		if e, ok := transport.AsError(err); ok {
			return e
		}
		return transport.ClassifyError(err, "binding the guest to "+CloudProviderRole)
	}
	csiRB := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: CSIRoleBindingName(g.ServiceAccount), Labels: g.Labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CSIVolumesRole},
		Subjects:   subject,
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: naming.CSIBindingName(g.Namespace, g.ServiceAccount), Labels: g.Labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CSIClusterRole},
		Subjects:   subject,
	}
	legacy := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: LegacyCSIBindingName(g.Namespace, g.ServiceAccount)}}
	if !g.CSI {
		for _, obj := range []client.Object{crb, csiRB, legacy} {
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return transport.ClassifyError(err, "removing the guest's CSI binding")
			}
		}
		return nil
	}
	if err := ensureRoleBinding(ctx, c, csiRB, g.Cluster); err != nil {
		if e, ok := transport.AsError(err); ok {
			return e
		}
		return transport.ClassifyError(err, "binding the guest to "+CSIVolumesRole+" in its namespace")
	}
	if err := c.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return transport.ClassifyError(err, "binding the guest to "+CSIClusterRole)
	}
	if err := c.Delete(ctx, legacy); client.IgnoreNotFound(err) != nil {
		return transport.ClassifyError(err, "removing the guest's cluster-wide binding to Harvester's CSI role")
	}
	return nil
}

// ensureRoleBinding creates want, or replaces a binding of that name, made for the guest cluster
// of that ID, that binds another role or other subjects (a binding's role cannot be changed in
// place): one an earlier version of the provider made to Harvester's own role, say. A binding of
// that name made for another cluster, or by someone else, is left alone (NameTaken).
func ensureRoleBinding(ctx context.Context, c client.Client, want *rbacv1.RoleBinding, cluster string) error {
	err := c.Create(ctx, want.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return err
	}
	if have.RoleRef == want.RoleRef && equality.Semantic.DeepEqual(have.Subjects, want.Subjects) {
		return nil
	}
	if !guestOwns(have, cluster) {
		return transport.NameTaken("a RoleBinding named %s already exists in Harvester namespace %s and was not made for this cluster; it is left untouched", have.Name, have.Namespace)
	}
	if err := c.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := c.Create(ctx, want.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// ensureGuestClusterAnnotation brings an existing guest ServiceAccount's cluster annotation in
// line (ServiceAccounts made before the annotation existed lack it).
func ensureGuestClusterAnnotation(ctx context.Context, c client.Client, want *corev1.ServiceAccount) error {
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), sa); err != nil {
		return err
	}
	if !guestOwns(sa, want.Annotations[AnnotationGuestCluster]) {
		return transport.NameTaken("a ServiceAccount named %s already exists in Harvester namespace %s and was not made for this cluster; it is left untouched", sa.Name, sa.Namespace)
	}
	if sa.Annotations[AnnotationGuestCluster] == want.Annotations[AnnotationGuestCluster] {
		return nil
	}
	base := sa.DeepCopy()
	if sa.Annotations == nil {
		sa.Annotations = map[string]string{}
	}
	sa.Annotations[AnnotationGuestCluster] = want.Annotations[AnnotationGuestCluster]
	return c.Patch(ctx, sa, client.MergeFrom(base))
}

// guestOwns tells whether obj carries the provider's labels for the guest cluster of that ID.
func guestOwns(obj metav1.Object, cluster string) bool {
	return obj.GetLabels()[naming.LabelManagedBy] == naming.ManagedByValue && obj.GetLabels()[naming.LabelCluster] == cluster
}

// Delete removes the guest's bindings and ServiceAccount (which revokes every token issued
// for it). Objects already gone are fine; a ServiceAccount of that name that is another
// cluster's is left alone, with the bindings named after it.
func (s *GuestIdentityService) Delete(ctx context.Context, g GuestIdentity) error {
	c := s.C
	existing := &corev1.ServiceAccount{}
	err := c.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.ServiceAccount}, existing)
	switch {
	case err == nil && !guestOwns(existing, g.Cluster):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return transport.ClassifyError(err, "reading the guest's ServiceAccount")
	}
	objs := []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: naming.CSIBindingName(g.Namespace, g.ServiceAccount)}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: LegacyCSIBindingName(g.Namespace, g.ServiceAccount)}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: CSIRoleBindingName(g.ServiceAccount)}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.ServiceAccount}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.ServiceAccount}},
	}
	for _, obj := range objs {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return transport.ClassifyError(err, fmt.Sprintf("deleting the guest's %T %s", obj, obj.GetName()))
		}
	}
	return nil
}

// RequestToken asks Harvester for a token of the guest's ServiceAccount with a bounded
// lifetime, and returns it with the expiry Harvester granted (which may be sooner). Its
// failure is an Error of reason TokenRequestFailed.
func (s *GuestIdentityService) RequestToken(ctx context.Context, g GuestIdentity, lifetime time.Duration) (string, time.Time, error) {
	c := s.C
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.ServiceAccount}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime / time.Second))}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		e, _ := transport.AsError(transport.ClassifyError(err, "requesting a token for the guest"))
		e.Reason = infrav1.TokenRequestFailedReason
		return "", time.Time{}, e
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// IsRancherProxy tells whether a kubeconfig server is a Rancher proxy URL
// (https://rancher/k8s/clusters/<id>), where a Harvester token is not valid.
func IsRancherProxy(server string) bool {
	u, err := url.Parse(server)
	return err == nil && strings.Contains(u.Path, "/k8s/clusters/")
}

// GuestKubeconfig is the cloud-config the guest's cloud provider and CSI driver read: Harvester's
// API, its CA, the target namespace as the context's namespace, and the token read from a file
// (client-go re-reads it, so a renewal needs no restart).
func GuestKubeconfig(server string, ca []byte, namespace string) ([]byte, error) {
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"harvester": {Server: server, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"guest": {TokenFile: GuestCloudConfigDir + "/" + GuestTokenKey}},
		Contexts:       map[string]*clientcmdapi.Context{"harvester": {Cluster: "harvester", AuthInfo: "guest", Namespace: namespace}},
		CurrentContext: "harvester",
	})
}

// GuestCloudConfigManifest is the guest's Secret, as a manifest a ClusterResourceSet applies.
func GuestCloudConfigManifest(kubeconfig []byte, token string) ([]byte, error) {
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: GuestCloudConfigNamespace, Name: GuestCloudConfigSecret},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{GuestCloudConfigKey: kubeconfig, GuestTokenKey: []byte(token)},
	}
	return yaml.Marshal(secret)
}
