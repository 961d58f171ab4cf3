package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestBundleIsCanonical(t *testing.T) {
	older, err := newCertificateAuthority(t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := newCertificateAuthority(t0.Add(time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := encodeBundle([]*x509.Certificate{older.cert, newer.cert})
	b := encodeBundle([]*x509.Certificate{newer.cert, older.cert})
	if !bytes.Equal(a, b) {
		t.Fatal("the bundle's bytes depend on the order of its CAs")
	}
	got := parseBundle(a)
	if len(got) != 2 || !got[0].Equal(newer.cert) {
		t.Fatal("the newest CA is not first")
	}

	// Duplicates, non-CA certificates, other blocks and junk are skipped.
	serving, err := issueServing(newer, sans{dns: []string{"x"}}, t0.Add(time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := encodeKey(serving.key)
	messy := bytes.Join([][]byte{a, encodeCert(older.cert), encodeCert(serving.cert), key, []byte("junk\n")}, nil)
	if got := parseBundle(messy); len(got) != 2 {
		t.Errorf("parsed %d CAs from a messy bundle, want 2", len(got))
	}
}

func TestParseKeyFormats(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(ec)
	for name, data := range map[string][]byte{
		"SEC 1":   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}),
		"PKCS #8": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		"PKCS #1": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}),
	} {
		if _, err := parseKey(data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := parseKey([]byte("not PEM")); err == nil {
		t.Error("parsed a key from junk")
	}
}

func TestBackdate(t *testing.T) {
	if got := backdate(90 * 24 * time.Hour); got != maxBackdate {
		t.Errorf("backdate(90d) = %v, want %v", got, maxBackdate)
	}
	if got := backdate(10 * time.Second); got != time.Second {
		t.Errorf("backdate(10s) = %v, want 1s", got)
	}
}
