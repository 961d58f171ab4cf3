package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/server"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// servedCerts is the Manager as the webhook server's CertificateSource,
// noting each certificate it hands to a handshake.
type servedCerts struct {
	*certs.Manager
	mu     sync.Mutex
	serial map[string]*x509.Certificate
}

func (s *servedCerts) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, err := s.Manager.GetCertificate(hello)
	if err == nil {
		s.mu.Lock()
		s.serial[c.Leaf.SerialNumber.String()] = c.Leaf
		s.mu.Unlock()
	}
	return c, err
}

func (s *servedCerts) all() []*x509.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*x509.Certificate
	for _, c := range s.serial {
		out = append(out, c)
	}
	return out
}

// history is what the Secret held over the test: each serving certificate
// and each CA, in order of appearance.
type history struct {
	mu       sync.Mutex
	servings []*x509.Certificate
	cas      []*x509.Certificate // every CA ever in ca.crt
	bundle   []*x509.Certificate // ca.crt now
}

func (h *history) observe(s *corev1.Secret) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pair, err := tls.X509KeyPair(s.Data[certs.KeyServingCert], s.Data[certs.KeyServingKey]); err == nil {
		if n := len(h.servings); n == 0 || !h.servings[n-1].Equal(pair.Leaf) {
			h.servings = append(h.servings, pair.Leaf)
		}
	}
	h.bundle = nil
	for rest := s.Data[certs.KeyCABundle]; ; {
		var c *x509.Certificate
		c, rest = nextCert(rest)
		if c == nil {
			break
		}
		h.bundle = append(h.bundle, c)
		known := false
		for _, k := range h.cas {
			known = known || k.Equal(c)
		}
		if !known {
			h.cas = append(h.cas, c)
		}
	}
}

// summary is (serving rotations, CA rotations, whether a certificate of
// the second CA is in use, whether the first CA has left ca.crt).
func (h *history) summary() (servingRotations, caRotations int, secondCASigns, firstCADropped bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.servings) == 0 || len(h.cas) == 0 {
		return 0, 0, false, false
	}
	if len(h.cas) > 1 {
		secondCASigns = h.servings[len(h.servings)-1].CheckSignatureFrom(h.cas[1]) == nil
	}
	firstCADropped = true
	for _, c := range h.bundle {
		firstCADropped = firstCADropped && !c.Equal(h.cas[0])
	}
	return len(h.servings) - 1, len(h.cas) - 1, secondCASigns, firstCADropped
}

