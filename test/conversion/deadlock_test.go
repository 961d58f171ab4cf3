package conversion

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

const crdName = "webapps.handroll.dev"

// TestRestartWithObjectsStoredAtV1alpha1 is every replica restarted at
// once on a cluster whose WebApps are stored at v1alpha1: the operator's v1
// list needs the conversion webhook, which the API server reaches through
// the webhook Service, whose endpoints are the ready replicas, of which
// there are none. The replica must become ready all the same, since only
// then is it published and the conversion served; once it is (the test
// publishes its endpoint as the endpoints controller would), its caches
// sync within --cache-sync-timeout (2 min by default) and it reconciles.
func TestRestartWithObjectsStoredAtV1alpha1(t *testing.T) {
	f := storedAtV1alpha1(t)
	f.readyThenReconciled(t, operator.Launch(t, env.Kubeconfig, f.flags()...))
}

// TestShardedRestartWithObjectsStoredAtV1alpha1 is the same restart with
// --shards. With the API server applying the shardSelector, each replica
// caches the metadata of every WebApp and each range its own WebApps, all
// of which need the conversion; with --namespaces the ranges share one
// cache of the WebApps, as the single leader does.
func TestShardedRestartWithObjectsStoredAtV1alpha1(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra func(f *fixture) []string
	}{
		{"filtered by the API server", func(*fixture) []string { return nil }},
		{"with --namespaces", func(f *fixture) []string { return []string{"--namespaces=" + f.appNS} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := storedAtV1alpha1(t)
			args := append(f.flags(), "--shards=2",
				"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms")
			f.readyThenReconciled(t, operator.Launch(t, env.Kubeconfig, append(args, tc.extra(f)...)...))
		})
	}
}

// fixture is a cluster whose WebApps (names, in appNS) are stored at
// v1alpha1 and whose CRD converts through the webhook Service svcName in
// opNS, which has no endpoint yet.
type fixture struct {
	opNS, appNS string
	svcName     string
	hostIP      string
	port        int
	certDir     string
	names       []string
}

// flags are the operator's, serving the webhooks behind the fixture's
// Service.
func (f *fixture) flags() []string {
	return []string{"--operator-namespace=" + f.opNS, "--leader-elect-resource-namespace=" + f.opNS,
		fmt.Sprintf("--webhook-port=%d", f.port), "--webhook-cert-dir=" + f.certDir}
}

// storedAtV1alpha1 sets up the fixture: the webhook Service with no
// endpoint, the CRD converting through it, and WebApps stored at v1alpha1.
func storedAtV1alpha1(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{opNS: env.Namespace(t), appNS: env.Namespace(t), svcName: "handroll-webhook"}
	hc := env.HandrollClient(t)
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()

	// The webhook Service as the manifests make it, with the serving
	// certificate for its name; its endpoints are published by the test.
	caBundle := f.createWebhookService(t)

	// The CRD's conversion calls that Service; v1alpha1 is stored for now.
	f.convertThroughServiceStoringV1alpha1(t, crds, caBundle)

	// Created through v1alpha1, they need no conversion only once the API
	// server stores v1alpha1: until then each create fails.
	f.names = []string{"alpha-0", "alpha-1", "alpha-2"}
	for _, name := range f.names {
		poll(t, 30*time.Second, "create "+name+" stored at v1alpha1", func(ctx context.Context) (bool, error) {
			_, err := hc.HandrollV1alpha1().WebApps(f.appNS).Create(ctx, &handrollv1alpha1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       handrollv1alpha1.WebAppSpec{Image: "nginx:1.27"},
			}, metav1.CreateOptions{})
			return err == nil, nil
		})
	}

	// v1 is stored again; the objects stay as they were written.
	storeV1Again(t, crds)

	// The deadlock's premise: with no replica ready, a v1 list fails, and
	// so does a list of the WebApps' metadata.
	f.checkListsNeedTheWebhook(t, hc)
	return f
}

// createWebhookService writes the serving certificate for the fixture's
// Service name, creates that Service, with no endpoint, in front of the
// operator's webhook port, and returns the CA bundle.
func (f *fixture) createWebhookService(t *testing.T) (caBundle []byte) {
	t.Helper()
	f.hostIP = controlplane.HostAddress(t)
	// Built before the port is chosen: a build on a busy machine is a
	// long time for another test to take a port found free.
	operator.Binary(t)
	f.port = operator.FreePort(t)
	f.certDir = t.TempDir()
	caBundle, err := controlplane.WriteServingCertificate(f.certDir, f.svcName+"."+f.opNS+".svc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.KubeClient(t).CoreV1().Services(f.opNS).Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: f.svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "webhook", Port: 443, TargetPort: intstr.FromInt32(int32(f.port)),
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return caBundle
}

// convertThroughServiceStoringV1alpha1 points the CRD's conversion at the
// fixture's Service and makes v1alpha1 the storage version; the CRD's spec
// is put back when t ends.
func (f *fixture) convertThroughServiceStoringV1alpha1(t *testing.T, crds apiextensionsv1client.CustomResourceDefinitionInterface, caBundle []byte) {
	t.Helper()
	ctx := context.Background()
	before, err := crds.Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			crd.Spec = before.Spec
			_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
			return err
		})
	})
	updateCRD(t, crds, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
			Service:  &apiextensionsv1.ServiceReference{Namespace: f.opNS, Name: f.svcName, Path: ptr.To("/convert"), Port: ptr.To[int32](443)},
			CABundle: caBundle,
		}
		setStorage(crd, "v1alpha1")
	})
}

