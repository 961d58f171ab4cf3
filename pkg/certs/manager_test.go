package certs

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/handroll/handroll/pkg/server"
)

// TestLoadAndReady covers what the informer's handler does with a Secret:
// the clientset is never called.
func TestLoadAndReady(t *testing.T) {
	clock := testingclock.NewFakeClock(t0)
	m, err := New(fake.NewClientset(), nil, Options{
		Namespace: "ns", ServiceName: "svc", Validity: time.Hour, CRDs: []string{}, Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetCertificate(nil); err == nil {
		t.Error("a certificate before any Secret was loaded")
	}
	if err := m.Ready(); err == nil {
		t.Error("ready before any Secret was loaded")
	}

	out := decideOK(t, m.policy, stored{}, t0, time.Time{})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: DefaultSecretName}, Data: out.data}
	m.load(secret)
	got, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Leaf.Equal(parse(t, apply(stored{}, out)).serving) {
		t.Error("serving another certificate than the Secret's")
	}
	if err := m.Ready(); err != nil {
		t.Errorf("not ready with a valid certificate: %v", err)
	}

	// A broken pair is not loaded: the previous one is kept.
	broken := secret.DeepCopy()
	broken.Data[KeyServingKey] = []byte("junk")
	m.load(broken)
	if again, _ := m.GetCertificate(nil); again != got {
		t.Error("a broken pair replaced the served certificate")
	}

	clock.SetTime(got.Leaf.NotAfter)
	if err := m.Ready(); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Ready with an expired certificate: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(fake.NewClientset(), nil, Options{ServiceName: "svc"}); err == nil {
		t.Error("no error without a namespace")
	}
	if _, err := New(fake.NewClientset(), nil, Options{Namespace: "ns", ServiceName: "svc"}); err == nil {
		t.Error("no error without a dynamic client for the default CRD")
	}
}

// TestExpiryMetricFollowsRotation: the expiry gauge shows the serving
// certificate the Manager serves and the CA that issued it, through a
// renewal of the serving certificate and a rotation of the CA.
func TestExpiryMetricFollowsRotation(t *testing.T) {
	m, err := New(fake.NewClientset(), nil, Options{
		Namespace: "ns", ServiceName: "svc", Validity: time.Hour, CRDs: []string{}, Clock: testingclock.NewFakeClock(t0),
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(server.NewCertificateExpiryCollector(m))
	if got := gatherExpiries(t, reg); len(got) != 0 {
		t.Fatalf("before any Secret: %v, want nothing", got)
	}
	load := func(s stored) contents {
		t.Helper()
		m.load(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: DefaultSecretName}, Data: s.data})
		return parse(t, s)
	}
	check := func(when string, serving, ca *x509.Certificate) {
		t.Helper()
		got := gatherExpiries(t, reg)
		want := map[string]float64{"serving": float64(serving.NotAfter.Unix()), "ca": float64(ca.NotAfter.Unix())}
		if len(got) != 2 || got["serving"] != want["serving"] || got["ca"] != want["ca"] {
			t.Errorf("%s: %v, want %v", when, got, want)
		}
	}

	p := m.policy
	s := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))
	first := load(s)
	check("first certificate", first.serving, first.signing)

	// Renewed at two thirds: a new serving certificate, the same CA.
	s = apply(s, decideOK(t, p, s, renewAt(first.serving), time.Time{}))
	renewed := load(s)
	if renewed.serving.Equal(first.serving) {
		t.Fatal("no renewal")
	}
	check("after the renewal", renewed.serving, first.signing)

	// On until the serving certificate is signed by a new CA, the bundle
	// always trusted. While both CAs are in the bundle, ca is still the one
	// that signed the certificate served.
	now := renewAt(renewed.serving)
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("no CA rotation within 100 decisions")
		}
		out := decideOK(t, p, s, now, now.Add(-time.Hour))
		s = apply(s, out)
		c := load(s)
		issuer := first.signing
		if !signedBy(c.serving, first.signing) {
			issuer = c.signing
		}
		check(fmt.Sprintf("at %v", now.Sub(t0)), c.serving, issuer)
		if issuer != first.signing {
			if issuer.Equal(first.signing) {
				t.Fatal("the new CA is the old one")
			}
			break
		}
		if !out.next.After(now) {
			t.Fatalf("decision at %v: next %v", now, out.next)
		}
		now = out.next
	}
}

func gatherExpiries(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}