// TestRotationWhileServing serves a validating webhook with certificates
// that live 10 s (a CA 40 s), and has the API server call it for every
// ConfigMap created in the test's namespace, failurePolicy Fail, over a
// new TLS connection each time. Two replicas share the Secret; the server
// uses the first, so rotations made by either must reach it. ConfigMaps
// are created until the serving certificate has rotated at least three
// times, the CA once, a certificate of the new CA is served, and the first
// CA has expired out of the bundle. Every create must succeed. Meanwhile
// a scraper of the first replica's metrics certificate, trusting only the
// CA ConfigMap as it reads it at each scrape, must verify every
// certificate, of both CAs, and see the ConfigMap hold both at once; at
// the end the ConfigMap holds the Secret's bundle.
func TestRotationWhileServing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	kube := env.KubeClient(t)
	name := "rotation-" + ns

	port := operator.FreePort(t)
	opts := certs.Options{
		Namespace: ns, ServiceName: "handroll-webhook",
		URL:                   fmt.Sprintf("https://127.0.0.1:%d", port),
		Validity:              10 * time.Second,
		PropagationDelay:      2 * time.Second,
		WebhookConfigurations: []string{name},
		CRDs:                  []string{},
		CAConfigMap:           "handroll-ca",
		MetricsServiceName:    "handroll-metrics",
	}

	// The webhook configuration points at the Service, as the manifests
	// do; the Manager rewrites it to the URL.
	createConfigMapWebhook(t, ctx, kube, ns, name)

	// Two replicas; the server uses the first.
	served := &servedCerts{Manager: startManager(t, env.Config, opts), serial: map[string]*x509.Certificate{}}
	startManager(t, env.Config, opts)

	var calls atomic.Int64
	serveConfigMapWebhook(t, ctx, port, served, &calls)

	// A scraper of the first replica's metrics certificate, trusting only
	// what the CA ConfigMap holds when it scrapes, as a Prometheus would.
	metrics := serveMetrics(t, served.Manager)

	// Watch the Secret for the rotations.
	h := &history{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go watchSecret(watchCtx, kube, ns, h)

	configMaps := kube.CoreV1().ConfigMaps(ns)
	// Until the API server has seen the Manager's URL and bundle, it calls
	// a Service that does not exist: wait for the first success.
	eventually(t, time.Minute, "the API server calls the webhook", func(ctx context.Context) (bool, error) {
		_, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "warmup-"}}, metav1.CreateOptions{})
		return err == nil && calls.Load() > 0, err
	})

	eventually(t, 30*time.Second, "a scrape verified against the CA ConfigMap", func(ctx context.Context) (bool, error) {
		return metrics.scrape(ctx, kube, ns) == nil, nil
	})
	stopScrapes := scrapeInBackground(ctx, metrics, kube, ns)

	start := time.Now()
	load := createThroughRotations(t, ctx, configMaps, h, start)
	stopScrapes()
	elapsed := time.Since(start)
	close(load.firstErrs)
	for err := range load.firstErrs {
		t.Errorf("a create failed: %v", err)
	}
	metrics.check(t, h)
	// Once the rotations are over, the ConfigMap holds the Secret's bundle.
	waitForCAConfigMap(t, kube, ns)

	checkCreatesAndHandshakes(t, h, served, load, &calls, elapsed)
}

// createConfigMapWebhook creates the validating configuration name, which
// has the API server call the webhook Service for every ConfigMap created
// in ns, failing the create if the call fails.
func createConfigMapWebhook(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	ar := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := ar.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "configmaps.certs.handroll.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: ns, Name: "handroll-webhook", Path: ptr.To("/validate-configmaps"),
			}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ar.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// serveConfigMapWebhook serves, on port with served's certificates, a
