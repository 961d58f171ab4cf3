package webapp

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// installWebhookConfigurations creates the webhook configurations of
// manifests/webhook under the given name, limited to namespace ns so that
// other tests sharing the control plane are not affected, and deletes them
// when t ends. They point at the in-cluster Service, as in the manifests;
// the operator redirects them to --webhook-url.
func installWebhookConfigurations(t *testing.T, name, ns string) {
	t.Helper()
	mutating, validating := operator.ManifestWebhookConfigurations(t)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	ar := kubeClient(t).AdmissionregistrationV1()
	ctx := context.Background()

	mutating.Name = name
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].NamespaceSelector = selector
	}
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	validating.Name = name
	for i := range validating.Webhooks {
		validating.Webhooks[i].NamespaceSelector = selector
	}
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// webhookArgs are the flags of an operator outside the cluster whose
// webhooks the API server calls: self-managed certificates, the named
// webhook configurations and the WebApp CRD pointed at 127.0.0.1.
//
// The CRD is shared by the package's tests: its conversion webhook is put
// back as the manifests have it when t ends, after the operator has stopped.
func webhookArgs(t *testing.T, configuration string) (args []string, url string) {
	t.Helper()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	before, err := crds.Get(context.Background(), "webapps.handroll.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := crds.Get(context.Background(), before.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			crd.Spec.Conversion = before.Spec.Conversion
			_, err = crds.Update(context.Background(), crd, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Errorf("restoring the CRD's conversion webhook: %v", err)
		}
	})
	port := operator.FreePort(t)
	url = fmt.Sprintf("https://127.0.0.1:%d", port)
	return []string{
		fmt.Sprintf("--webhook-port=%d", port),
		"--webhook-url=" + url,
		"--webhook-configuration-name=" + configuration,
		"--conversion-crd=webapps.handroll.dev",
	}, url
}

// waitInjected waits until the webhook configurations and the CRD's
// conversion webhook point at url and carry a CA bundle.
func waitInjected(t *testing.T, configuration, url string) {
	t.Helper()
	ar := kubeClient(t).AdmissionregistrationV1()
	ext := apiextensionsclient.NewForConfigOrDie(env.Config)
	eventually(t, "the webhook configurations and the CRD point at "+url, func(ctx context.Context) (bool, error) {
		m, err := ar.MutatingWebhookConfigurations().Get(ctx, configuration, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		v, err := ar.ValidatingWebhookConfigurations().Get(ctx, configuration, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "webapps.handroll.dev", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var configs []admissionregistrationv1.WebhookClientConfig
		for _, w := range m.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
		for _, w := range v.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
		c := crd.Spec.Conversion
		if c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil || c.Webhook.ClientConfig.Service != nil {
			return false, nil
		}
		configs = append(configs, admissionregistrationv1.WebhookClientConfig{URL: c.Webhook.ClientConfig.URL, CABundle: c.Webhook.ClientConfig.CABundle})
		for _, c := range configs {
			if c.URL == nil || !strings.HasPrefix(*c.URL, url+"/") || len(c.CABundle) == 0 || c.Service != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestSelfManagedWebhooksAndConversion runs the operator as `make run` does:
// outside the cluster, no certificate given. It makes its own CA and serving
// certificate, keeps them in a Secret, points the manifests' webhook
// configurations and the CRD's conversion webhook at itself; then the API
// server admits, defaults, rejects and converts through it.
func TestSelfManagedWebhooksAndConversion(t *testing.T) {
	ns := env.Namespace(t)
	configuration := "handroll-" + ns
	installWebhookConfigurations(t, configuration, ns)
	args, url := webhookArgs(t, configuration)
	_, opNS := startOperator(t, args...)
	waitInjected(t, configuration, url)
	ctx := context.Background()

	checkSelfManagedSecret(ctx, t, opNS)

	hc := handrollClient(t)
	// Rejected by the validating webhook, also when written as v1alpha1:
	// the API server converts to v1 (matchPolicy Equivalent) first.
	checkReservedEnvRejectedAsV1alpha1(t, hc, ns)

	// A v1alpha1 object, read as v1.
	checkV1alpha1ReadAsV1(ctx, t, hc, ns)

	// A v1 object with fields v1alpha1 cannot hold, written through
	// v1alpha1: they survive.
	checkV1OnlyFieldsSurvive(ctx, t, hc, ns)

	// Deleted here: nothing deletes namespaces in this control plane, and
	// later tests' operators would otherwise keep reconciling them.
	deleteWebApps(ctx, t, hc, ns, "old", "new")
}

// checkSelfManagedSecret checks that the operator keeps its certificate and
// CA in the Secret handroll-webhook-tls of its namespace.
func checkSelfManagedSecret(ctx context.Context, t *testing.T, opNS string) {
	t.Helper()
	secret, err := kubeClient(t).CoreV1().Secrets(opNS).Get(ctx, "handroll-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the self-managed certificate's Secret: %v", err)
	}
	for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(secret.Data[key]) == 0 {
			t.Errorf("Secret %s/%s has no %s", opNS, secret.Name, key)
		}
	}
}

// checkReservedEnvRejectedAsV1alpha1 checks that a v1alpha1 WebApp with a
// reserved env name is refused, naming the field.
func checkReservedEnvRejectedAsV1alpha1(t *testing.T, hc versioned.Interface, ns string) {
	t.Helper()
	reserved := &handrollv1alpha1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "reserved", Namespace: ns},
		Spec:       handrollv1alpha1.WebAppSpec{Image: "nginx:1.27", Env: []corev1.EnvVar{{Name: "HANDROLL_MODE", Value: "x"}}},
	}
	var createErr error
	eventually(t, "the validating webhook rejects a reserved env name written as v1alpha1", func(ctx context.Context) (bool, error) {
		_, createErr = hc.HandrollV1alpha1().WebApps(ns).Create(ctx, reserved, metav1.CreateOptions{})
		if createErr == nil {
			_ = hc.HandrollV1().WebApps(ns).Delete(ctx, reserved.Name, metav1.DeleteOptions{})
			return false, nil
		}
		return strings.Contains(createErr.Error(), "reserved"), nil
	})
	if !strings.Contains(createErr.Error(), "spec.env[0].name") {
		t.Errorf("the rejection does not name the field: %v", createErr)
	}
}

// checkV1alpha1ReadAsV1 creates the v1alpha1 WebApp "old" and checks that,
// read as v1, its fields are converted and the v1 defaults applied.
func checkV1alpha1ReadAsV1(ctx context.Context, t *testing.T, hc versioned.Interface, ns string) {
	t.Helper()
	old := &handrollv1alpha1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns},
		Spec: handrollv1alpha1.WebAppSpec{
			Image: "nginx:1.27", Size: ptr.To[int32](3), ContainerPort: ptr.To[int32](9090),
			ConfigData: map[string]string{"greeting": "hello"},
		},
	}
	if _, err := hc.HandrollV1alpha1().WebApps(ns).Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a v1alpha1 WebApp: %v", err)
	}
	got, err := hc.HandrollV1().WebApps(ns).Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.Replicas, -1) != 3 || ptr.Deref(got.Spec.Port, 0) != 9090 || got.Spec.Config["greeting"] != "hello" {
		t.Errorf("the v1alpha1 WebApp read as v1: %s", asJSON(got.Spec))
	}
	if got.Spec.Service == nil {
		t.Errorf("the v1 defaults were not applied to an object written as v1alpha1: %s", asJSON(got.Spec))
	}
}

