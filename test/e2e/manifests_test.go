package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// TestManifestsDeploy applies manifests/default as a user would, with
// kubectl's kustomize, into a cluster that enforces Pod Security: the
// namespace is labelled restricted, so the operator's pods are admitted only
// if their spec complies; kwok then runs them and the Deployment becomes
// available.
//
// kwok's pods only pretend to run, so nothing answers the webhooks the
// manifests register with failurePolicy Fail: while they exist, every
// WebApp write in this shared cluster fails. The cleanup deletes everything
// the apply created, and waits until a WebApp write passes again, before
// the next test runs.
func TestManifestsDeploy(t *testing.T) {
	if env == nil {
		t.Skip("needs the local cluster")
	}
	kubectl := kubectlAtRoot(t)
	c := clientset(t)
	ctx, cancel := budget.Context(t, context.Background(), 3*time.Minute, "the manifests to be applied and served")
	defer cancel()

	// What the apply will create: the build, less what already exists (the
	// harness installed the CRD, and the other tests use it).
	objs := decodeAll(t, kubectl("kustomize", "manifests/default"))
	resource := resourceFor(t, c)
	created := notYetInCluster(ctx, t, objs, resource)
	t.Cleanup(func() { deleteAndWait(t, created, resource) })
	kubectl("apply", "--server-side", "--force-conflicts", "-k", "manifests/default")

	checkRestrictedNamespace(ctx, t, c)

	// The webhooks' Service and configurations, and the RBAC of the
	// self-managed certificates, as the API server sees them.
	checkWebhookObjects(ctx, t, c)
	checkCertificateRBAC(ctx, t, c)

	waitForOperatorDeployment(ctx, t, c)

	// The API server now calls the webhooks for every WebApp write, and
	// nothing answers: the reason for the cleanup.
	checkWritesCallWebhooks(ctx, t)
}

// kubectlAtRoot returns a runner of the real kubectl, against the local
// cluster from the repository's root, that fails the test on an error.
func kubectlAtRoot(t *testing.T) func(args ...string) []byte {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(filepath.Join(env.BinDir, "kubectl"), append([]string{"--kubeconfig=" + env.Kubeconfig}, args...)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s%s", args, err, out, stderr.Bytes())
		}
		return out
	}
}

// resourceFor returns the dynamic client of an object's resource, mapped
// through discovery, namespaced when its kind is.
func resourceFor(t *testing.T, c kubernetes.Interface) func(*unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Discovery()))
	return func(u *unstructured.Unstructured) dynamic.ResourceInterface {
		t.Helper()
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			return dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		return dyn.Resource(m.Resource)
	}
}

// notYetInCluster returns the objects of objs the API server does not hold:
// those the apply will create, and the cleanup must delete.
func notYetInCluster(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured,
	resource func(*unstructured.Unstructured) dynamic.ResourceInterface) []*unstructured.Unstructured {
	t.Helper()
	var created []*unstructured.Unstructured
	for _, u := range objs {
		_, err := resource(u).Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created = append(created, u)
		case err != nil:
			t.Fatal(err)
		}
	}
	return created
}

// checkRestrictedNamespace checks that the operator's namespace enforces the
// restricted Pod Security profile.
func checkRestrictedNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Get(ctx, "handroll-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace labels %v: the test proves nothing without the restricted profile", ns.Labels)
	}
}

