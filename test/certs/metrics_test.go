package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/server"
)

// metricsScraper scrapes a TLS server that serves a Manager's metrics
// certificate, trusting for each scrape only the CAs the CA ConfigMap
// holds at that moment, and notes what it saw.
type metricsScraper struct {
	addr string

	mu       sync.Mutex
	scrapes  int
	failures []error
	issuers  map[string]bool // subjects of the CAs that signed a certificate verified
	maxCAs   int             // the most CAs the ConfigMap held at once
}

// serveMetrics serves m's metrics certificate on a loopback port until t
// ends, and returns a scraper of it.
func serveMetrics(t *testing.T, m *certs.Manager) *metricsScraper {
	t.Helper()
	srv := &server.Server{Name: "metrics", Addr: "127.0.0.1:0",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("Connection", "close") }),
		TLS:     &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: m.GetMetricsCertificate}}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	return &metricsScraper{addr: srv.BoundAddr(), issuers: map[string]bool{}}
}

// scrape reads the ConfigMap through the API, then makes one TLS
// connection that trusts only its CAs, for the metrics Service's name.
func (s *metricsScraper) scrape(ctx context.Context, kube kubernetes.Interface, ns string) error {
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "handroll-ca", metav1.GetOptions{})
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	var cas int
	for rest := []byte(cm.Data[certs.KeyCABundle]); ; cas++ {
		var c *x509.Certificate
		if c, rest = nextCert(rest); c == nil {
			break
		}
		pool.AddCert(c)
	}
	dialer := &tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "handroll-metrics." + ns + ".svc", MinVersion: tls.VersionTLS12}}
	conn, err := dialer.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("ConfigMap handroll-ca at resourceVersion %s (%d CAs): %w", cm.ResourceVersion, cas, err)
	}
	defer conn.Close()
	chains := conn.(*tls.Conn).ConnectionState().VerifiedChains
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scrapes++
	s.maxCAs = max(s.maxCAs, cas)
	if len(chains) > 0 && len(chains[0]) > 1 {
		s.issuers[string(chains[0][1].RawSubject)] = true
	}
	return nil
}

func (s *metricsScraper) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, err)
}

// check fails t if a scrape failed, if the ConfigMap never held the old
// and the new CA together, or if the certificates verified were not
// signed by both CAs of the rotation h saw.
func (s *metricsScraper) check(t *testing.T, h *history) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	h.mu.Lock()
	firstCA, secondCA := h.cas[0], h.cas[1]
	h.mu.Unlock()
	t.Logf("metrics: %d scrapes verified against the CA ConfigMap, %d failed; at most %d CAs in it at once", s.scrapes, len(s.failures), s.maxCAs)
	if err := errors.Join(s.failures...); err != nil {
		t.Errorf("scrapes trusting the CA ConfigMap failed during rotation:\n%v", err)
	}
	if s.maxCAs < 2 {
		t.Errorf("ConfigMap handroll-ca held at most %d CA at once; during a rotation it must hold the old and the new", s.maxCAs)
	}
	if !s.issuers[string(firstCA.RawSubject)] || !s.issuers[string(secondCA.RawSubject)] {
		t.Errorf("the metrics certificates verified were signed by %d CAs; want both CAs of the rotation", len(s.issuers))
	}
}
