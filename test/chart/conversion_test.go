package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestConversionInAnyNamespace is the chart installed into a namespace
// other than handroll-system with crd.enable=false, the CRD applied alone
// (make install, which says handroll-system) as a user managing it apart
// does, and the operator running there as in a pod: it must point the
// CRD's conversion at the Service it serves behind, so that v1alpha1 WebApps
// are created, read and updated. Then the chart takes the CRD over
// (crd.enable=true): helm upgrades without a field-manager conflict, and
// neither side changes what the other wrote.
func TestConversionInAnyNamespace(t *testing.T) {
	const ns = "platform-ops"
	helmPath(t)
	kubectl := kubectlPath(t)
	operator.Binary(t) // before the ports are chosen: a build takes a while
	// The API server resolves the webhook Service through its
	// EndpointSlices: there is no kube-proxy on loopback.
	cp := controlplane.StartForTest(t, controlplane.Options{APIServerArgs: []string{"--enable-aggregator-routing=true"}})
	ctx := t.Context()
	kube, hc := cp.KubeClient(t), cp.HandrollClient(t)
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()

	if _, err := run(t, nil, "make", "--no-print-directory", "install", "KUBECONFIG="+cp.Kubeconfig, "KUBECTL="+kubectl); err != nil {
		t.Fatal(err)
	}
	mustHelmIn(t, cp, ns, "install", "handroll", "charts/handroll", "--create-namespace", "--set", "crd.enable=false")

	// The replica is published behind the chart's Service, as the
	// endpoints controller would publish the pod.
	hostIP, port := controlplane.HostAddress(t), operator.FreePort(t)
	if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "handroll-webhook-test",
			Labels: map[string]string{discoveryv1.LabelServiceName: "handroll-webhook", discoveryv1.LabelManagedBy: "handroll-test"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("webhook"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	op := operator.LaunchInPod(t, cp.Config, ns, fmt.Sprintf("--webhook-port=%d", port))
	op.WaitReady(t, 2*time.Minute)

	want := map[string]any{"namespace": ns, "name": "handroll-webhook", "path": "/convert", "port": int64(443)}
	roundTrip(t, hc, "after make install and the chart with crd.enable=false", "team-a")
	checkConversionService(t, crds, want)

	// The chart takes the CRD over, then upgrades it as its own: no
	// conflict with the operator's fields, and what it applies is what the
	// operator wrote.
	for i := range 3 {
		mustHelmIn(t, cp, ns, "upgrade", "handroll", "charts/handroll", "--set", "crd.enable=true")
		checkConversionService(t, crds, want)
		roundTrip(t, hc, fmt.Sprintf("after helm upgrade %d with crd.enable=true", i+1), fmt.Sprintf("team-%d", i))
	}
	before, err := crds.Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustHelmIn(t, cp, ns, "upgrade", "handroll", "charts/handroll", "--set", "crd.enable=true")
	// A new replica checks the CRD at once, as every replica does at start.
	second := operator.LaunchInPod(t, cp.Config, ns, fmt.Sprintf("--webhook-port=%d", operator.FreePort(t)))
	second.WaitReady(t, 2*time.Minute)
	if err := budget.Poll(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(second.Log(), `"Holds the CA bundle" kind="CustomResourceDefinition"`), nil
	}); err != nil {
		t.Fatalf("the second replica did not check the CRD: %v\n%s", err, second.Log())
	}
	after, err := crds.Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the CRD changed (resourceVersion %s to %s) on a helm upgrade with nothing to change and a replica's start: helm and the operator disagree on it\nmanagedFields: %s",
			before.ResourceVersion, after.ResourceVersion, managers(after))
	}
}

