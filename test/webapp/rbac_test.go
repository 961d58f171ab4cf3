package webapp

import (
	"context"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestManifestRBACIsEnough runs handroll with the ServiceAccount, roles and
// bindings of manifests/rbac as its only credential — as the Deployment in
// manifests/manager runs it — with its webhooks on self-managed
// certificates, and follows a WebApp through its whole life. A permission
// missing from the manifests fails this test; test/manifests holds the
// manifests to exactly the rules the code needs, so none is superfluous.
func TestManifestRBACIsEnough(t *testing.T) {
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()

	// The manifests, moved into this test's namespace and names.
	rename := func(name string) string { return name + "-" + opNS }
	createRBACManifests(ctx, t, opNS, rename)

	// A token of the ServiceAccount, in a kubeconfig of its own.
	kubeconfig := serviceAccountKubeconfig(ctx, t, opNS)

	// Webhooks served as in the cluster (self-managed certificates, the
	// manifests' webhook configurations), but reached at --webhook-url.
	configuration := rename("handroll")
	installWebhookConfigurations(t, configuration, ns)
	args, url := webhookArgs(t, configuration)
	op := operator.Start(t, kubeconfig, append(args, "--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS,
		"--leader-elect-resource-name="+rename("handroll-leader"))...)
	waitInjected(t, configuration, url)
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: handrollv1.WebAppSpec{
			Image: "nginx:1.27", Config: map[string]string{"k": "v"},
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "settings"},
		},
	})
	converged(t, ns, "web")
	eventually(t, "the directory entry is written", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		return err == nil && cm.Data[webapp.DirectoryKey(ns, "web")] != "", nil
	})
	if err := handrollClient(t).HandrollV1().WebApps(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the WebApp is deleted and leaves the directory", func(ctx context.Context) (bool, error) {
		_, err := handrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		cm, err := kube.CoreV1().ConfigMaps(opNS).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		_, listed := cm.Data[webapp.DirectoryKey(ns, "web")]
		return err == nil && !listed, nil
	})
	if strings.Contains(strings.ToLower(op.Log()), "forbidden") {
		t.Errorf("the operator met a forbidden request with the manifests' RBAC:\n%s", op.Log())
	}
}

// createRBACManifests creates the objects of manifests/rbac in namespace
// ns, with cluster-wide names passed through rename.
func createRBACManifests(ctx context.Context, t *testing.T, ns string, rename func(string) string) {
	t.Helper()
	objs := operator.ManifestObjects(t, "rbac")
	for _, obj := range objs {
		if err := createMoved(ctx, t, obj, ns, rename); err != nil {
			t.Fatalf("%T %v: %v", obj, obj.(metav1.Object).GetName(), err)
		}
	}
	if len(objs) < 5 {
		t.Fatalf("found only %d RBAC manifests", len(objs))
	}
}

// serviceAccountKubeconfig writes a kubeconfig whose only credential is a
// token of the ServiceAccount handroll of namespace ns.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	tr, err := kubeClient(t).CoreV1().ServiceAccounts(ns).CreateToken(ctx, "handroll", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env.WriteKubeconfig(t, controlplane.WithToken(tr.Status.Token))
}

// createMoved creates an RBAC object from the manifests in namespace ns,
// with cluster-wide names made unique to this test.
func createMoved(ctx context.Context, t *testing.T, obj runtime.Object, ns string, rename func(string) string) error {
	rbac := kubeClient(t).RbacV1()
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		o.Namespace = ns
		_, err = kubeClient(t).CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		o.Name = rename(o.Name)
		// The webhook configurations are renamed for this test too.
		for i, r := range o.Rules {
			if slices.Contains(r.Resources, "mutatingwebhookconfigurations") || slices.Contains(r.Resources, "validatingwebhookconfigurations") {
				for j := range r.ResourceNames {
					o.Rules[i].ResourceNames[j] = rename(r.ResourceNames[j])
				}
			}
		}
		_, err = rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		o.Name, o.RoleRef.Name = rename(o.Name), rename(o.RoleRef.Name)
		for i := range o.Subjects {
			o.Subjects[i].Namespace = ns
		}
		_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		o.Namespace = ns
		_, err = rbac.Roles(ns).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		o.Namespace = ns
		for i := range o.Subjects {
			o.Subjects[i].Namespace = ns
		}
		_, err = rbac.RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
	default:
		t.Fatalf("unexpected kind %T in manifests/rbac", obj)
	}
	return err
}