// webhook that allows every ConfigMap and counts its calls.
func serveConfigMapWebhook(t *testing.T, ctx context.Context, port int, served *servedCerts, calls *atomic.Int64) {
	t.Helper()
	allow := server.ServeAdmission(func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	srv := server.NewWebhookServer(fmt.Sprintf("127.0.0.1:%d", port), served)
	srv.Webhooks().Handle("/validate-configmaps", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		// A new connection, so a new handshake, for every call: each
		// certificate served is checked by the API server.
		w.Header().Set("Connection", "close")
		allow.ServeHTTP(w, r)
	}))
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	srvCtx, stopServer := context.WithCancel(ctx)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(srvCtx, 5*time.Second) }()
	t.Cleanup(func() {
		stopServer()
		if err := <-serveErr; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
}

// watchSecret observes the Secret in h every 100 ms until ctx is done.
func watchSecret(ctx context.Context, kube kubernetes.Interface, ns string, h *history) {
	for ctx.Err() == nil {
		if s, err := kube.CoreV1().Secrets(ns).Get(ctx, certs.DefaultSecretName, metav1.GetOptions{}); err == nil {
			h.observe(s)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrapeInBackground scrapes every 100 ms, noting each failure, until the
// returned stop is called; stop returns once the last scrape is over.
func scrapeInBackground(ctx context.Context, metrics *metricsScraper, kube kubernetes.Interface, ns string) (stop func()) {
	scrapeCtx, stopScrapes := context.WithCancel(ctx)
	scrapesDone := make(chan struct{})
	go func() {
		defer close(scrapesDone)
		for scrapeCtx.Err() == nil {
			if err := metrics.scrape(scrapeCtx, kube, ns); err != nil && scrapeCtx.Err() == nil {
				metrics.fail(err)
			}
			select {
			case <-scrapeCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() {
		stopScrapes()
		<-scrapesDone
	}
}

// createLoad counts the ConfigMaps created, and those refused, with the
// first errors.
type createLoad struct {
	created, failed atomic.Int64
	firstErrs       chan error
}

// createThroughRotations creates ConfigMaps from two workers until h has
// seen three serving rotations, a CA rotation, a certificate of the new
// CA and the first CA dropped, failing t if that takes too long.
func createThroughRotations(t *testing.T, ctx context.Context, configMaps corev1client.ConfigMapInterface, h *history, start time.Time) *createLoad {
	t.Helper()
	const workers = 2
	var (
		load = &createLoad{firstErrs: make(chan error, 10)}
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				_, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm-"}}, metav1.CreateOptions{})
				if err != nil {
					load.failed.Add(1)
					select {
					case load.firstErrs <- fmt.Errorf("after %v: %w", time.Since(start).Round(time.Millisecond), err):
					default:
					}
					continue
				}
				load.created.Add(1)
			}
		})
	}
	deadline := time.Now().Add(budget.Scale(3 * time.Minute))
	for {
		s, c, second, dropped := h.summary()
		if s >= 3 && c >= 1 && second && dropped {
			break
		}
		if time.Now().After(deadline) {
			close(done)
			wg.Wait()
			t.Fatalf("after %v: %d serving rotations, %d CA rotations, second CA signing %v, first CA dropped %v; want ≥3, ≥1, true, true",
				time.Since(start).Round(time.Second), s, c, second, dropped)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	return load
}

// waitForCAConfigMap waits until ConfigMap handroll-ca in ns holds the
// Secret's ca.crt.
func waitForCAConfigMap(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	eventually(t, 10*time.Second, "ConfigMap handroll-ca holds the Secret's ca.crt", func(ctx context.Context) (bool, error) {
		secret, err := kube.CoreV1().Secrets(ns).Get(ctx, certs.DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "handroll-ca", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cm.Data[certs.KeyCABundle] == string(secret.Data[certs.KeyCABundle]), nil
	})
}

// checkCreatesAndHandshakes checks that no create failed, that the webhook
// was called for each, and that the handshakes served certificates of
// both CAs: the API server accepted them across the CA rotation.
func checkCreatesAndHandshakes(t *testing.T, h *history, served *servedCerts, load *createLoad, calls *atomic.Int64, elapsed time.Duration) {
	t.Helper()
	s, c, _, _ := h.summary()
	handshakes := served.all()
	t.Logf("%v: %d ConfigMaps created, %d failed, %d webhook calls; %d serving rotations, %d CA rotations; %d certificates served",
		elapsed.Round(time.Second), load.created.Load(), load.failed.Load(), calls.Load(), s, c, len(handshakes))
	if load.failed.Load() > 0 {
		t.Errorf("%d of %d creates failed during rotation", load.failed.Load(), load.created.Load()+load.failed.Load())
	}
	if calls.Load() < load.created.Load() {
		t.Errorf("%d webhook calls for %d creates: some were not admitted by the webhook", calls.Load(), load.created.Load())
	}
	// The served certificates include ones of both CAs: the API server
	// accepted handshakes across the CA rotation.
	h.mu.Lock()
	firstCA, secondCA := h.cas[0], h.cas[1]
	h.mu.Unlock()
	var byFirst, bySecond int
	for _, leaf := range handshakes {
		switch {
		case leaf.CheckSignatureFrom(firstCA) == nil:
			byFirst++
		case leaf.CheckSignatureFrom(secondCA) == nil:
			bySecond++
		}
	}
	if len(handshakes) < 4 || byFirst == 0 || bySecond == 0 {
		t.Errorf("%d certificates served in handshakes, %d of the first CA and %d of the second; want at least 4, some of each",
			len(handshakes), byFirst, bySecond)
	}
}

func nextCert(data []byte) (*x509.Certificate, []byte) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, nil
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err == nil {
				return c, data
			}
		}
	}
}
