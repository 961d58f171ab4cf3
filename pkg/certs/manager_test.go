package certs

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
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