// checkV1OnlyFieldsSurvive creates the v1 WebApp "new" with fields v1alpha1
// cannot hold, updates it through v1alpha1, and checks that the update
// reaches v1 and those fields are kept, with no conversion annotation left.
func checkV1OnlyFieldsSurvive(ctx context.Context, t *testing.T, hc versioned.Interface, ns string) {
	t.Helper()
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: ns},
		Spec: handrollv1.WebAppSpec{
			Image: "nginx:1.27", Replicas: ptr.To[int32](1),
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "settings"},
			Service:      &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](8000), NodePort: 30080},
		},
	})
	// The operator may write too: retry on conflict, as any client doing a
	// read-modify-write must.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		alpha, err := hc.HandrollV1alpha1().WebApps(ns).Get(ctx, "new", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := alpha.Annotations["handroll.dev/v1-spec"]; !ok {
			t.Errorf("read as v1alpha1, the WebApp does not carry its v1-only fields in the annotation: %v", alpha.Annotations)
		}
		alpha.Spec.Size = ptr.To[int32](2)
		_, err = hc.HandrollV1alpha1().WebApps(ns).Update(ctx, alpha, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating through v1alpha1: %v", err)
	}
	back, err := hc.HandrollV1().WebApps(ns).Get(ctx, "new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(back.Spec.Replicas, -1) != 2 {
		t.Errorf("the v1alpha1 update of size did not reach v1 replicas: %s", asJSON(back.Spec))
	}
	if back.Spec.ConfigMapRef == nil || back.Spec.ConfigMapRef.Name != "settings" ||
		back.Spec.Service == nil || ptr.Deref(back.Spec.Service.Type, "") != handrollv1.ServiceTypeNodePort || back.Spec.Service.NodePort != 30080 {
		t.Errorf("v1-only fields were lost by a write through v1alpha1: %s", asJSON(back.Spec))
	}
	for k := range back.Annotations {
		if strings.HasPrefix(k, "handroll.dev/") {
			t.Errorf("the conversion annotation %s leaked into v1", k)
		}
	}
}

