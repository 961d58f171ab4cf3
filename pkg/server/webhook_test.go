package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/transport"
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

// TestWebhookServerSpreadsCallsOverConnections: the API server's HTTP/2
// client sends at most webhookMaxConcurrentStreams calls on one
// connection, and dials another (through the Service, perhaps to another
// replica) for more; and a connection past its maximum age is closed after
// the call that finds it so, which is answered, so that the next call
// dials again.
func TestWebhookServerSpreadsCallsOverConnections(t *testing.T) {
	dir := t.TempDir()
	pair := newTestPair(t, "webhook", time.Now().Add(time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, pair.certPEM, pair.keyPEM)
	cw, err := NewCertWatcher(dir, CertWatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var blocked sync.WaitGroup
	s := startWebhookServer(t, cw, "/validate", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("block") {
			blocked.Done()
			<-release
		}
		ServeAdmission(allowNamed).ServeHTTP(w, r)
	}))
	var dials atomic.Int32
	client := dialCountingClient(pair.cert, &dials)
	call := func(query string) error {
		return postOverHTTP2(t, client, "https://"+s.BoundAddr()+"/validate"+query)
	}
	if err := call(""); err != nil {
		t.Fatal(err)
	}
	const n = webhookMaxConcurrentStreams + 1
	if n > 100 {
		t.Fatalf("webhookMaxConcurrentStreams = %d: more than 100 calls a connection", webhookMaxConcurrentStreams)
	}
	blocked.Add(n)
	errs := make(chan error, n)
	for range n {
		go func() { errs <- call("?block") }()
	}
	blocked.Wait()
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := dials.Load(); got != 2 {
		t.Errorf("%d calls at once took %d connections, want 2", n, got)
	}

	// Aged connections: the first call past the age is answered, then
	// its connection goes.
	client.CloseIdleConnections()
	aged, stop := startAgedWebhookServer(t, cw)
	defer func() {
		client.CloseIdleConnections() // else the stop waits out its grace for them
		stop()
	}()
	s = aged
	dials.Store(0)
	var got []int32
	for i := range 3 {
		if err := call(""); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		got = append(got, dials.Load())
		time.Sleep(200 * time.Millisecond)
	}
	// The second call finds the first's connection aged, and is answered
	// on it; the third dials.
	if !slices.Equal(got, []int32{1, 1, 2}) {
		t.Errorf("connections dialled by each of 3 calls spaced past the maximum age: %v, want [1 1 2]", got)
	}
}

// dialCountingClient is an HTTP/2 client that trusts ca and counts its
// dials in dials.
func dialCountingClient(ca *x509.Certificate, dials *atomic.Int32) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// postOverHTTP2 posts a review to url and fails unless it is answered 200
// over HTTP/2.
func postOverHTTP2(t *testing.T, client *http.Client, url string) error {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewReader(reviewBody(t, "uid")))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" {
		return fmt.Errorf("%s %d", resp.Proto, resp.StatusCode)
	}
	return nil
}

// startAgedWebhookServer serves allowNamed from cw with a maximum
// connection age of 100 ms, until stop is called.
func startAgedWebhookServer(t *testing.T, cw *CertWatcher) (aged *Server, stop func()) {
	t.Helper()
	aged = NewWebhookServer("127.0.0.1:0", cw)
	aged.MaxConnectionAge = 100 * time.Millisecond
	aged.Webhooks().Handle("/validate", ServeAdmission(allowNamed))
	if err := aged.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- aged.Serve(ctx, time.Second) }()
	return aged, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the aged server's Serve: %v", err)
		}
	}
}

// Environment of TestWebhookReplicaFrozen: set to 1 to run the measurement
// (a minute or more per protocol); the others are for its replicas.
const (
	envMeasureFrozen = "HANDROLL_MEASURE_FROZEN_REPLICA"
	envReplicaDir    = "HANDROLL_WEBHOOK_REPLICA_CERT_DIR"
	envReplicaHTTP1  = "HANDROLL_WEBHOOK_REPLICA_HTTP1"
	envMeasureRate   = "HANDROLL_MEASURE_FROZEN_RATE" // calls a second; 20 unless set
)

// TestWebhookReplicaProcess is one webhook replica of
// TestWebhookReplicaFrozen, run as a process of its own so that it can be
// frozen with SIGSTOP: NewWebhookServer on a loopback port, printed on
// stdout, until it is killed. Its answers carry its pid.
func TestWebhookReplicaProcess(t *testing.T) {
	dir := os.Getenv(envReplicaDir)
	if dir == "" {
		t.Skip("a replica of TestWebhookReplicaFrozen")
	}
	cw, err := NewCertWatcher(dir, CertWatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := NewWebhookServer("127.0.0.1:0", cw)
	if os.Getenv(envReplicaHTTP1) != "" {
		s.TLS.NextProtos = []string{"http/1.1"}
	}
	s.Webhooks().Handle("/validate", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Replica", strconv.Itoa(os.Getpid()))
		ServeAdmission(allowNamed).ServeHTTP(w, r)
	}))
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("listening %s\n", s.BoundAddr())
	_ = s.Serve(context.Background(), time.Second)
}

