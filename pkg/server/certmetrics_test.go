package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// expiries gathers the expiry metric from reg by its certificate label.
func expiries(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "handroll_webhook_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// newChain makes a CA and a serving certificate it signs, and returns the
// serving certificate followed by the CA in PEM (as cert-manager writes
// tls.crt with a chain), the serving key, and both parsed.
func newChain(t *testing.T, caNotAfter, servingNotAfter time.Time) (chainPEM, keyPEM []byte, serving, ca *x509.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              caNotAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "webhook"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     servingNotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if serving, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	chainPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	return chainPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), serving, ca
}

// TestCertificateExpiryFollowsTheCertWatcher: the gauge shows the expiry of
// the certificate the watcher serves, and of its CA when the file carries
// the chain; after a reload it shows the new ones.
func TestCertificateExpiryFollowsTheCertWatcher(t *testing.T) {
	dir := t.TempDir()
	first := newTestPair(t, "first", time.Now().Add(time.Hour).Truncate(time.Second))
	writePair(t, dir, DefaultCertName, DefaultKeyName, first.certPEM, first.keyPEM)
	cw, err := NewCertWatcher(dir, CertWatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCertificateExpiryCollector(cw))

	// A self-signed certificate alone: its issuer is not in the file.
	got := expiries(t, reg)
	if len(got) != 1 || got["serving"] != float64(first.cert.NotAfter.Unix()) {
		t.Errorf("a lone certificate: %v, want only serving=%d", got, first.cert.NotAfter.Unix())
	}

	// The files change to a certificate with its chain.
	chain, key, serving, ca := newChain(t, time.Now().Add(48*time.Hour), time.Now().Add(2*time.Hour))
	writePair(t, dir, DefaultCertName, DefaultKeyName, chain, key)
	if changed, err := cw.reload(); err != nil || !changed {
		t.Fatalf("reload: changed %v, %v", changed, err)
	}
	got = expiries(t, reg)
	if got["serving"] != float64(serving.NotAfter.Unix()) || got["ca"] != float64(ca.NotAfter.Unix()) || len(got) != 2 {
		t.Errorf("after the reload: %v, want serving=%d ca=%d", got, serving.NotAfter.Unix(), ca.NotAfter.Unix())
	}

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP handroll_webhook_certificate_expiry_timestamp_seconds When the webhook server's certificates expire, in seconds since the Unix epoch: certificate="serving" is the certificate served, certificate="ca" the CA that issued it (absent when it is not known).
# TYPE handroll_webhook_certificate_expiry_timestamp_seconds gauge
handroll_webhook_certificate_expiry_timestamp_seconds{certificate="ca"} `+formatUnix(ca.NotAfter)+`
handroll_webhook_certificate_expiry_timestamp_seconds{certificate="serving"} `+formatUnix(serving.NotAfter)+`
`)); err != nil {
		t.Error(err)
	}

	// A pair that does not load leaves the served certificate, and so the
	// gauge, as they were.
	writePair(t, dir, DefaultCertName, DefaultKeyName, first.certPEM, key)
	if _, err := cw.reload(); err == nil {
		t.Fatal("a mismatched pair loaded")
	}
	if again := expiries(t, reg); again["serving"] != got["serving"] || again["ca"] != got["ca"] {
		t.Errorf("after a failed reload: %v, want %v", again, got)
	}
}

func formatUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// TestCertificateExpiryBeforeAnyCertificate: nothing is reported until a
// certificate is loaded, rather than a zero that reads as expired in 1970.
func TestCertificateExpiryBeforeAnyCertificate(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCertificateExpiryCollector(&CertWatcher{}))
	if got := expiries(t, reg); len(got) != 0 {
		t.Errorf("no certificate loaded: %v, want nothing", got)
	}
}

// TestIssuerOf: the issuer is found by signature, not by name alone.
func TestIssuerOf(t *testing.T) {
	_, _, serving, ca := newChain(t, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	_, _, _, impostor := newChain(t, time.Now().Add(time.Hour), time.Now().Add(time.Hour)) // same subject, other key
	if got := IssuerOf(serving, []*x509.Certificate{impostor, ca}); got == nil || !got.Equal(ca) {
		t.Errorf("IssuerOf picked %v, want the CA that signed", got)
	}
	if got := IssuerOf(serving, []*x509.Certificate{impostor}); got != nil {
		t.Errorf("IssuerOf picked a CA of the same name that did not sign: %v", got.Subject)
	}
}
