package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthEndpoints(t *testing.T) {
	h := &Health{}
	h.AddLivenessCheck(Ping)
	h.AddReadinessCheck(Ping)
	synced := false
	h.AddReadinessCheck(Check{Name: "informer-sync", Check: func(*http.Request) error {
		if !synced {
			return errors.New("not synced")
		}
		return nil
	}})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	cases := []struct {
		path     string
		synced   bool
		wantCode int
		wantBody []string
	}{
		{"/healthz", false, 200, []string{"ok"}},
		{"/livez", false, 200, []string{"ok"}},
		{"/readyz", false, 500, []string{"[-]informer-sync failed: not synced", "[+]ping ok", "readyz check failed: informer-sync"}},
		{"/readyz/ping", false, 200, []string{"ok"}},
		{"/readyz/informer-sync", false, 500, []string{"not synced"}},
		{"/readyz?exclude=informer-sync", false, 200, []string{"ok"}},
		{"/readyz/nope", false, 404, []string{`no check named "nope"`}},
		{"/readyz", true, 200, []string{"ok"}},
		{"/readyz?verbose", true, 200, []string{"[+]ping ok", "[+]informer-sync ok", "readyz check passed"}},
	}
	for _, tc := range cases {
		synced = tc.synced
		code, body := get(tc.path)
		if code != tc.wantCode {
			t.Errorf("GET %s (synced=%v) = %d, want %d; body:\n%s", tc.path, tc.synced, code, tc.wantCode, body)
		}
		for _, want := range tc.wantBody {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s (synced=%v): body does not contain %q:\n%s", tc.path, tc.synced, want, body)
			}
		}
	}

	resp, err := http.Post(srv.URL+"/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz = %d, want 405", resp.StatusCode)
	}
}

func TestPprofHandler(t *testing.T) {
	srv := httptest.NewServer(PprofHandler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/debug/pprof/":          "goroutine",
		"/debug/pprof/goroutine": "goroutine profile",
		"/debug/pprof/cmdline":   "",
	} {
		resp, err := http.Get(srv.URL + path + "?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d, body does not contain %q", path, resp.StatusCode, want)
		}
	}
}

// A report (the API server's readiness) is served at its own path and
// listed, but a failing one leaves /readyz passing.
func TestReadinessReportIsNotCounted(t *testing.T) {
	h := &Health{}
	h.AddReadinessCheck(Ping)
	runs := 0
	h.AddReadinessReport(Check{Name: "api-server", Check: func(*http.Request) error {
		runs++
		return errors.New("the API server does not answer")
	}})
	mux := http.NewServeMux()
	h.Register(mux)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/readyz = %d %q, want 200 ok while only a report fails", code, body)
	}
	if runs != 0 {
		t.Errorf("a plain /readyz ran the report %d times; it costs a request", runs)
	}
	if code, body := get("/readyz?verbose"); code != http.StatusOK ||
		!strings.Contains(body, "[-]api-server failed (reported, not counted): the API server does not answer") {
		t.Errorf("/readyz?verbose = %d %q, want 200 listing the failed report", code, body)
	}
	if code, body := get("/readyz/api-server"); code != http.StatusInternalServerError || !strings.Contains(body, "does not answer") {
		t.Errorf("/readyz/api-server = %d %q, want 500 with the reason", code, body)
	}
}