// TestWebhookReplicaFrozen measures what the API server sees when the
// webhook replica it is connected to is frozen (SIGSTOP: alive, not
// answering), one of two replicas behind a Service. The caller is
// client-go's transport as kube-apiserver's webhook client builds it
// (rest.Config with a Dial, so utilnet.SetTransportDefaults with its
// HTTP/2 health check), each call bounded by the webhooks' default
// timeoutSeconds (10 s); its dial picks a replica per connection as
// kube-proxy does. Calls arrive at a steady rate; the replica that served
// the last one before the freeze is frozen, and the calls refused after
// are counted, over HTTP/2 and over HTTP/1.1.
//
// HANDROLL_MEASURE_FROZEN_REPLICA=1 [HANDROLL_MEASURE_FROZEN_RATE=20] go test ./pkg/server -run TestWebhookReplicaFrozen -v
func TestWebhookReplicaFrozen(t *testing.T) {
	if os.Getenv(envMeasureFrozen) == "" {
		t.Skip("a measurement of a minute per protocol: set " + envMeasureFrozen + "=1")
	}
	dir := t.TempDir()
	pair := newTestPair(t, "webhook", time.Now().Add(time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, pair.certPEM, pair.keyPEM)
	for _, proto := range []string{"h2", "http/1.1"} {
		t.Run(strings.ReplaceAll(proto, "/", ""), func(t *testing.T) {
			measureFrozenReplica(t, dir, pair.certPEM, proto == "http/1.1")
		})
	}
}

type frozenCall struct {
	sent, ended time.Time
	replica     string
	err         error
}

func measureFrozenReplica(t *testing.T, dir string, caPEM []byte, http1 bool) {
	rate := 20 // calls a second
	if r, err := strconv.Atoi(os.Getenv(envMeasureRate)); err == nil && r > 0 {
		rate = r
	}
	const (
		warmUp   = 3 * time.Second
		observed = 60 * time.Second
	)
	addrs, procs := startFrozenReplicas(t, dir, http1)
	client := serviceClient(t, caPEM, addrs)
	body := reviewBody(t, "uid-frozen")

	var mu sync.Mutex
	var calls []frozenCall
	var wg sync.WaitGroup
	call := func() {
		c := callFrozenService(client, body)
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
	var frozenAt time.Time
	var frozen string
	for now := range tick.C {
		if now.Sub(start) > warmUp+observed {
			break
		}
		if frozenAt.IsZero() && now.Sub(start) > warmUp {
			mu.Lock()
			last := calls[len(calls)-1].replica
			mu.Unlock()
			if err := procs[last].Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			frozenAt, frozen = time.Now(), last
		}
		wg.Go(call)
	}
	wg.Wait()

	logFrozenCalls(t, calls, frozenAt, frozen, http1, rate, observed)
}

// startFrozenReplicas starts two TestWebhookReplicaProcess replicas, killed
// when the test ends, and returns their addresses and processes by pid.
func startFrozenReplicas(t *testing.T, dir string, http1 bool) (addrs map[string]string, procs map[string]*os.Process) {
	t.Helper()
	addrs = map[string]string{} // pid → address
	procs = map[string]*os.Process{}
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWebhookReplicaProcess$", "-test.v")
		cmd.Env = append(os.Environ(), envReplicaDir+"="+dir, envMeasureFrozen+"=")
		if http1 {
			cmd.Env = append(cmd.Env, envReplicaHTTP1+"=1")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				pid := strconv.Itoa(cmd.Process.Pid)
				addrs[pid], procs[pid] = addr, cmd.Process
				break
			}
		}
		go func() { _, _ = io.Copy(io.Discard, out) }()
	}
	if len(addrs) != 2 {
		t.Fatalf("replicas listening: %v", addrs)
	}
	return addrs, procs
}

// serviceClient is client-go's transport as kube-apiserver's webhook
// client builds it, dialling the replicas at addrs as a Service would.
func serviceClient(t *testing.T, caPEM []byte, addrs map[string]string) *http.Client {
	t.Helper()
	var backends []string
	for _, a := range addrs {
		backends = append(backends, a)
	}
	rt, err := transport.New(&transport.Config{
		TLS: transport.TLSConfig{CAData: caPEM, ServerName: "localhost"},
		DialHolder: &transport.DialHolder{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			// A Service's ClusterIP: a replica per connection.
			var d net.Dialer
			return d.DialContext(ctx, network, backends[mathrand.IntN(len(backends))])
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt}
}

// callFrozenService makes one call through client, bounded by the
// webhooks' default timeout, and records it.
func callFrozenService(client *http.Client, body []byte) frozenCall {
	const (
		timeout   = 10 * time.Second
		callsPath = "/validate"
	)
	c := frozenCall{sent: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://webhook.handroll-system.svc:443"+callsPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.replica = resp.Header.Get("X-Replica")
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	c.ended, c.err = time.Now(), err
	return c
}

// logFrozenCalls logs how the calls sent after the freeze fared: refused,
// or answered by the other replica.
func logFrozenCalls(t *testing.T, calls []frozenCall, frozenAt time.Time, frozen string, http1 bool, rate int, observed time.Duration) {
	t.Helper()
	var refused, servedByOther int
	var lastRefusedSent, firstOtherSent time.Duration = -1, -1
	for _, c := range calls {
		if c.sent.Before(frozenAt) {
			continue
		}
		at := c.sent.Sub(frozenAt)
		switch {
		case c.err != nil:
			refused++
			lastRefusedSent = max(lastRefusedSent, at)
		case c.replica != frozen:
			servedByOther++
			if firstOtherSent < 0 || at < firstOtherSent {
				firstOtherSent = at
			}
		}
	}
	proto := "HTTP/2"
	if http1 {
		proto = "HTTP/1.1"
	}
	t.Logf("%s: %d calls at %d/s in %s after freezing replica %s: %d refused (the last sent %s after the freeze), %d answered by the other (the first sent %s after)",
		proto, refused+servedByOther, rate, observed, frozen, refused, lastRefusedSent.Round(100*time.Millisecond), servedByOther, firstOtherSent.Round(100*time.Millisecond))
}
