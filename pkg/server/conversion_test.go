package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/pkg/server"
)

func conversionHandler(t *testing.T) http.Handler {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := server.NewWebhookMux()
	mux.Handle("/convert", server.ServeConversion(s))
	return mux
}

func postConversion(t *testing.T, h http.Handler, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// review builds a ConversionReview with the API server's own types, so the
// wire form of ours is checked against theirs.
func review(t *testing.T, to string, objects ...string) []byte {
	t.Helper()
	r := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "uid-1", DesiredAPIVersion: to},
	}
	for _, o := range objects {
		r.Request.Objects = append(r.Request.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeResponse(t *testing.T, rec *httptest.ResponseRecorder) *apiextensionsv1.ConversionResponse {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var r apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("the response is not a ConversionReview: %v\n%s", err, rec.Body)
	}
	if r.Kind != "ConversionReview" || r.APIVersion != "apiextensions.k8s.io/v1" || r.Response == nil {
		t.Fatalf("response %s", rec.Body)
	}
	if r.Response.UID != "uid-1" {
		t.Errorf("response uid %q, want the request's", r.Response.UID)
	}
	return r.Response
}

func TestConversionMalformedRequests(t *testing.T) {
	h := conversionHandler(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"empty", "", "empty body"},
		{"not JSON", "{", "not a JSON object"},
		{"admission review", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "expected kind ConversionReview"},
		{"v1beta1 review", `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview"}`, "conversionReviewVersions"},
		{"no request", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, "no request"},
		{"no uid", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"desiredAPIVersion":"handroll.dev/v1"}}`, "no uid"},
		{"no desired version", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u"}}`, "no desiredAPIVersion"},
		{"objects not a list", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"handroll.dev/v1","objects":3}}`, "decoding ConversionReview"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := postConversion(t, h, []byte(tc.body))
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("got %d %q, want 400 containing %q", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

func TestConversionFailuresAreReported(t *testing.T) {
	h := conversionHandler(t)
	for _, tc := range []struct {
		name, to, object, want string
	}{
		{"unknown kind", "handroll.dev/v1", `{"apiVersion":"handroll.dev/v1alpha1","kind":"Gadget","metadata":{"name":"a"}}`, "not served"},
		{"other group", "apps/v1", `{"apiVersion":"handroll.dev/v1alpha1","kind":"WebApp","metadata":{"name":"a"}}`, "different group"},
		{"no kind", "handroll.dev/v1", `{"metadata":{"name":"a"}}`, "no apiVersion or kind"},
		{"bad desired version", "handroll.dev/v1/x", `{"apiVersion":"handroll.dev/v1alpha1","kind":"WebApp"}`, "desiredAPIVersion"},
		{"not an object", "handroll.dev/v1", `[1]`, "objects[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := decodeResponse(t, postConversion(t, h, review(t, tc.to, tc.object)))
			if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("result %+v, want Failure containing %q", resp.Result, tc.want)
			}
			if len(resp.ConvertedObjects) != 0 {
				t.Errorf("a failed review returned %d objects", len(resp.ConvertedObjects))
			}
		})
	}
}

func TestConversionSameVersionIsUnchanged(t *testing.T) {
	h := conversionHandler(t)
	obj := `{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"a","namespace":"n"},"spec":{"image":"nginx"}}`
	resp := decodeResponse(t, postConversion(t, h, review(t, "handroll.dev/v1", obj)))
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("result %+v, %d objects", resp.Result, len(resp.ConvertedObjects))
	}
	if string(resp.ConvertedObjects[0].Raw) != obj {
		t.Errorf("got %s, want the object unchanged", resp.ConvertedObjects[0].Raw)
	}
}

// TestConversionPanicIsCountedAndAnswered: a conversion function that
// panics gets the API server a Failure, not a dropped connection, and is
// counted in controller_runtime_conversion_webhook_panics_total.
func TestConversionPanicIsCountedAndAnswered(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddConversionFunc((*handrollv1alpha1.WebApp)(nil), (*handrollv1.WebApp)(nil), func(_, _ any, _ conversion.Scope) error {
		panic("boom")
	}); err != nil {
		t.Fatal(err)
	}
	mux := server.NewWebhookMux()
	mux.Handle("/convert", server.ServeConversion(s))
	reg := prometheus.NewRegistry()
	if err := mux.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	panics := func() float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "controller_runtime_conversion_webhook_panics_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("controller_runtime_conversion_webhook_panics_total is not served")
		return 0
	}
	before := panics()
	resp := decodeResponse(t, postConversion(t, mux, review(t, "handroll.dev/v1", `{"apiVersion":"handroll.dev/v1alpha1","kind":"WebApp","metadata":{"name":"a"}}`)))
	if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, "internal error") {
		t.Errorf("result %+v, want an internal-error Failure", resp.Result)
	}
	if got := panics() - before; got != 1 {
		t.Errorf("the panics counter rose by %v, want 1", got)
	}
}
