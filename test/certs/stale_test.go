package certs

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/certs"
)

// TestStaleRecordIsRestored: a process serving the webhooks at a URL that
// dies without restoring (SIGKILL, a laptop closed) leaves the cluster
// calling that URL. The cluster's own replicas, which run without a URL,
// put the clientConfigs back once its record has gone unrenewed for
// StaleRecordRenewals renewals, and not while it is renewed.
func TestStaleRecordIsRestored(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	ar := env.KubeClient(t).AdmissionregistrationV1()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	name := "stale-" + ns
	svc := &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "handroll-webhook", Path: ptr.To("/validate"), Port: ptr.To[int32](443)}
	createStaleWebhook(t, ctx, ar, name, svc)

	opts := certs.Options{
		Namespace: ns, ServiceName: "handroll-webhook",
		WebhookConfigurations: []string{name},
		CRDs:                  []string{webhookCRD},
		ResyncPeriod:          time.Second,
		RecordRenewal:         300 * time.Millisecond,
	}
	local := opts
	local.URL = "https://127.0.0.3:9443"
	state := func(ctx context.Context) (url, crdURL, record string, err error) {
		v, err := ar.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", "", "", err
		}
		c, err := crds.Get(ctx, webhookCRD, metav1.GetOptions{})
		if err != nil {
			return "", "", "", err
		}
		return ptr.Deref(v.Webhooks[0].ClientConfig.URL, ""), ptr.Deref(crdClientConfig(c).URL, ""),
			v.Annotations[certs.AnnotationReplacedClientConfigs], nil
	}
	renewTime := func(record string) string {
		var r struct {
			RenewTime string `json:"renewTime"`
		}
		_ = json.Unmarshal([]byte(record), &r)
		return r.RenewTime
	}

	stopLocal := run(t, newManager(t, env.Config, local))
	var first string
	eventually(t, time.Minute, "the webhook and the conversion are called at the URL, with a record", func(ctx context.Context) (bool, error) {
		url, crdURL, record, err := state(ctx)
		first = renewTime(record)
		return url == local.URL+"/validate" && crdURL == local.URL+"/convert" && first != "", err
	})
	eventually(t, 30*time.Second, "the record is renewed", func(ctx context.Context) (bool, error) {
		_, _, record, err := state(ctx)
		return renewTime(record) != first, err
	})

	// A replica of the cluster beside the live run leaves it alone.
	run(t, newManager(t, env.Config, opts))
	watchFor := 3 * certs.StaleRecordRenewals * opts.RecordRenewal
	for deadline := time.Now().Add(watchFor); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		url, crdURL, _, err := state(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if url != local.URL+"/validate" || crdURL != local.URL+"/convert" {
			t.Fatalf("the cluster's replica took the webhooks back from a run that renews its record: webhook %q, conversion %q", url, crdURL)
		}
	}

	// The run dies without restoring; the replica puts everything back.
	stopLocal()
	waitForServicesRestored(t, ar, crds, name, svc)
}

// createStaleWebhook creates the validating configuration name, calling
// svc, and deletes it when t ends.
func createStaleWebhook(t *testing.T, ctx context.Context, ar admissionregistrationv1client.AdmissionregistrationV1Interface, name string, svc *admissionregistrationv1.ServiceReference) {
	t.Helper()
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"certs.handroll.test"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
	}}
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "v.stale.certs.handroll.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc},
			Rules: rules, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitForServicesRestored waits until the webhook and the conversion call
// their services again, with a bundle, and neither holds a record.
func waitForServicesRestored(t *testing.T, ar admissionregistrationv1client.AdmissionregistrationV1Interface, crds apiextensionsv1client.CustomResourceDefinitionInterface, name string, svc *admissionregistrationv1.ServiceReference) {
	t.Helper()
	eventually(t, time.Minute, "the cluster's replica restores the services and drops the record", func(ctx context.Context) (bool, error) {
		v, err := ar.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c, err := crds.Get(ctx, webhookCRD, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cc, conv := v.Webhooks[0].ClientConfig, crdClientConfig(c)
		switch {
		case cc.URL != nil || cc.Service == nil || cc.Service.Name != svc.Name || ptr.Deref(cc.Service.Path, "") != "/validate":
			return false, fmt.Errorf("webhook: %+v", cc)
		case conv.URL != nil || conv.Service == nil || ptr.Deref(conv.Service.Path, "") != "/convert":
			return false, fmt.Errorf("conversion: %+v", conv)
		case len(cc.CABundle) == 0 || len(conv.CABundle) == 0:
			return false, fmt.Errorf("a caBundle is empty")
		}
		_, recorded := v.Annotations[certs.AnnotationReplacedClientConfigs]
		_, crdRecorded := c.Annotations[certs.AnnotationReplacedClientConfigs]
		return !recorded && !crdRecorded, nil
	})
}
