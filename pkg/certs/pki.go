package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"sort"
	"time"
)

// Keys are ECDSA P-256: a key is made in microseconds (an RSA 2048 key takes
// tens of milliseconds, on every rotation of every replica's race), the
// handshake is cheaper for the API server, and every TLS client the API
// server uses has accepted P-256 for years. kube-apiserver's own
// self-signed serving certificates use the same curve.
func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// maxBackdate bounds how far NotBefore is set before the time of issue, so
// that a replica or API server whose clock runs a little behind still
// accepts a fresh certificate. Five minutes is what kube-controller-manager's
// CSR signer backdates by; a short Validity (tests) backdates by a tenth of
// it instead, so that the certificate is not mostly in the past.
const maxBackdate = 5 * time.Minute

func backdate(lifetime time.Duration) time.Duration {
	return min(maxBackdate, lifetime/10)
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// keyPair is a certificate with its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// newCertificateAuthority makes a self-signed CA that lives for lifetime from now.
func newCertificateAuthority(now time.Time, lifetime time.Duration) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// The time in the name tells the CAs of a bundle apart, as
		// kube-apiserver's "name@timestamp" self-signed CAs do.
		Subject:               pkix.Name{CommonName: fmt.Sprintf("handroll-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate(lifetime)),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // signs serving certificates only
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// issueServing signs a serving certificate for names with ca. It lives for
// validity from now, but never past the CA: a certificate that outlived its
// CA would be served after the CA left every bundle.
func issueServing(ca *keyPair, names sans, now time.Time, validity time.Duration) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("the CA %q has expired", ca.cert.Subject.CommonName)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names.commonName()},
		NotBefore:    now.Add(-backdate(validity)),
		NotAfter:     notAfter,
		// An ECDSA key signs the handshake; it never encrypts a key, so
		// KeyEncipherment would be wrong.
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    names.dns,
		IPAddresses: names.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// sans are the subject alternative names a serving certificate must hold.
type sans struct {
	dns []string
	ips []net.IP
}

func (s sans) commonName() string {
	if len(s.dns) > 0 {
		return s.dns[0]
	}
	if len(s.ips) > 0 {
		return s.ips[0].String()
	}
	return "handroll-webhook"
}

// missingFrom lists the names of s that cert does not hold.
func (s sans) missingFrom(cert *x509.Certificate) []string {
	var missing []string
	for _, d := range s.dns {
		if !slices.Contains(cert.DNSNames, d) {
			missing = append(missing, d)
		}
	}
	for _, ip := range s.ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			missing = append(missing, ip.String())
		}
	}
	return missing
}

// union returns s with the names of cert that s lacks appended.
func (s sans) union(cert *x509.Certificate) sans {
	out := sans{dns: slices.Clone(s.dns), ips: slices.Clone(s.ips)}
	for _, d := range cert.DNSNames {
		if !slices.Contains(out.dns, d) {
			out.dns = append(out.dns, d)
		}
	}
	for _, ip := range cert.IPAddresses {
		if !slices.ContainsFunc(out.ips, ip.Equal) {
			out.ips = append(out.ips, ip)
		}
	}
	return out
}

// signedBy reports whether cert carries a valid signature of ca.
func signedBy(cert, ca *x509.Certificate) bool {
	return bytes.Equal(cert.RawIssuer, ca.RawSubject) && cert.CheckSignatureFrom(ca) == nil
}

// renewAt is when two thirds of cert's lifetime have passed: cert-manager's
// default, which leaves a third of the lifetime to retry in if renewing
// fails.
func renewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life * 2 / 3)
}

// expired reports whether cert is no longer valid at now.
func expired(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(cert.NotAfter)
}

// PEM encoding. Private keys are PKCS #8, the one format for any key type.

func encodeCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// encodeBundle writes CAs newest first (latest NotBefore), so that the
// bundle's bytes depend only on the set of CAs and every replica writes the
// same ones.
func encodeBundle(cas []*x509.Certificate) []byte {
	sorted := slices.Clone(cas)
	sort.SliceStable(sorted, func(i, j int) bool {
		if !sorted[i].NotBefore.Equal(sorted[j].NotBefore) {
			return sorted[i].NotBefore.After(sorted[j].NotBefore)
		}
		return bytes.Compare(sorted[i].Raw, sorted[j].Raw) < 0
	})
	var buf bytes.Buffer
	for _, c := range sorted {
		buf.Write(encodeCert(c))
	}
	return buf.Bytes()
}

// parseBundle returns the CA certificates in data, each once, skipping
// blocks that are not CA certificates: a bundle edited by hand still yields
// whatever in it is usable.
func parseBundle(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil || !cert.IsCA {
			continue
		}
		if !slices.ContainsFunc(out, cert.Equal) {
			out = append(out, cert)
		}
	}
}

// parseKey reads a PEM private key: PKCS #8, or the older SEC 1 (EC) and
// PKCS #1 (RSA) forms that other tools write.
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return signer, nil
}

// publicKeyEqualer is implemented by every public key type of crypto/*.
type publicKeyEqualer interface {
	Equal(crypto.PublicKey) bool
}

// matches reports whether key is the private key of cert.
func matches(key crypto.Signer, cert *x509.Certificate) bool {
	pub, ok := key.Public().(publicKeyEqualer)
	return ok && pub.Equal(cert.PublicKey)
}

// parsePair loads a serving certificate and its key as the TLS server will
// use them. The leaf is the first certificate.
func parsePair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &pair, nil
}
