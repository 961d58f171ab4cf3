package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is what kube-apiserver needs to serve TLS and sign service-account
// tokens, written as PEM files in one directory.
type pki struct {
	caCert     string // CA that signed the serving certificate; clients trust it
	servingCrt string
	servingKey string
	saKey      string // RSA private key that signs service-account tokens
	caPEM      []byte
	// The API server's client certificate for kubelets (a real node's
	// logs, exec and port-forward), in system:masters.
	kubeletClientCrt string
	kubeletClientKey string
}

// writePKI writes the CA, the API server's serving certificate (for the
// loopback addresses and extraIPs) and the service-account key.
func writePKI(dir string, extraIPs ...net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := newCA()
	if err != nil {
		return nil, err
	}
	srvCert, srvKey, err := ca.issue("kube-apiserver", 2,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, extraIPs...)
	if err != nil {
		return nil, err
	}
	clientCert, clientKey, err := ca.issueClient("kube-apiserver-kubelet-client", "system:masters", 3)
	if err != nil {
		return nil, err
	}

	// Service-account tokens are signed with RSA (RS256), which every
	// verifier of Kubernetes tokens accepts.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}

	p := &pki{
		caCert:     filepath.Join(dir, "ca.crt"),
		servingCrt: filepath.Join(dir, "apiserver.crt"),
		servingKey: filepath.Join(dir, "apiserver.key"),
		saKey:      filepath.Join(dir, "sa.key"),
		caPEM:      ca.certPEM,

		kubeletClientCrt: filepath.Join(dir, "kubelet-client.crt"),
		kubeletClientKey: filepath.Join(dir, "kubelet-client.key"),
	}
	files := map[string][]byte{
		p.caCert:     p.caPEM,
		p.servingCrt: srvCert,
		p.servingKey: srvKey,
		p.saKey:      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),

		p.kubeletClientCrt: clientCert,
		p.kubeletClientKey: clientKey,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", filepath.Base(path), err)
		}
	}
	return p, nil
}

// WriteServingCertificate writes tls.crt and tls.key for dnsNames (none:
// the loopback addresses) into dir, signed by a new CA whose certificate it
// returns (the caBundle a webhook configuration needs).
func WriteServingCertificate(dir string, dnsNames ...string) ([]byte, error) {
	ca, err := newCA()
	if err != nil {
		return nil, err
	}
	if len(dnsNames) == 0 {
		dnsNames = []string{"localhost"}
	}
	cert, key, err := ca.issue("handroll-webhook", 2, dnsNames)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600); err != nil {
		return nil, err
	}
	return ca.certPEM, nil
}

// ca is a certificate authority of one test run.
type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA() (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "handroll-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs a serving certificate for the loopback addresses, ips and
// dnsNames, returning the certificate and its key as PEM.
func (c *ca) issue(cn string, serial int64, dnsNames []string, ips ...net.IP) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	return c.sign(&x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
	})
}

// issueClient signs a client certificate for user cn in group org.
func (c *ca) issueClient(cn, org string, serial int64) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	return c.sign(&x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{org}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (c *ca) sign(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
