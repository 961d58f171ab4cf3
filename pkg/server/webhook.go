package server

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// MaxWebhookRequestBytes bounds a webhook request body. kube-apiserver
// accepts objects of up to 3 MiB (its default --max-request-bytes), and an
// AdmissionReview for an UPDATE carries two of them, object and oldObject,
// plus the envelope; 7 MiB holds that, as in controller-runtime. A larger
// body cannot come from the API server, so it is refused with 413 before
// it is read into memory.
const MaxWebhookRequestBytes = 7 << 20

// CertificateSource gives the serving certificate for each TLS handshake.
// CertWatcher (files, e.g. mounted by cert-manager) and the self-managed
// certificates of pkg/certs implement it.
type CertificateSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// NewWebhookServer returns the HTTPS server for admission (and conversion)
// webhooks, replacing controller-runtime's webhook.Server. Its handler is a
// WebhookMux: register handlers with s.Webhooks().Handle(path, h) before
// Listen. The certificate comes from certs on every handshake, so a rotated
// certificate is served without a restart. TLS 1.2 is the minimum: the API
// server's webhook client speaks 1.2 and 1.3, and nothing older is safe.
//
// HTTP/2 is offered first, for what it buys at a stop: the API server
// keeps its connections to a webhook open and reuses them, and over
// HTTP/1.1 a server that stops can only close an idle one, racing a
// request the API server is sending on it just then, which fails with EOF
// or a broken pipe and is not retried (a POST). Over HTTP/2 the stop sends
// GOAWAY with the last request it will answer; the API server's client
// retries any later one on a new connection, which the Service gives to
// another replica.
//
// What it costs. First, exposure: the HTTP/2 attacks that made
// controller-runtime turn it off by default (rapid reset, CVE-2023-44487
// and CVE-2023-39325; CONTINUATION floods, CVE-2023-45288) are bounded by
// Go's server since 1.21.3 and 1.22.2, and this build's Go is newer; that
// bound is all there is, since the port is open to every source (the
// manifests' and the chart's NetworkPolicy cannot name the API server,
// which is no pod). Second, affinity: the API server sends every call on
// one connection, so to one replica. A replica that is alive but not
// answering gets each new call until the API server's client stops using
// that connection: after MaxConcurrentStreams of its calls time out
// (client-go's HTTP/2 transport counts a call reset for its timeout
// against the limit until the peer answers a PING), or after its health
// check (30 s without a frame, then a 15 s PING: k8s.io/apimachinery
// pkg/util/net/http.go), whichever comes first. Go's default of 250
// streams refused 250 calls in a row when one of two replicas was frozen
// (TestWebhookReplicaFrozen); webhookMaxConcurrentStreams bounds that. A
// burst beyond it costs a second connection, dialled through the Service,
// which spreads the calls. And connections are recycled after
// webhookMaxConnectionAge, so that calls spread again over the replicas
// after a rollout or a failover, rather than stay with the one the API
// server dialled first.
func NewWebhookServer(addr string, certs CertificateSource) *Server {
	return &Server{
		Name:    "webhook",
		Addr:    addr,
		Handler: NewWebhookMux(),
		TLS: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
			NextProtos:     []string{"h2", "http/1.1"},
		},
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: webhookMaxConcurrentStreams,
			// A caller gone silent (its node lost) frees its connection
			// in 45 s rather than after the kernel's TCP timeout.
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
		MaxConnectionAge: webhookMaxConnectionAge,
	}
}

const (
	// webhookMaxConcurrentStreams bounds the calls an API server sends on
	// one connection before it opens another: the calls a frozen replica
	// refuses in a row.
	webhookMaxConcurrentStreams = 16
	// webhookMaxConnectionAge recycles the API server's connections.
	webhookMaxConnectionAge = 5 * time.Minute
)

// Webhooks returns the WebhookMux of a server made by NewWebhookServer, or
// nil for any other server.
func (s *Server) Webhooks() *WebhookMux {
	m, _ := s.Handler.(*WebhookMux)
	return m
}

// WebhookMux routes webhook requests by exact path. Every path gets the
// same guard: POST only (405), Content-Type application/json only (415),
// and a body of at most MaxWebhookRequestBytes (413). Every request to a
// registered path, the guard's answers included, is measured with
// controller-runtime's webhook metrics (RegisterMetrics); unknown paths are
// not, so that a scanner cannot add series.
type WebhookMux struct {
	mu      sync.RWMutex
	paths   map[string]http.Handler
	metrics *webhookMetrics
}

// NewWebhookMux returns an empty mux.
func NewWebhookMux() *WebhookMux {
	return &WebhookMux{paths: map[string]http.Handler{}, metrics: newWebhookMetrics()}
}

// RegisterMetrics registers the mux's webhook metrics with reg. Without it
// they are still kept, but nobody can read them.
func (m *WebhookMux) RegisterMetrics(reg prometheus.Registerer) error {
	return m.metrics.register(reg)
}