// storeV1Again makes v1 the storage version and waits until the CRD's
// storedVersions list both versions.
func storeV1Again(t *testing.T, crds apiextensionsv1client.CustomResourceDefinitionInterface) {
	t.Helper()
	updateCRD(t, crds, func(crd *apiextensionsv1.CustomResourceDefinition) { setStorage(crd, "v1") })
	poll(t, 30*time.Second, "storedVersions lists v1alpha1 and v1", func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		stored := crd.Status.StoredVersions
		return slices.Contains(stored, "v1alpha1") && slices.Contains(stored, "v1"), nil
	})
}

// checkListsNeedTheWebhook checks that, with no webhook endpoint, a v1 list
// of the fixture's WebApps and a list of their metadata both fail on the
// conversion.
func (f *fixture) checkListsNeedTheWebhook(t *testing.T, hc versioned.Interface) {
	t.Helper()
	ctx := context.Background()
	const conversionFailed = "conversion webhook for handroll.dev/v1alpha1, Kind=WebApp failed"
	if _, err := hc.HandrollV1().WebApps(f.appNS).List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), conversionFailed) {
		t.Fatalf("a v1 list with no webhook endpoint: %v, want an error with %q", err, conversionFailed)
	}
	meta, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Resource(handrollv1.SchemeGroupVersion.WithResource(handrollv1.WebAppResource)).Namespace(f.appNS).List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), conversionFailed) {
		t.Fatalf("a v1 metadata list with no webhook endpoint: %v, want an error with %q", err, conversionFailed)
	}
}

// readyThenReconciled checks that op, launched on f, becomes ready with no
// webhook endpoint, and once published, reconciles every WebApp.
func (f *fixture) readyThenReconciled(t *testing.T, op *operator.Operator) {
	t.Helper()
	ctx := context.Background()
	kube := env.KubeClient(t)

	// Within --cache-sync-timeout's default, well before step 10 gives up.
	launched := time.Now()
	var body string
	poll(t, 90*time.Second, "/readyz passes with no webhook endpoint", func(context.Context) (bool, error) {
		if _, exited := op.ExitedAt(); exited {
			return false, fmt.Errorf("handroll exited:\n%s", op.Log())
		}
		var code int
		code, body = op.Readyz(t)
		return code == 200, nil
	}, func() string { return "last /readyz?verbose:\n" + body })
	t.Logf("ready %s after the launch, with no webhook endpoint:\n%s", time.Since(launched).Round(time.Second), body)
	if !strings.Contains(body, "informer-sync-conversion") {
		t.Errorf("/readyz?verbose does not say that the WebApps wait for the conversion webhook:\n%s", body)
	}

	// Ready, the replica is published, as the endpoints controller does.
	if _, err := kube.DiscoveryV1().EndpointSlices(f.opNS).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   f.svcName + "-ready",
			Labels: map[string]string{discoveryv1.LabelServiceName: f.svcName, discoveryv1.LabelManagedBy: "handroll-test"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{f.hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("webhook"), Port: ptr.To(int32(f.port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The caches sync on the informers' next retry, the replica leads (or
	// takes its ranges), and every WebApp stored at v1alpha1 is reconciled.
	poll(t, 3*time.Minute, "the caches sync and every WebApp gets its Deployment", func(ctx context.Context) (bool, error) {
		if _, exited := op.ExitedAt(); exited {
			return false, fmt.Errorf("handroll exited:\n%s", op.Log())
		}
		for _, name := range f.names {
			if _, err := kube.AppsV1().Deployments(f.appNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, nil //nolint:nilerr // not yet
			}
		}
		return true, nil
	}, func() string {
		code, body := op.Readyz(t)
		return fmt.Sprintf("/readyz?verbose %d:\n%s\nlog:\n%s", code, body, op.Log())
	})
	t.Logf("every WebApp reconciled %s after the launch", time.Since(launched).Round(time.Second))
	if code, body := op.Readyz(t); code != 200 || !strings.Contains(body, "[+]informer-sync ok") || strings.Contains(body, "[-]informer-sync-conversion") {
		t.Errorf("/readyz?verbose after the sync: %d\n%s", code, body)
	}
}

func setStorage(crd *apiextensionsv1.CustomResourceDefinition, version string) {
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
	}
}

func updateCRD(t *testing.T, crds interface {
	Get(context.Context, string, metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(context.Context, *apiextensionsv1.CustomResourceDefinition, metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}, edit func(*apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	ctx := context.Background()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(crd)
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// poll fails t when cond is not met within timeout (scaled by
// budget.Scale); why, if given, adds to the failure what was last seen.
func poll(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error), why ...func() string) {
	t.Helper()
	timeout = budget.Scale(timeout)
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond); err != nil {
		msg := fmt.Sprintf("%s: not within %s: %v", what, timeout, err)
		for _, w := range why {
			msg += "\n" + w()
		}
		t.Fatal(msg)
	}
}