// deleteWebApps deletes the named WebApps of ns and waits until ns has none.
func deleteWebApps(ctx context.Context, t *testing.T, hc versioned.Interface, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := hc.HandrollV1().WebApps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	eventually(t, "the WebApps are gone", func(ctx context.Context) (bool, error) {
		l, err := hc.HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
}

// TestWebhookURLIsPutBackOnStop: an operator run with --webhook-url points
// the webhook configurations and the CRD's conversion at itself; when it
// stops they call what they called before (the manifests' Service), with
// the CA bundle kept, and no record of the URL is left.
func TestWebhookURLIsPutBackOnStop(t *testing.T) {
	ns := env.Namespace(t)
	configuration := "handroll-" + ns
	installWebhookConfigurations(t, configuration, ns)
	args, url := webhookArgs(t, configuration)
	op, _ := startOperator(t, args...)
	waitInjected(t, configuration, url)
	if err := op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("the operator's stop: %v\n%s", err, op.Log())
	}
	checkPutBack(t, configuration)
}

// TestWebhookURLIsPutBackWhenTheLeaseIsLost: the same when the operator
// exits because another holder took its Lease, with no drain: the restore
// writes no WebApp, so it is safe after the Lease is gone, and without it
// every WebApp write in the cluster would be refused (failurePolicy Fail)
// until an in-cluster replica's next pass, or for ever.
func TestWebhookURLIsPutBackWhenTheLeaseIsLost(t *testing.T) {
	ns := env.Namespace(t)
	configuration := "handroll-" + ns
	installWebhookConfigurations(t, configuration, ns)
	args, url := webhookArgs(t, configuration)
	op, opNS := startOperator(t, append(args, "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms")...)
	waitInjected(t, configuration, url)

	// Another holder takes the Lease, as one whose clock ran ahead might.
	leases := kubeClient(t).CoordinationV1().Leases(opNS)
	eventually(t, "the Lease taken by another holder", func(ctx context.Context) (bool, error) {
		l, err := leases.Get(ctx, leader.DefaultLeaseName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not created yet
		}
		other, now, seconds := "usurper", metav1.NewMicroTime(time.Now().Add(time.Hour)), int32(3600)
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &other, &now, &seconds
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err == nil, nil
	})
	select {
	case <-op.Exited():
	case <-time.After(budget.Scale(30 * time.Second)):
		t.Fatalf("the operator still runs 30 s after its Lease was taken\n%s", op.Log())
	}
	if !strings.Contains(op.Log(), "lost") {
		t.Errorf("the operator did not exit for the lost Lease:\n%s", op.Log())
	}
	checkPutBack(t, configuration)
}

// checkPutBack fails t unless the webhook configurations named
// configuration and the CRD's conversion call what they called before
// --webhook-url (the manifests' Service), with the CA bundle kept, and no
// record of the URL is left.
func checkPutBack(t *testing.T, configuration string) {
	t.Helper()
	mutating, validating := operator.ManifestWebhookConfigurations(t)
	ctx := context.Background()
	ar := kubeClient(t).AdmissionregistrationV1()
	m, err := ar.MutatingWebhookConfigurations().Get(ctx, configuration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ar.ValidatingWebhookConfigurations().Get(ctx, configuration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "webapps.handroll.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type config struct {
		what      string
		got, want admissionregistrationv1.WebhookClientConfig
	}
	var configs []config
	for i, w := range m.Webhooks {
		configs = append(configs, config{"mutating " + w.Name, w.ClientConfig, mutating.Webhooks[i].ClientConfig})
	}
	for i, w := range v.Webhooks {
		configs = append(configs, config{"validating " + w.Name, w.ClientConfig, validating.Webhooks[i].ClientConfig})
	}
	if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil {
		cc := c.Webhook.ClientConfig
		got := admissionregistrationv1.WebhookClientConfig{URL: cc.URL, CABundle: cc.CABundle}
		if s := cc.Service; s != nil {
			got.Service = &admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port}
		}
		configs = append(configs, config{"the CRD's conversion", got, admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: "system", Name: "handroll-webhook", Path: ptr.To("/convert"), Port: ptr.To[int32](443)},
		}})
	} else {
		t.Fatalf("the CRD has no conversion webhook: %+v", crd.Spec.Conversion)
	}
	for _, c := range configs {
		if c.got.URL != nil || c.got.Service == nil || !sameService(c.got.Service, c.want.Service) {
			t.Errorf("%s after the stop: url %v, service %+v; want service %+v", c.what, ptr.Deref(c.got.URL, ""), c.got.Service, c.want.Service)
		}
		if len(c.got.CABundle) == 0 {
			t.Errorf("%s lost its CA bundle", c.what)
		}
	}
	for what, annotations := range map[string]map[string]string{"mutating": m.Annotations, "validating": v.Annotations, "CRD": crd.Annotations} {
		if r, ok := annotations[certs.AnnotationReplacedClientConfigs]; ok {
			t.Errorf("the %s configuration keeps the record %s", what, r)
		}
	}
}

func sameService(a, b *admissionregistrationv1.ServiceReference) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && ptr.Deref(a.Path, "") == ptr.Deref(b.Path, "") && ptr.Deref(a.Port, 443) == ptr.Deref(b.Port, 443)
}
