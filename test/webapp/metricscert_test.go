package webapp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/handroll/handroll/test/controlplane"
)

// TestMetricsCertificateFromFiles: with --metrics-secure and
// --metrics-cert-dir, the metrics server serves the pair in the directory,
// which a scraper that trusts only its CA verifies, and a pair written over
// it is served within moments, by the same process.
func TestMetricsCertificateFromFiles(t *testing.T) {
	dir := t.TempDir()
	firstCA, err := controlplane.WriteServingCertificate(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := leafIn(t, dir)
	op, _ := startOperator(t, "--metrics-secure", "--metrics-cert-dir="+dir)
	pid := op.PID()

	if got := servedLeaf(t, op.MetricsAddr); !bytes.Equal(got.Raw, first.Raw) {
		t.Fatalf("the metrics server serves %q (serial %s), not the certificate in --metrics-cert-dir", got.Subject, got.SerialNumber)
	}
	// Verified as Prometheus verifies it (tlsConfig.ca, serverName); the
	// scrape itself still needs a token.
	if code := verifiedScrape(t, op.MetricsAddr, firstCA); code != http.StatusUnauthorized {
		t.Errorf("a verified scrape without a token: %d, want 401", code)
	}

	// A renewal, as the kubelet writes a Secret volume: the new files
	// replace the old ones by rename.
	staging := t.TempDir()
	secondCA, err := controlplane.WriteServingCertificate(staging)
	if err != nil {
		t.Fatal(err)
	}
	second := leafIn(t, staging)
	for _, name := range []string{"tls.key", "tls.crt"} {
		if err := os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the replaced certificate is served", func(context.Context) (bool, error) {
		return bytes.Equal(servedLeaf(t, op.MetricsAddr).Raw, second.Raw), nil
	})
	if op.PID() != pid {
		t.Fatalf("the operator was restarted")
	}
	select {
	case <-op.Exited():
		t.Fatalf("the operator exited:\n%s", op.Log())
	default:
	}
	if code := verifiedScrape(t, op.MetricsAddr, secondCA); code != http.StatusUnauthorized {
		t.Errorf("a scrape verified against the new CA: %d, want 401", code)
	}
	if code := verifiedScrape(t, op.MetricsAddr, firstCA); code != 0 {
		t.Errorf("a scrape that trusts only the old CA got %d; the handshake must fail", code)
	}
}

// leafIn parses dir's tls.crt.
func leafIn(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s/tls.crt holds no PEM", dir)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// servedLeaf is the certificate addr presents in a TLS handshake.
func servedLeaf(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS handshake with the metrics server: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// verifiedScrape GETs /metrics trusting only caPEM for the name localhost;
// it returns the status code, or 0 when the handshake fails.
func verifiedScrape(t *testing.T, addr string, caPEM []byte) int {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"},
	}}
	resp, err := client.Get("https://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