// checkWebhookObjects checks the webhooks' Service and both webhook
// configurations.
func checkWebhookObjects(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	svc, err := c.CoreV1().Services("handroll-system").Get(ctx, "handroll-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook" {
		t.Errorf("Service handroll-webhook ports %+v, want 443 to the pods' port webhook", svc.Spec.Ports)
	}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}

// certificateRBAC is what the operator's service account may and may not do
// for its self-managed certificates: its own Secret and configurations only.
var certificateRBAC = []struct {
	attrs authorizationv1.ResourceAttributes
	allow bool
}{
	{authorizationv1.ResourceAttributes{Namespace: "handroll-system", Resource: "secrets", Verb: "create"}, true},
	{authorizationv1.ResourceAttributes{Namespace: "handroll-system", Resource: "secrets", Verb: "update", Name: "handroll-webhook-tls"}, true},
	{authorizationv1.ResourceAttributes{Namespace: "handroll-system", Resource: "secrets", Verb: "watch", Name: "handroll-webhook-tls"}, true},
	{authorizationv1.ResourceAttributes{Namespace: "handroll-system", Resource: "secrets", Verb: "get", Name: "another"}, false},
	{authorizationv1.ResourceAttributes{Namespace: "default", Resource: "secrets", Verb: "create"}, false},
	{authorizationv1.ResourceAttributes{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Verb: "update", Name: "handroll"}, true},
	{authorizationv1.ResourceAttributes{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Verb: "update", Name: "another"}, false},
	{authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "update", Name: "webapps.handroll.dev"}, true},
}

// checkCertificateRBAC asks the API server, with SubjectAccessReviews,
// whether the manifests grant the service account exactly certificateRBAC.
func checkCertificateRBAC(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	sa := "system:serviceaccount:handroll-system:handroll"
	for _, check := range certificateRBAC {
		sar, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:handroll-system", "system:authenticated"},
				ResourceAttributes: &check.attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != check.allow {
			t.Errorf("%s %s/%s %s named %q: allowed %v, want %v", check.attrs.Verb, check.attrs.Group, check.attrs.Resource,
				check.attrs.Namespace, check.attrs.Name, sar.Status.Allowed, check.allow)
		}
	}
}

// waitForOperatorDeployment waits until both of the operator's pods are
// ready: admitted under the restricted profile and run by kwok. On a
// timeout it logs the namespace's warnings, which say what was refused.
func waitForOperatorDeployment(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	err := budget.Poll(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments("handroll-system").Get(ctx, "handroll", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: poll again until the timeout
		}
		return d.Status.ReadyReplicas == 2, nil
	})
	if err != nil {
		evs, _ := c.EventsV1().Events("handroll-system").List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning {
				t.Logf("event: %s %s: %s", e.Reason, e.Regarding.Name, e.Note)
			}
		}
		t.Fatalf("the operator's Deployment did not become available: %v", err)
	}
}

// checkWritesCallWebhooks checks that a WebApp write now fails on the
// manifests' webhooks, which nothing answers.
func checkWritesCallWebhooks(ctx context.Context, t *testing.T) {
	t.Helper()
	err := budget.Poll(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := dryRunWebApp(ctx, t)
		return err != nil && strings.Contains(err.Error(), "webapp.handroll.dev"), nil
	})
	if err != nil {
		t.Errorf("with the manifests applied, a WebApp write did not call the webhooks: %v", dryRunWebApp(ctx, t))
	}
}

// dryRunWebApp asks the API server to admit a WebApp without storing it;
// admission webhooks are called as for a real write.
func dryRunWebApp(ctx context.Context, t *testing.T) error {
	_, err := env.HandrollClient(t).HandrollV1().WebApps(metav1.NamespaceDefault).Create(ctx, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "dry-run"},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// deleteAndWait deletes objs in reverse order of the build (the webhook
// configurations first, the namespace last), waits until each is gone, then
// until the API server admits WebApps again: it may still hold a deleted
// webhook configuration for a moment.
func deleteAndWait(t *testing.T, objs []*unstructured.Unstructured, resource func(*unstructured.Unstructured) dynamic.ResourceInterface) {
	ctx, cancel := budget.Context(t, context.Background(), 3*time.Minute, "the manifests' objects to be deleted")
	defer cancel()
	background := metav1.DeletePropagationBackground
	for _, u := range slices.Backward(objs) {
		err := resource(u).Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, u := range objs {
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := resource(u).Get(ctx, u.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("%s %s was not deleted: %v", u.GetKind(), u.GetName(), err)
		}
	}
	var last error
	err := budget.Poll(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := dryRunWebApp(ctx, t)
		if ctx.Err() == nil {
			last = err
		}
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("after the cleanup, the API server still refuses WebApps: %v", last)
	}
}

// decodeAll reads a multi-document YAML stream into objects.
func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
