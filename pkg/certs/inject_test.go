package certs

import (
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func TestApplyToWebhookClientConfig(t *testing.T) {
	bundle := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	service := func(path *string) *admissionregistrationv1.ServiceReference {
		return &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Path: path, Port: ptr.To[int32](443)}
	}
	cases := []struct {
		name string
		in   injection
		cc   admissionregistrationv1.WebhookClientConfig
		want admissionregistrationv1.WebhookClientConfig
	}{{
		name: "service: the bundle only",
		in:   injection{bundle: bundle},
		cc:   admissionregistrationv1.WebhookClientConfig{Service: service(ptr.To("/validate"))},
		want: admissionregistrationv1.WebhookClientConfig{Service: service(ptr.To("/validate")), CABundle: bundle},
	}, {
		name: "an old bundle is replaced",
		in:   injection{bundle: bundle},
		cc:   admissionregistrationv1.WebhookClientConfig{Service: service(nil), CABundle: []byte("old")},
		want: admissionregistrationv1.WebhookClientConfig{Service: service(nil), CABundle: bundle},
	}, {
		name: "URL mode: service becomes url with its path",
		in:   injection{bundle: bundle, url: "https://127.0.0.1:9443"},
		cc:   admissionregistrationv1.WebhookClientConfig{Service: service(ptr.To("/mutate-x"))},
		want: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/mutate-x"), CABundle: bundle},
	}, {
		name: "URL mode: a service without a path",
		in:   injection{bundle: bundle, url: "https://127.0.0.1:9443"},
		cc:   admissionregistrationv1.WebhookClientConfig{Service: service(nil)},
		want: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443"), CABundle: bundle},
	}, {
		name: "URL mode: another url keeps its path",
		in:   injection{bundle: bundle, url: "https://dev.example:8443"},
		cc:   admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/validate-x")},
		want: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://dev.example:8443/validate-x"), CABundle: bundle},
	}, {
		name: "cluster mode leaves a url alone",
		in:   injection{bundle: bundle},
		cc:   admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/validate-x")},
		want: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/validate-x"), CABundle: bundle},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := *tc.cc.DeepCopy()
			if !tc.in.apply(&cc) {
				t.Error("reported no change")
			}
			if diff := cmp.Diff(tc.want, cc); diff != "" {
				t.Errorf("clientConfig (-want +got):\n%s", diff)
			}
			if tc.in.apply(&cc) {
				t.Error("a second apply reported a change: the next pass would write again")
			}
		})
	}
}

func crd(strategy string, clientConfig map[string]any) *unstructured.Unstructured {
	conversion := map[string]any{"strategy": strategy}
	if clientConfig != nil {
		conversion["webhook"] = map[string]any{"clientConfig": clientConfig, "conversionReviewVersions": []any{"v1"}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"spec":       map[string]any{"conversion": conversion},
	}}
}

func TestApplyToCRD(t *testing.T) {
	bundle := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	b64 := base64.StdEncoding.EncodeToString(bundle)
	service := func() map[string]any {
		return map[string]any{"namespace": "ns", "name": "svc", "path": "/convert", "port": int64(443)}
	}

	t.Run("conversion None is left alone", func(t *testing.T) {
		obj := crd("None", nil)
		before := obj.DeepCopy()
		changed, ok, err := injection{bundle: bundle}.applyCRD(obj)
		if err != nil || ok || changed {
			t.Fatalf("applyCRD = changed %v, ok %v, %v; want not ok", changed, ok, err)
		}
		if diff := cmp.Diff(before, obj); diff != "" {
			t.Errorf("changed (-before +after):\n%s", diff)
		}
	})
	cases := []struct {
		name string
		in   injection
		cc   map[string]any
		want map[string]any
	}{{
		name: "service: the bundle only",
		in:   injection{bundle: bundle},
		cc:   map[string]any{"service": service()},
		want: map[string]any{"service": service(), "caBundle": b64},
	}, {
		name: "service elsewhere: pointed at ours, with the bundle",
		in:   injection{bundle: bundle, service: service()},
		cc:   map[string]any{"service": map[string]any{"namespace": "handroll-system", "name": "svc", "path": "/convert", "port": int64(443)}},
		want: map[string]any{"service": service(), "caBundle": b64},
	}, {
		name: "service: port and path too",
		in:   injection{bundle: bundle, service: service()},
		cc:   map[string]any{"service": map[string]any{"namespace": "ns", "name": "svc", "port": int64(8443)}, "caBundle": b64},
		want: map[string]any{"service": service(), "caBundle": b64},
	}, {
		name: "service: a url becomes our service",
		in:   injection{bundle: bundle, service: service()},
		cc:   map[string]any{"url": "https://127.0.0.1:9443/convert"},
		want: map[string]any{"service": service(), "caBundle": b64},
	}, {
		name: "URL mode",
		in:   injection{bundle: bundle, url: "https://127.0.0.1:9443"},
		cc:   map[string]any{"service": service(), "caBundle": "b2xk"},
		want: map[string]any{"url": "https://127.0.0.1:9443/convert", "caBundle": b64},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := crd("Webhook", tc.cc)
			changed, ok, err := tc.in.applyCRD(obj)
			if err != nil || !ok || !changed {
				t.Fatalf("applyCRD = changed %v, ok %v, %v", changed, ok, err)
			}
			got, _, _ := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook", "clientConfig")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("clientConfig (-want +got):\n%s", diff)
			}
			if v, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "conversion", "webhook", "conversionReviewVersions"); len(v) != 1 {
				t.Errorf("conversionReviewVersions lost: %v", v)
			}
			if changed, _, _ := tc.in.applyCRD(obj); changed {
				t.Error("a second apply reported a change")
			}
		})
	}
}
