package server

import (
	"bytes"
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// ServedChain is implemented by the certificate sources (CertWatcher and
// pkg/certs' Manager) for the expiry metric: the serving certificate served
// now and the CA that issued it, either nil when not known.
type ServedChain interface {
	ServedChain() (serving, ca *x509.Certificate)
}

// certificateExpiryDesc is the expiry time of the webhook's certificates.
// It is a timestamp, not the time left: it changes only when a
// certificate does, and `... - time()` gives the time left in any query or
// alert. The name follows Prometheus' conventions: the handroll_ namespace
// (controller-runtime has no such metric), the base unit seconds and the
// _timestamp_seconds suffix of a Unix time, as cert-manager's
// certmanager_certificate_expiration_timestamp_seconds. One metric with a
// label rather than two, so that `min` over it says when the chain first
// breaks.
var certificateExpiryDesc = prometheus.NewDesc(
	"handroll_webhook_certificate_expiry_timestamp_seconds",
	"When the webhook server's certificates expire, in seconds since the Unix epoch: certificate=\"serving\" is the certificate served, certificate=\"ca\" the CA that issued it (absent when it is not known).",
	[]string{"certificate"}, nil,
)

// NewCertificateExpiryCollector returns a collector of the expiry times of
// src's certificates. It reads them at every scrape, so it follows each
// rotation or reload without being told, and reports nothing before a
// certificate is loaded.
func NewCertificateExpiryCollector(src ServedChain) prometheus.Collector {
	return certificateExpiry{src}
}

type certificateExpiry struct{ src ServedChain }

func (c certificateExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- certificateExpiryDesc }

func (c certificateExpiry) Collect(ch chan<- prometheus.Metric) {
	serving, ca := c.src.ServedChain()
	for _, cert := range []struct {
		label string
		cert  *x509.Certificate
	}{{"serving", serving}, {"ca", ca}} {
		if cert.cert != nil {
			ch <- prometheus.MustNewConstMetric(certificateExpiryDesc, prometheus.GaugeValue,
				float64(cert.cert.NotAfter.Unix()), cert.label)
		}
	}
}

// IssuerOf returns the certificate among candidates that signed cert, or
// nil. When several did (a CA renewed with the same key), the one that
// expires last is returned: cert is valid under it the longest.
func IssuerOf(cert *x509.Certificate, candidates []*x509.Certificate) *x509.Certificate {
	var out *x509.Certificate
	for _, c := range candidates {
		if c == nil || !bytes.Equal(cert.RawIssuer, c.RawSubject) || cert.CheckSignatureFrom(c) != nil {
			continue
		}
		if out == nil || c.NotAfter.After(out.NotAfter) {
			out = c
		}
	}
	return out
}
