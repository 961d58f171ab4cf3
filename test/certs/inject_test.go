package certs

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/test/budget"
)

// The CRDs of testdata/crd.
const (
	webhookCRD = "gadgets.certs.handroll.test" // conversion strategy Webhook
	plainCRD   = "widgets.certs.handroll.test" // conversion strategy None
)

// TestInjection runs a Manager that names a MutatingWebhookConfiguration
// and a ValidatingWebhookConfiguration (one name, both kinds) and two CRDs.
// The mutating configuration and the CRDs exist from the start; the
// validating one is created later and must be found on a retry. Each webhook
// gets the Secret's ca.crt and keeps its service; the CRD whose conversion
// is not Webhook is not touched. Once current, passes read and write
// nothing. A Manager with a URL then replaces every service with the URL and
// the service's path.
func TestInjection(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	kube := env.KubeClient(t)
	ar := kube.AdmissionregistrationV1()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	name := "certs-" + ns
	targets := injectionTargets{kube: kube, crds: crds, ns: ns, name: name}

	mutating, validating := webhookConfigurations(ns, name)
	createMutatingConfiguration(t, ctx, ar, mutating)
	plainBefore, err := crds.Get(ctx, plainCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	opts := certs.Options{
		Namespace: ns, ServiceName: "handroll-webhook",
		WebhookConfigurations: []string{name},
		CRDs:                  []string{webhookCRD, plainCRD},
		ResyncPeriod:          300 * time.Millisecond,
	}
	reqs := &requests{}
	stop := run(t, newManager(t, reqs.config(env.Config), opts))

	// The validating configuration appears after the Manager found it
	// missing.
	eventually(t, time.Minute, "the Manager looks for the validating configuration", func(context.Context) (bool, error) {
		return reqs.Count(http.MethodGet, "/validatingwebhookconfigurations/"+name) > 0, nil
	})
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitForInjection(t, targets, "every webhook holds the bundle", keepsService)
	plainAfter, err := crds.Get(ctx, plainCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plainAfter.ResourceVersion != plainBefore.ResourceVersion {
		t.Errorf("the CRD without a conversion webhook was written (resourceVersion %s → %s)", plainBefore.ResourceVersion, plainAfter.ResourceVersion)
	}
	checkCurrentPassesWriteNothing(t, ctx, targets, reqs)
	stop()

	// URL mode: an operator outside the cluster is called at the URL.
	opts.URL = "https://127.0.0.1:9443"
	urlMode := newManager(t, env.Config, opts)
	stopURLMode := run(t, urlMode)
	waitForInjection(t, targets, "every webhook is called at the URL", calledAt(opts.URL))
	// The URL's host is a name of the certificate served.
	eventually(t, time.Minute, "the certificate holds 127.0.0.1", func(context.Context) (bool, error) {
		c, err := urlMode.GetCertificate(nil)
		if err != nil {
			return false, err
		}
		return c.Leaf.VerifyHostname("127.0.0.1") == nil, c.Leaf.VerifyHostname("127.0.0.1")
	})

	// That run ends without restoring (killed); the next, at another URL,
	// keeps the record of what came before the first.
	stopURLMode()
	second := opts
	second.URL = "https://127.0.0.2:9443"
	next := startManager(t, env.Config, second)
	waitForInjection(t, targets, "every webhook is called at the second URL", calledAt(second.URL))
	for _, annotations := range restoreRecords(t, ctx, name) {
		if !strings.Contains(annotations, `"url":"`+second.URL+`"`) || !strings.Contains(annotations, `"name":"handroll-webhook"`) {
			t.Errorf("the record %s does not hold the service from before the first URL", annotations)
		}
	}
	checkRestoredForGood(t, ctx, targets, next, opts.ResyncPeriod)
}

// webhookConfigurations returns a mutating and a validating configuration
// named name, each with two webhooks calling a path of a service in ns.
func webhookConfigurations(ns, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	service := func(path string) *admissionregistrationv1.ServiceReference {
		return &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "handroll-webhook", Path: ptr.To(path), Port: ptr.To[int32](443)}
	}
	// Rules for a resource that does not exist: these webhooks are never
	// called, only configured.
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"certs.handroll.test"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
	}}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, w := range []string{"a", "b"} {
		mutating.Webhooks = append(mutating.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: w + ".mutate.certs.handroll.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: service("/mutate-" + w)},
			Rules: rules, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		})
		validating.Webhooks = append(validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: w + ".validate.certs.handroll.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: service("/validate-" + w)},
			Rules: rules, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		})
	}
	return mutating, validating
}

