package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPair is a certificate and key in PEM, and the certificate parsed.
type testPair struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
}

// newTestPair makes a self-signed serving certificate for 127.0.0.1 and
// localhost whose common name tells the pairs apart.
func newTestPair(t *testing.T, cn string, notAfter time.Time) testPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-2 * time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		cert:    cert,
	}
}

// writeFile replaces a file by renaming over it, as a Secret volume update
// does, so the watcher never reads a half-written file.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func writePair(t *testing.T, dir, certName, keyName string, certPEM, keyPEM []byte) {
	t.Helper()
	writeFile(t, filepath.Join(dir, certName), certPEM)
	writeFile(t, filepath.Join(dir, keyName), keyPEM)
}

// servedCN makes a real TLS handshake with addr, trusting only the pairs
// given, and returns the common name of the certificate served.
func servedCN(t *testing.T, addr string, trusted ...testPair) string {
	t.Helper()
	pool := x509.NewCertPool()
	for _, p := range trusted {
		pool.AddCert(p.cert)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startWebhookServer serves a WebhookMux with one handler over TLS from cw on
// a free loopback port until the test ends.
func startWebhookServer(t *testing.T, cw *CertWatcher, path string, h http.Handler) *Server {
	t.Helper()
	s := NewWebhookServer("127.0.0.1:0", cw)
	if h != nil {
		s.Webhooks().Handle(path, h)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	return s
}

func TestCertWatcherReloadsWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	year := time.Now().Add(365 * 24 * time.Hour)
	a, b, c := newTestPair(t, "pair-a", year), newTestPair(t, "pair-b", year), newTestPair(t, "pair-c", year)
	// Names other than the defaults, to show they are honoured.
	writePair(t, dir, "serving.crt", "serving.key", a.certPEM, a.keyPEM)

	cw, err := NewCertWatcher(dir, CertWatcherOptions{CertName: "serving.crt", KeyName: "serving.key", Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watchDone := make(chan error, 1)
	go func() { watchDone <- cw.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-watchDone; err != nil {
			t.Errorf("Start returned %v", err)
		}
	}()
	s := startWebhookServer(t, cw, "/x", nil)
	addr := s.BoundAddr()

	if got := servedCN(t, addr, a, b, c); got != "pair-a" {
		t.Fatalf("served %q at start, want pair-a", got)
	}

	writePair(t, dir, "serving.crt", "serving.key", b.certPEM, b.keyPEM)
	eventually(t, "pair-b to be served", func() bool { return servedCN(t, addr, a, b, c) == "pair-b" })

	// An invalid replacement: c's certificate with b's key. It must be
	// tried (lastErr set), and b must still be served afterwards.
	writePair(t, dir, "serving.crt", "serving.key", c.certPEM, b.keyPEM)
	eventually(t, "the mismatched pair to be rejected", func() bool {
		cw.mu.RLock()
		defer cw.mu.RUnlock()
		return cw.lastErr != nil && strings.Contains(cw.lastErr.Error(), "private key does not match")
	})
	if got := servedCN(t, addr, a, b, c); got != "pair-b" {
		t.Errorf("after an invalid replacement served %q, want pair-b kept", got)
	}
	if err := cw.Ready(); err != nil {
		t.Errorf("Ready after an invalid replacement = %v, want nil (the old certificate is still good)", err)
	}

	// Garbage is rejected too, and a good pair after it is still picked up:
	// the watcher survives its errors.
	writePair(t, dir, "serving.crt", "serving.key", []byte("not a certificate"), []byte("not a key"))
	eventually(t, "the garbage pair to be rejected", func() bool {
		cw.mu.RLock()
		defer cw.mu.RUnlock()
		return cw.lastErr != nil && !strings.Contains(cw.lastErr.Error(), "private key does not match")
	})
	if got := servedCN(t, addr, a, b, c); got != "pair-b" {
		t.Errorf("after a garbage replacement served %q, want pair-b kept", got)
	}
	writePair(t, dir, "serving.crt", "serving.key", c.certPEM, c.keyPEM)
	eventually(t, "pair-c to be served", func() bool { return servedCN(t, addr, a, b, c) == "pair-c" })
	if err := cw.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
}

func TestCertWatcherKeepsCertificateWhenFilesVanish(t *testing.T) {
	dir := t.TempDir()
	a := newTestPair(t, "pair-a", time.Now().Add(time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, a.certPEM, a.keyPEM)
	cw, err := NewCertWatcher(dir, CertWatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, DefaultKeyName)); err != nil {
		t.Fatal(err)
	}
	if changed, err := cw.reload(); err == nil || changed {
		t.Fatalf("reload with the key gone = (%v, %v), want an error and no change", changed, err)
	}
	got, err := cw.GetCertificate(nil)
	if err != nil || got.Leaf.Subject.CommonName != "pair-a" {
		t.Fatalf("GetCertificate = %v, %v; want pair-a kept", got, err)
	}
	// The same content coming back is no change; new content is.
	writePair(t, dir, DefaultCertName, DefaultKeyName, a.certPEM, a.keyPEM)
	if changed, err := cw.reload(); err != nil || changed {
		t.Errorf("reload of the same pair = (%v, %v), want no change", changed, err)
	}
	b := newTestPair(t, "pair-b", time.Now().Add(time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, b.certPEM, b.keyPEM)
	if changed, err := cw.reload(); err != nil || !changed {
		t.Errorf("reload of a new pair = (%v, %v), want a change", changed, err)
	}
}

func TestNewCertWatcherErrors(t *testing.T) {
	good := newTestPair(t, "good", time.Now().Add(time.Hour))
	other := newTestPair(t, "other", time.Now().Add(time.Hour))
	cases := map[string]struct {
		cert, key []byte // nil: file absent
		want      string
	}{
		"no files":     {nil, nil, "reading certificate"},
		"no key":       {good.certPEM, nil, "reading key"},
		"garbage":      {[]byte("x"), []byte("y"), "failed to find any PEM data"},
		"mismatched":   {good.certPEM, other.keyPEM, "private key does not match"},
		"swapped":      {good.keyPEM, good.certPEM, "loading"},
		"empty files":  {[]byte{}, []byte{}, "loading"},
		"half a chain": {good.certPEM[:len(good.certPEM)/2], good.keyPEM, "loading"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.cert != nil {
				writeFile(t, filepath.Join(dir, DefaultCertName), tc.cert)
			}
			if tc.key != nil {
				writeFile(t, filepath.Join(dir, DefaultKeyName), tc.key)
			}
			cw, err := NewCertWatcher(dir, CertWatcherOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewCertWatcher = %v, %v; want an error containing %q", cw, err, tc.want)
			}
		})
	}
}

func TestCertWatcherReady(t *testing.T) {
	dir := t.TempDir()
	expired := newTestPair(t, "expired", time.Now().Add(-time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, expired.certPEM, expired.keyPEM)
	cw, err := NewCertWatcher(dir, CertWatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cw.Ready(); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Ready with an expired certificate = %v, want an expiry error", err)
	}
	check := cw.ReadyCheck()
	if check.Name != "webhook-certificate" || check.Check(nil) == nil {
		t.Errorf("ReadyCheck %q passed with an expired certificate", check.Name)
	}

	fresh := newTestPair(t, "fresh", time.Now().Add(time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, fresh.certPEM, fresh.keyPEM)
	if _, err := cw.reload(); err != nil {
		t.Fatal(err)
	}
	if err := check.Check(nil); err != nil {
		t.Errorf("ReadyCheck with a fresh certificate = %v", err)
	}

	var empty CertWatcher
	if err := empty.Ready(); err == nil {
		t.Error("Ready with no certificate loaded = nil")
	}
	if _, err := empty.GetCertificate(nil); err == nil {
		t.Error("GetCertificate with no certificate loaded = nil error")
	}
}
