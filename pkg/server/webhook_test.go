package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func reviewBody(t *testing.T, uid types.UID) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: uid, Operation: admissionv1.Create, Name: "shop"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allowNamed allows, with the request's name as the result message, so a
// test sees that review got the request.
func allowNamed(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		UID:     "something else: ServeAdmission must overwrite it",
		Allowed: true,
		Result:  &metav1.Status{Message: "saw " + req.Name},
	}
}

func post(t *testing.T, c *http.Client, url, contentType string, body io.Reader) (int, string) {
	t.Helper()
	resp, err := c.Post(url, contentType, body)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func decodeResponse(t *testing.T, body string) *admissionv1.AdmissionReview {
	t.Helper()
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal([]byte(body), &ar); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v\n%s", err, body)
	}
	if ar.APIVersion != "admission.k8s.io/v1" || ar.Kind != "AdmissionReview" || ar.Response == nil || ar.Request != nil {
		t.Fatalf("response review has apiVersion %q, kind %q, response %v, request %v", ar.APIVersion, ar.Kind, ar.Response, ar.Request)
	}
	return &ar
}

// startAdmissionServer serves ServeAdmission(allowNamed) at /validate over
// TLS, with a certificate from files through a CertWatcher; it returns the
// server and a pool that trusts its certificate.
func startAdmissionServer(t *testing.T) (*Server, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	pair := newTestPair(t, "webhook", time.Now().Add(time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, pair.certPEM, pair.keyPEM)
	cw, err := NewCertWatcher(dir, CertWatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := startWebhookServer(t, cw, "/validate", ServeAdmission(allowNamed))
	pool := x509.NewCertPool()
	pool.AddCert(pair.cert)
	return s, pool
}

// TestWebhookServerOverTLS drives the whole path: TLS from a CertWatcher,
// the mux's routing and guards, ServeAdmission, and the UID echo.
func TestWebhookServerOverTLS(t *testing.T) {
	s, pool := startAdmissionServer(t)
	if got := s.Webhooks().Paths(); len(got) != 1 || got[0] != "/validate" {
		t.Errorf("Paths() = %v", got)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	base := "https://" + s.BoundAddr()

	code, body := post(t, client, base+"/validate", "application/json", bytes.NewReader(reviewBody(t, "uid-1")))
	if code != http.StatusOK {
		t.Fatalf("POST a review = %d: %s", code, body)
	}
	ar := decodeResponse(t, body)
	if ar.Response.UID != "uid-1" || !ar.Response.Allowed || ar.Response.Result.Message != "saw shop" {
		t.Errorf("response = %+v, want uid-1, allowed, message from review", ar.Response)
	}

	cases := []struct {
		name, path, method, contentType string
		body                            io.Reader
		wantCode                        int
		wantMsg                         string
	}{
		{"unknown path", "/nope", "POST", "application/json", bytes.NewReader(reviewBody(t, "u")), 404, "no webhook at /nope"},
		{"GET", "/validate", "GET", "", nil, 405, "method GET not allowed"},
		{"text/plain", "/validate", "POST", "text/plain", strings.NewReader("{}"), 415, `content type "text/plain" not supported`},
		{"no content type", "/validate", "POST", "", strings.NewReader("{}"), 415, `content type "" not supported`},
		{"json with charset", "/validate", "POST", "application/json; charset=utf-8", bytes.NewReader(reviewBody(t, "u")), 200, `"uid":"u"`},
		{"8 MiB with a length", "/validate", "POST", "application/json", bytes.NewReader(make([]byte, 8<<20)), 413, "request body larger than"},
		// No Content-Length (chunked): only the MaxBytesReader can stop it.
		{"8 MiB chunked", "/validate", "POST", "application/json", io.MultiReader(strings.NewReader(" "), bytes.NewReader(make([]byte, 8<<20))), 413, "request body larger than"},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, base+tc.path, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantCode || !strings.Contains(string(b), tc.wantMsg) {
			t.Errorf("%s: got %d %q, want %d containing %q", tc.name, resp.StatusCode, b, tc.wantCode, tc.wantMsg)
		}
		if tc.wantCode == 405 && resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s: Allow = %q, want POST", tc.name, resp.Header.Get("Allow"))
		}
	}

	// The server still answers after all that.
	if code, body := post(t, client, base+"/validate", "application/json", bytes.NewReader(reviewBody(t, "uid-2"))); code != 200 || decodeResponse(t, body).Response.UID != "uid-2" {
		t.Errorf("POST after bad requests = %d: %s", code, body)
	}

	// TLS 1.1 and older are refused.
	old := &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", s.BoundAddr(), old); err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
}

func TestServeAdmissionRejectsMalformedReviews(t *testing.T) {
	var called atomic.Int32
	srv := httptest.NewServer(ServeAdmission(func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		called.Add(1)
		return allowNamed(req)
	}))
	defer srv.Close()

	valid := string(reviewBody(t, "u"))
	cases := map[string]struct{ body, want string }{
		"empty":                 {"", "empty body"},
		"white space":           {" \n\t", "empty body"},
		"truncated":             {valid[:len(valid)/2], "not a JSON object"},
		"trailing garbage":      {valid + "}", "not a JSON object"},
		"array":                 {"[]", "not a JSON object"},
		"null":                  {"null", `got kind "", apiVersion ""`},
		"string":                {`"AdmissionReview"`, "not a JSON object"},
		"v1beta1":               {strings.Replace(valid, "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), `admissionReviewVersions: ["v1"]`},
		"ConversionReview":      {`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u"}}`, `got kind "ConversionReview"`},
		"a Pod":                 {`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, `got kind "Pod", apiVersion "v1"`},
		"no request":            {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "has no request"},
		"null request":          {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`, "has no request"},
		"no uid":                {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`, "has no uid"},
		"request of wrong type": {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}`, "decoding AdmissionReview"},
	}
	for name, tc := range cases {
		code, body := post(t, srv.Client(), srv.URL, "application/json", strings.NewReader(tc.body))
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: got %d %q, want 400 containing %q", name, code, body, tc.want)
		}
	}
	if n := called.Load(); n != 0 {
		t.Errorf("review called %d times for malformed reviews", n)
	}
	if code, body := post(t, srv.Client(), srv.URL, "application/json", strings.NewReader(valid)); code != 200 || called.Load() != 1 {
		t.Errorf("valid review after malformed ones = %d (review called %d times): %s", code, called.Load(), body)
	}
}

func TestServeAdmissionRecoversFromPanics(t *testing.T) {
	var mode atomic.Value // string
	mode.Store("")
	srv := httptest.NewServer(ServeAdmission(func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		switch mode.Load().(string) {
		case "panic":
			var m map[string]int
			m["boom"]++ //nolint:govet,staticcheck // the nil-map write is the point: a real runtime panic, not a test-made one
		case "nil":
			return nil
		}
		return allowNamed(req)
	}))
	defer srv.Close()

	for _, m := range []string{"panic", "nil", "panic"} {
		mode.Store(m)
		code, body := post(t, srv.Client(), srv.URL, "application/json", bytes.NewReader(reviewBody(t, "u")))
		if code != http.StatusInternalServerError || !strings.Contains(body, "internal error") {
			t.Errorf("%s: got %d %q, want 500 internal error", m, code, body)
		}
	}
	mode.Store("")
	code, body := post(t, srv.Client(), srv.URL, "application/json", bytes.NewReader(reviewBody(t, "u-after")))
	if code != 200 || decodeResponse(t, body).Response.UID != "u-after" {
		t.Errorf("after panics: %d %s", code, body)
	}
}

func TestWebhookMuxHandleMisuse(t *testing.T) {
	m := NewWebhookMux()
	m.Handle("/a", http.NotFoundHandler())
	for name, path := range map[string]string{"twice": "/a", "relative": "a", "empty": ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) (%s) did not panic", path, name)
				}
			}()
			m.Handle(path, http.NotFoundHandler())
		}()
	}
	if (&Server{Handler: http.NewServeMux()}).Webhooks() != nil {
		t.Error("Webhooks() of a non-webhook server is not nil")
	}
}

// TestWebhookServerSpeaksHTTP2 shows that the webhook server offers
// HTTP/2, whose GOAWAY lets the API server retry a call that a stopping
// replica will not answer (test/upgrade TestRestartRefusesNoWrite shows the
// stop), and still answers HTTP/1.1 clients.
func TestWebhookServerSpeaksHTTP2(t *testing.T) {
	s, pool := startAdmissionServer(t)
	for _, tc := range []struct {
		name      string
		transport *http.Transport
		wantProto string
	}{
		// As client-go's transport for the API server's webhook calls.
		{"HTTP/2 offered", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}, "HTTP/2.0"},
		{"HTTP/1.1 only", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, "HTTP/1.1"},
	} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: tc.transport}
		resp, err := client.Post("https://"+s.BoundAddr()+"/validate", "application/json", bytes.NewReader(reviewBody(t, "uid-h2")))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Proto != tc.wantProto || resp.StatusCode != http.StatusOK || decodeResponse(t, string(body)).Response.UID != "uid-h2" {
			t.Errorf("%s: %s %d %s; want %s 200 with the review's UID", tc.name, resp.Proto, resp.StatusCode, body, tc.wantProto)
		}
	}
}
