package certs

import (
	"crypto/x509"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func secretOf(s stored) *corev1.Secret {
	return withPlan(&corev1.Secret{}, plan{data: s.data, publishedAt: s.publishedAt})
}

// refreshOK runs refresh and returns the certificate served after it.
func refreshOK(t *testing.T, c *metricsCert, s stored, now time.Time) (*x509.Certificate, time.Time) {
	t.Helper()
	next, err := c.refresh(secretOf(s), now)
	if err != nil {
		t.Fatalf("refresh at %v: %v", now.Sub(t0), err)
	}
	served := c.served.Load()
	if served == nil {
		t.Fatalf("refresh at %v: nothing served", now.Sub(t0))
	}
	return served.Leaf, next
}

// The metrics certificate carries the metrics Service's names, is signed
// by the Secret's CA, is kept until two thirds of its life, and follows
// the webhook's certificate to a new CA, not before it.
func TestMetricsCertificateFollowsTheWebhookCertificate(t *testing.T) {
	p := testPolicy()
	c := &metricsCert{names: serviceNames("handroll-metrics", "ns"), validity: p.validity}
	if next, err := c.refresh(nil, t0); err != nil || !next.IsZero() || c.served.Load() != nil {
		t.Fatalf("no Secret yet: issued %v, next %v, err %v; want nothing", c.served.Load() != nil, next, err)
	}

	s := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))
	first, next := refreshOK(t, c, s, t0)
	if want := []string{"handroll-metrics", "handroll-metrics.ns", "handroll-metrics.ns.svc", "handroll-metrics.ns.svc.cluster.local"}; !slices.Equal(first.DNSNames, want) {
		t.Errorf("names %v, want %v", first.DNSNames, want)
	}
	if !signedBy(first, parse(t, s).signing) {
		t.Fatal("not signed by the Secret's CA")
	}
	if !next.Equal(renewAt(first)) {
		t.Errorf("next %v, want its renewal %v", next, renewAt(first))
	}
	if again, _ := refreshOK(t, c, s, next.Add(-time.Second)); !again.Equal(first) {
		t.Fatal("reissued before two thirds of its life")
	}
	renewed, _ := refreshOK(t, c, s, next)
	if renewed.Equal(first) {
		t.Fatal("not reissued at two thirds of its life")
	}

	// A new CA published: the webhook's certificate stays on the old one,
	// and so does this one, past its renewal if need be.
	caDue := renewAt(parse(t, s).signing)
	for now := t0; ; {
		out := decideOK(t, p, s, now, time.Time{})
		s = apply(s, out)
		if !out.next.Before(caDue) {
			break
		}
		now = out.next
	}
	c.served.Store(nil)
	before, _ := refreshOK(t, c, s, caDue.Add(-time.Second))
	s = apply(s, decideOK(t, p, s, caDue, time.Time{}))
	during := parse(t, s)
	if len(during.cas) != 2 || signedBy(during.serving, during.signing) {
		t.Fatal("the test wants a published CA the webhook's certificate does not use yet")
	}
	kept, next := refreshOK(t, c, s, renewAt(before))
	if !kept.Equal(before) {
		t.Fatal("switched to the new CA before the webhook's certificate did")
	}
	if !next.Equal(before.NotAfter) {
		t.Errorf("next %v while waiting, want its expiry %v", next, before.NotAfter)
	}

	// The webhook's certificate signed by the new CA: this one follows
	// once the CA has been published for the time Prometheus takes to
	// trust it, and says when that is.
	trusted := caDue.Add(time.Second)
	s = apply(s, decideOK(t, p, s, trusted.Add(p.delay), trusted))
	if !signedBy(parse(t, s).serving, during.signing) {
		t.Fatal("the test wants the webhook's certificate on the new CA")
	}
	switchAt := caDue.Add(c.delay())
	if c.delay() <= p.delay {
		t.Fatalf("metrics delay %v: want it past the webhook's %v", c.delay(), p.delay)
	}
	kept, next = refreshOK(t, c, s, trusted.Add(p.delay))
	if !kept.Equal(before) || !next.Equal(switchAt) {
		t.Fatalf("the webhook's certificate moved %v after the CA was published: switched %v, next %v; want kept until %v",
			trusted.Add(p.delay).Sub(caDue), !kept.Equal(before), next, switchAt)
	}
	switched, _ := refreshOK(t, c, s, switchAt)
	if !signedBy(switched, during.signing) {
		t.Error("still signed by the old CA after the webhook's certificate moved and the delay passed")
	}
}

// A ConfigMap target is listed last, and only when named.
func TestCAConfigMapIsATarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{{"", false}, {"handroll-ca", true}} {
		m := &Manager{kube: fake.NewClientset(), opts: Options{Namespace: "ns", CAConfigMap: tc.name, WebhookConfigurations: []string{}, CRDs: []string{}}}
		targets := m.targets()
		got := len(targets) == 1 && targets[0].String() == "ConfigMap/"+tc.name
		if got != tc.want || (!tc.want && len(targets) > 0) {
			t.Errorf("CAConfigMap %q: targets %v", tc.name, targets)
		}
	}
}