// Handle registers h at path. Registering a path twice is a programming
// error and panics, as http.ServeMux does.
func (m *WebhookMux) Handle(path string, h http.Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if path == "" || path[0] != '/' {
		panic(fmt.Sprintf("webhook path %q must start with /", path))
	}
	if _, dup := m.paths[path]; dup {
		panic(fmt.Sprintf("webhook path %q registered twice", path))
	}
	m.paths[path] = m.metrics.instrument(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if guardWebhookRequest(w, r) {
			h.ServeHTTP(w, r)
		}
	}))
}

// Paths lists the registered paths, sorted, for logging at start.
func (m *WebhookMux) Paths() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for p := range m.paths {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (m *WebhookMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.RLock()
	h, ok := m.paths[r.URL.Path]
	m.mu.RUnlock()
	if !ok {
		http.Error(w, fmt.Sprintf("no webhook at %s", r.URL.Path), http.StatusNotFound)
		return
	}
	h.ServeHTTP(w, r)
}

// guardWebhookRequest answers a request that no webhook should read and
// reports whether the request may go on. It also caps the body, so that a
// handler reading it gets an *http.MaxBytesError past the limit.
func guardWebhookRequest(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, fmt.Sprintf("method %s not allowed: webhooks take POST", r.Method), http.StatusMethodNotAllowed)
		return false
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		http.Error(w, fmt.Sprintf("content type %q not supported: expected application/json", ct), http.StatusUnsupportedMediaType)
		return false
	}
	if r.ContentLength > MaxWebhookRequestBytes {
		http.Error(w, tooLargeMessage, http.StatusRequestEntityTooLarge)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxWebhookRequestBytes)
	return true
}

var tooLargeMessage = fmt.Sprintf("request body larger than %d bytes", MaxWebhookRequestBytes)

// readWebhookBody guards the request as WebhookMux does (so that a handler
// is safe on its own too) and reads its body, answering the request itself
// when it cannot: 405, 415, 413, or 400 for a body that fails to arrive.
func readWebhookBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if !guardWebhookRequest(w, r) {
		return nil, false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, tooLargeMessage, http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, fmt.Sprintf("reading request body: %v", err), http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// ServeAdmission turns a review function into a handler for AdmissionReview
// admission.k8s.io/v1, which is what controller-runtime's admission.Webhook
// and its http.go do for a Handler. It guards the request as WebhookMux does
// (so it is safe on its own too), decodes the review strictly enough that a
// misconfigured caller gets a clear 400 instead of a silent allow, calls
// review, copies the request UID into the response, and writes the review
// back.
//
// Malformed requests get an HTTP 4xx with a plain-text message rather than
// an AdmissionReview: there is no request UID to answer to, and the API
// server reports a non-200 as a webhook failure, subject to the webhook's
// failurePolicy. A panic in review is recovered and answered with 500, so one
// bad object cannot take down the server that admits every other.
func ServeAdmission(review func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := readWebhookBody(w, r)
		if !ok {
			return
		}
		ar, msg := decodeAdmissionReview(body)
		if msg != "" {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}

		resp, msg := callReview(review, ar.Request)
		if msg != "" {
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		resp.UID = ar.Request.UID
		out, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: ar.TypeMeta, Response: resp})
		if err != nil {
			klog.ErrorS(err, "Encoding an AdmissionReview response", "uid", ar.Request.UID)
			http.Error(w, "internal error: could not encode the response", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// decodeAdmissionReview returns the review, or a message saying why body is
// not one. Unknown fields are accepted: a newer API server may add some, and
// refusing them would fail every admission after an upgrade.
func decodeAdmissionReview(body []byte) (*admissionv1.AdmissionReview, string) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, "empty body: expected an AdmissionReview admission.k8s.io/v1"
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		return nil, fmt.Sprintf("body is not a JSON object: %v", err)
	}
	want := admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
	if tm.GroupVersionKind() != want {
		msg := fmt.Sprintf("expected kind AdmissionReview, apiVersion %s; got kind %q, apiVersion %q", want.GroupVersion(), tm.Kind, tm.APIVersion)
		if tm.Kind == "AdmissionReview" {
			msg += ` (set admissionReviewVersions: ["v1"] in the webhook configuration)`
		}
		return nil, msg
	}
	ar := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, ar); err != nil {
		return nil, fmt.Sprintf("decoding AdmissionReview: %v", err)
	}
	if ar.Request == nil {
		return nil, "AdmissionReview has no request"
	}
	if ar.Request.UID == "" {
		return nil, "AdmissionReview request has no uid"
	}
	return ar, ""
}

// callReview runs review, turning a panic or a nil response into a message
// for a 500.
func callReview(review func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse, msg string) {
	defer func() {
		if p := recover(); p != nil {
			admissionPanics.Inc()
			klog.ErrorS(fmt.Errorf("panic: %v", p), "Admission review panicked", "uid", req.UID,
				"kind", req.Kind, "namespace", req.Namespace, "name", req.Name, "stack", string(debug.Stack()))
			resp, msg = nil, "internal error: the admission review failed"
		}
	}()
	resp = review(req)
	if resp == nil {
		klog.ErrorS(errors.New("nil response"), "Admission review returned no response", "uid", req.UID)
		return nil, "internal error: the admission review returned no response"
	}
	return resp, ""
}
