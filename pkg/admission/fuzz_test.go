package admission_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/handroll/handroll/pkg/admission"
	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/pkg/server"
)

// FuzzAdmissionReview sends any body to both WebApp webhooks, as the API
// server (or anyone who can reach the port) might. Whatever arrives, the
// answer is a 4xx with a message or a 200 AdmissionReview that answers the
// request's uid — never a 500, which is what a recovered panic becomes.
func FuzzAdmissionReview(f *testing.F) {
	s, err := scheme.New()
	if err != nil {
		f.Fatal(err)
	}
	mux := server.NewWebhookMux()
	admission.Register(mux, s)
	for _, seed := range []string{
		"",
		"{",
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"handroll.dev","version":"v1","kind":"WebApp"},"operation":"CREATE","object":{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"a","namespace":"n"},"spec":{"image":"nginx:1.27"}}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"handroll.dev","version":"v1","kind":"WebApp"},"operation":"UPDATE","object":{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"a"},"spec":{"image":"Nginx","replicas":51,"env":[{"name":"HANDROLL_X"}],"config":{"a/b":"x"},"service":{"type":"NodePort","nodePort":1}}},"oldObject":{"apiVersion":"handroll.dev/v1","kind":"WebApp"}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"object":{"apiVersion":"v1","kind":"Pod"}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"handroll.dev","version":"v1","kind":"WebApp"},"operation":"CREATE","object":{"apiVersion":"handroll.dev/v1","kind":"WebApp","spec":{"resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{admission.DefaulterPath, admission.ValidatorPath} {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			switch {
			case rec.Code >= 500:
				t.Fatalf("%s answered %d (a panic, recovered): %s", path, rec.Code, rec.Body)
			case rec.Code >= 400:
				if rec.Body.Len() == 0 {
					t.Fatalf("%s answered %d with no message", path, rec.Code)
				}
			case rec.Code == http.StatusOK:
				var in, out admissionv1.AdmissionReview
				if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
					t.Fatalf("%s answered 200 to a body that is no AdmissionReview: %q", path, body)
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
					t.Fatalf("%s answered 200 without an AdmissionReview response: %s", path, rec.Body)
				}
				if out.Response.UID != in.Request.UID {
					t.Fatalf("%s answered uid %q to request %q", path, out.Response.UID, in.Request.UID)
				}
			default:
				t.Fatalf("%s answered %d", path, rec.Code)
			}
		}
	})
}