// TestCRDConversionIsWhatTheOperatorWrites: the CRD's conversion, as the
// chart renders it in any namespace and as manifests/default (install.yaml)
// renders it, names the Service the operator with those manifests' flags
// writes into it: a helm upgrade or a kubectl apply then changes nothing
// the operator set, and the operator nothing they applied.
func TestCRDConversionIsWhatTheOperatorWrites(t *testing.T) {
	out, err := run(t, []string{"KUBECTL=" + kubectlPath(t)}, "bash", "hack/deploy.sh", "render", "manifests/default", "handroll:"+appVersion)
	if err != nil {
		t.Fatal(err)
	}
	for what, tc := range map[string]struct {
		ns   string
		objs objects
	}{
		"the chart":         {"platform-ops", mustTemplate(t, "platform-ops")},
		"manifests/default": {defaultNamespace, parse(t, out, "manifests/default")},
	} {
		for _, a := range dig(tc.objs["Deployment "+tc.ns+"/handroll"], "spec", "template", "spec", "containers", 0, "args").([]any) {
			if s := a.(string); strings.HasPrefix(s, "--webhook-service-") || strings.HasPrefix(s, "--operator-namespace") {
				t.Errorf("%s: the operator runs with %s; the CRD's conversion below assumes the defaults", what, s)
			}
		}
		// The operator's defaults: --webhook-service-name, the pod's
		// namespace, --webhook-service-port and the path it serves.
		want := map[string]any{"namespace": tc.ns, "name": "handroll-webhook", "path": certs.DefaultConversionPath, "port": float64(certs.DefaultServicePort)}
		got := dig(tc.objs["CustomResourceDefinition /"+crdName], "spec", "conversion", "webhook", "clientConfig", "service")
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: the CRD's conversion service differs from what the operator writes (-operator +%s):\n%s", what, what, d)
		}
		if port := dig(tc.objs["Service "+tc.ns+"/handroll-webhook"], "spec", "ports", 0, "port"); port != float64(certs.DefaultServicePort) {
			t.Errorf("%s: the webhook Service's port is %v, not --webhook-service-port's default %d", what, port, certs.DefaultServicePort)
		}
	}
}

// roundTrip creates a v1alpha1 WebApp, reads it and updates it through
// v1alpha1, and reads the update through v1: each needs the conversion
// webhook. The first call is retried for a while, as the operator injects
// its CA bundle a moment after it is ready.
func roundTrip(t *testing.T, hc versioned.Interface, when, name string) {
	t.Helper()
	ctx := t.Context()
	alpha := hc.HandrollV1alpha1().WebApps("default")
	var lastErr error
	if err := budget.Poll(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := alpha.Create(ctx, &handrollv1alpha1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       handrollv1alpha1.WebAppSpec{Image: "registry.invalid/app:1"},
		}, metav1.CreateOptions{})
		if ctx.Err() == nil {
			lastErr = err
		}
		return err == nil, nil
	}); err != nil {
		t.Fatalf("%s: creating a v1alpha1 WebApp: %v", when, lastErr)
	}
	// The operator writes the status meanwhile: read again on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := alpha.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading it through v1alpha1: %w", err)
		}
		got.Spec.Image = "registry.invalid/app:2"
		_, err = alpha.Update(ctx, got, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("%s: updating it through v1alpha1: %v", when, err)
	}
	v1, err := hc.HandrollV1().WebApps("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: reading it through v1: %v", when, err)
	}
	if v1.Spec.Image != "registry.invalid/app:2" {
		t.Errorf("%s: the v1alpha1 update did not reach v1: image %q", when, v1.Spec.Image)
	}
}

// checkConversionService checks the CRD's conversion clientConfig: the
// Service want, and a CA bundle.
func checkConversionService(t *testing.T, crds interface {
	Get(context.Context, string, metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}, want map[string]any) {
	t.Helper()
	crd, err := crds.Get(t.Context(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc := crd.Spec.Conversion.Webhook.ClientConfig
	got := map[string]any{}
	if s := cc.Service; s != nil {
		got = map[string]any{"namespace": s.Namespace, "name": s.Name, "path": ptr.Deref(s.Path, ""), "port": int64(ptr.Deref(s.Port, 0))}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || cc.URL != nil || len(cc.CABundle) == 0 {
		t.Errorf("the CRD's conversion calls service %v, url %v, with a CA bundle of %d bytes; want service %v and a CA bundle",
			got, ptr.Deref(cc.URL, ""), len(cc.CABundle), want)
	}
}

// managers lists the CRD's field managers and their operations.
func managers(crd *apiextensionsv1.CustomResourceDefinition) string {
	var out []string
	for _, m := range crd.ManagedFields {
		out = append(out, m.Manager+" "+string(m.Operation))
	}
	return strings.Join(out, ", ")
}