// createMutatingConfiguration creates mutating, and deletes it and the
// validating configuration of its name when t ends.
func createMutatingConfiguration(t *testing.T, ctx context.Context, ar admissionregistrationv1client.AdmissionregistrationV1Interface, mutating *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	name := mutating.Name
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	t.Cleanup(func() {
		_ = ar.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// injectionTargets are TestInjection's webhook configurations (both named
// name) and its webhook CRD, with the Secret whose bundle they get.
type injectionTargets struct {
	kube     kubernetes.Interface
	crds     apiextensionsv1client.CustomResourceDefinitionInterface
	ns, name string
}

// bundle returns the Secret's ca.crt.
func (it injectionTargets) bundle(ctx context.Context) ([]byte, error) {
	s, err := it.kube.CoreV1().Secrets(it.ns).Get(ctx, certs.DefaultSecretName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return s.Data[certs.KeyCABundle], nil
}

// clientConfigCheck says whether a target's client config for path is
// right.
type clientConfigCheck func(admissionregistrationv1.WebhookClientConfig, string) error

// injected reports whether every target holds want, with the client
// config ok says is right.
func (it injectionTargets) injected(ctx context.Context, want []byte, ok clientConfigCheck) (bool, error) {
	ar := it.kube.AdmissionregistrationV1()
	m, err := ar.MutatingWebhookConfigurations().Get(ctx, it.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	v, err := ar.ValidatingWebhookConfigurations().Get(ctx, it.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	c, err := it.crds.Get(ctx, webhookCRD, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	type cc struct {
		admissionregistrationv1.WebhookClientConfig
		path string
	}
	var all []cc
	for i, w := range m.Webhooks {
		all = append(all, cc{w.ClientConfig, fmt.Sprintf("/mutate-%c", 'a'+i)})
	}
	for i, w := range v.Webhooks {
		all = append(all, cc{w.ClientConfig, fmt.Sprintf("/validate-%c", 'a'+i)})
	}
	all = append(all, cc{crdClientConfig(c), "/convert"})
	for _, c := range all {
		if !bytes.Equal(c.CABundle, want) {
			return false, fmt.Errorf("%s: caBundle is not the Secret's ca.crt", c.path)
		}
		if err := ok(c.WebhookClientConfig, c.path); err != nil {
			return false, err
		}
	}
	return true, nil
}

// keepsService is right when the client config calls the service, at its
// path.
func keepsService(cc admissionregistrationv1.WebhookClientConfig, path string) error {
	if cc.URL != nil || cc.Service == nil || cc.Service.Name != "handroll-webhook" || ptr.Deref(cc.Service.Path, "") != path {
		return fmt.Errorf("%s: service %+v, url %v; want the service kept", path, cc.Service, ptr.Deref(cc.URL, ""))
	}
	return nil
}

// calledAt is right when the client config calls url and the path, and no
// service.
func calledAt(url string) clientConfigCheck {
	return func(cc admissionregistrationv1.WebhookClientConfig, path string) error {
		if cc.Service != nil || ptr.Deref(cc.URL, "") != url+path {
			return fmt.Errorf("%s: service %+v, url %q; want url %q", path, cc.Service, ptr.Deref(cc.URL, ""), url+path)
		}
		return nil
	}
}

// waitForInjection waits until every target holds the Secret's bundle,
// with the client config ok says is right.
func waitForInjection(t *testing.T, it injectionTargets, desc string, ok clientConfigCheck) {
	t.Helper()
	eventually(t, 2*time.Minute, desc, func(ctx context.Context) (bool, error) {
		want, err := it.bundle(ctx)
		if err != nil {
			return false, err
		}
		return it.injected(ctx, want, ok)
	})
}

// checkCurrentPassesWriteNothing checks that, once current, later passes
// (one per ResyncPeriod) read each target and write nothing.
func checkCurrentPassesWriteNothing(t *testing.T, ctx context.Context, it injectionTargets, reqs *requests) {
	t.Helper()
	versions := func() []string {
		m, _ := it.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, it.name, metav1.GetOptions{})
		v, _ := it.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, it.name, metav1.GetOptions{})
		c, _ := it.crds.Get(ctx, webhookCRD, metav1.GetOptions{})
		s, _ := it.kube.CoreV1().Secrets(it.ns).Get(ctx, certs.DefaultSecretName, metav1.GetOptions{})
		return []string{m.ResourceVersion, v.ResourceVersion, c.ResourceVersion, s.ResourceVersion}
	}
	before := versions()
	puts := reqs.Count(http.MethodPut, "")
	gets := reqs.Count(http.MethodGet, "/customresourcedefinitions/"+webhookCRD)
	eventually(t, time.Minute, "three more passes", func(context.Context) (bool, error) {
		return reqs.Count(http.MethodGet, "/customresourcedefinitions/"+webhookCRD) >= gets+3, nil
	})
	if after := versions(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("resourceVersions (mutating, validating, CRD, Secret) went from %v to %v with nothing to change", before, after)
	}
	if n := reqs.Count(http.MethodPut, "") - puts; n != 0 {
		t.Errorf("%d updates with nothing to change", n)
	}
}

// checkRestoredForGood stops m as an operator does: every clientConfig
// calls its service again, with the bundle, the record is gone, and later
// passes of the stopping manager leave it so.
func checkRestoredForGood(t *testing.T, ctx context.Context, it injectionTargets, m *certs.Manager, resync time.Duration) {
	t.Helper()
	rctx, cancel := budget.Context(t, ctx, 30*time.Second, "the webhook configurations to be restored")
	defer cancel()
	if err := m.RestoreClientConfigs(rctx); err != nil {
		t.Fatal(err)
	}
	want, err := it.bundle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := it.injected(ctx, want, keepsService); !ok {
		t.Errorf("after RestoreClientConfigs: %v", err)
	}
	if left := restoreRecords(t, ctx, it.name); len(left) > 0 {
		t.Errorf("records left after RestoreClientConfigs: %v", left)
	}
	// Restored for good: later passes of the stopping manager leave it so.
	time.Sleep(3 * resync)
	if ok, err := it.injected(ctx, want, keepsService); !ok {
		t.Errorf("a pass after RestoreClientConfigs: %v", err)
	}
}

// restoreRecords returns the replaced-client-configs annotation of the
// test's webhook configurations and of the webhook CRD, where set.
func restoreRecords(t *testing.T, ctx context.Context, name string) []string {
	t.Helper()
	kube := env.KubeClient(t)
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := crds.Get(ctx, webhookCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range []map[string]string{m.Annotations, v.Annotations, c.Annotations} {
		if r, ok := a[certs.AnnotationReplacedClientConfigs]; ok {
			out = append(out, r)
		}
	}
	return out
}

func crdClientConfig(c *apiextensionsv1.CustomResourceDefinition) admissionregistrationv1.WebhookClientConfig {
	if c.Spec.Conversion == nil || c.Spec.Conversion.Webhook == nil || c.Spec.Conversion.Webhook.ClientConfig == nil {
		return admissionregistrationv1.WebhookClientConfig{}
	}
	cc := c.Spec.Conversion.Webhook.ClientConfig
	out := admissionregistrationv1.WebhookClientConfig{URL: cc.URL, CABundle: cc.CABundle}
	if s := cc.Service; s != nil {
		out.Service = &admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port}
	}
	return out
}
