package certs

import (
	"bytes"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func testPolicy() policy {
	return policy{
		names:    Options{Namespace: "ns", ServiceName: "svc", URL: "https://127.0.0.1:9443"}.names(),
		validity: 90 * time.Minute,
		delay:    10 * time.Second,
	}
}

// decideOK runs decide and fails t on an error.
func decideOK(t *testing.T, p policy, s stored, now, trusted time.Time) plan {
	t.Helper()
	out, err := p.decide(s, now, trusted)
	if err != nil {
		t.Fatalf("decide at %v: %v", now.Sub(t0), err)
	}
	return out
}

// apply returns the stored state after writing out.
func apply(s stored, out plan) stored {
	if out.data == nil {
		return s
	}
	return stored{data: out.data, publishedAt: out.publishedAt}
}

// contents parses a stored state for assertions.
type contents struct {
	serving *x509.Certificate
	cas     []*x509.Certificate
	signing *x509.Certificate
}

func parse(t *testing.T, s stored) contents {
	t.Helper()
	pair, err := parsePair(s.data[KeyServingCert], s.data[KeyServingKey])
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	c := contents{serving: pair.Leaf, cas: parseBundle(s.data[KeyCABundle])}
	key, err := parseKey(s.data[KeyCAKey])
	if err != nil {
		t.Fatalf("ca.key: %v", err)
	}
	for _, ca := range c.cas {
		if matches(key, ca) {
			c.signing = ca
		}
	}
	if c.signing == nil {
		t.Fatal("ca.key matches no CA of ca.crt")
	}
	return c
}

func TestDecideCreatesFromNothing(t *testing.T) {
	p := testPolicy()
	out := decideOK(t, p, stored{}, t0, time.Time{})
	if out.data == nil {
		t.Fatal("nothing to write for an empty Secret")
	}
	if !out.publishedAt.Equal(t0) {
		t.Errorf("publishedAt %v, want %v", out.publishedAt, t0)
	}
	c := parse(t, apply(stored{}, out))
	if len(c.cas) != 1 || c.cas[0] != c.signing {
		t.Fatalf("bundle holds %d CAs, want the signing one only", len(c.cas))
	}
	if !signedBy(c.serving, c.signing) {
		t.Error("the serving certificate is not signed by the CA")
	}
	if got, want := c.serving.NotAfter, t0.Add(p.validity); !got.Equal(want) {
		t.Errorf("serving NotAfter %v, want %v", got, want)
	}
	if got, want := c.signing.NotAfter, t0.Add(caLifetimes*p.validity); !got.Equal(want) {
		t.Errorf("CA NotAfter %v, want %v", got, want)
	}
	if !c.serving.NotBefore.Before(t0) || t0.Sub(c.serving.NotBefore) > maxBackdate {
		t.Errorf("serving NotBefore %v: want backdated by at most %v from %v", c.serving.NotBefore, maxBackdate, t0)
	}
	for _, name := range []string{"svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"} {
		if err := c.serving.VerifyHostname(name); err != nil {
			t.Errorf("serving certificate: %v", err)
		}
	}
	if err := c.serving.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("serving certificate: %v", err)
	}
	if len(c.serving.IPAddresses) != 1 || !c.serving.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("IP SANs %v, want [127.0.0.1]", c.serving.IPAddresses)
	}
	if !out.next.Equal(renewAt(c.serving)) {
		t.Errorf("next %v, want the serving renewal %v", out.next, renewAt(c.serving))
	}
	// Verified as the API server will: against the bundle, for the name.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(out.data[KeyCABundle])
	if _, err := c.serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "svc.ns.svc", CurrentTime: t0}); err != nil {
		t.Errorf("verifying against ca.crt: %v", err)
	}
}

func TestDecideRenewsAtTwoThirds(t *testing.T) {
	p := testPolicy()
	s := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))
	first := parse(t, s)
	due := renewAt(first.serving)

	if out := decideOK(t, p, s, due.Add(-time.Nanosecond), time.Time{}); out.data != nil {
		t.Fatalf("renewed before two thirds: %v", out.reasons)
	}
	out := decideOK(t, p, s, due, time.Time{})
	if out.data == nil {
		t.Fatal("not renewed at two thirds of the lifetime")
	}
	second := parse(t, apply(s, out))
	if second.serving.Equal(first.serving) {
		t.Fatal("same serving certificate after renewal")
	}
	if !second.signing.Equal(first.signing) || !bytes.Equal(out.data[KeyCAKey], s.data[KeyCAKey]) {
		t.Error("the CA changed with a serving renewal")
	}
	if !out.publishedAt.Equal(s.publishedAt) {
		t.Error("publishedAt changed without a new CA")
	}
	if out := decideOK(t, p, apply(s, out), due, time.Time{}); out.data != nil {
		t.Errorf("a second decision at the same time writes again: %v", out.reasons)
	}
}

func TestDecideRenewsForMissingNamesKeepingTheOldOnes(t *testing.T) {
	p := testPolicy()
	s := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))

	other := p
	other.names = Options{Namespace: "ns", ServiceName: "renamed"}.names()
	out := decideOK(t, other, s, t0.Add(time.Minute), time.Time{})
	if out.data == nil {
		t.Fatal("not renewed though the options ask for other names")
	}
	if !strings.Contains(strings.Join(out.reasons, ";"), "renamed") {
		t.Errorf("reasons %q do not name the missing name", out.reasons)
	}
	c := parse(t, apply(s, out))
	for _, name := range []string{"renamed.ns.svc", "svc.ns.svc", "127.0.0.1"} {
		if err := c.serving.VerifyHostname(name); err != nil {
			t.Errorf("after renewal: %v", err)
		}
	}
	// Neither options now wants a write: no fight between old and new
	// replicas.
	for _, q := range []policy{p, other} {
		if out := decideOK(t, q, apply(s, out), t0.Add(2*time.Minute), time.Time{}); out.data != nil {
			t.Errorf("writes again: %v", out.reasons)
		}
	}
}

func TestDecideRotatesTheCAOnlyOnceTrusted(t *testing.T) {
	p := testPolicy()
	s := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))
	// Renew the serving certificate as due until the CA is due.
	caDue := renewAt(parse(t, s).signing)
	for now := t0; ; {
		out := decideOK(t, p, s, now, time.Time{})
		s = apply(s, out)
		if !out.next.Before(caDue) {
			break
		}
		now = out.next
	}
	before := parse(t, s)

	// Two thirds through the CA's life: a new CA is published, the
	// serving certificate is kept.
	out := decideOK(t, p, s, caDue, time.Time{})
	if out.data == nil {
		t.Fatal("no new CA at two thirds of the CA's life")
	}
	s = apply(s, out)
	during := parse(t, s)
	if len(during.cas) != 2 || during.signing.Equal(before.signing) {
		t.Fatalf("bundle %d CAs, signing changed %v; want the old and a new signing CA", len(during.cas), !during.signing.Equal(before.signing))
	}
	if !during.cas[0].Equal(during.signing) {
		t.Error("the newest CA is not first in ca.crt")
	}
	if !during.serving.Equal(before.serving) {
		t.Fatal("the serving certificate changed in the same write as the CA")
	}
	if !s.publishedAt.Equal(caDue) {
		t.Errorf("publishedAt %v, want %v", s.publishedAt, caDue)
	}

	// Not trusted yet (no injection seen): no switch, however late.
	late := caDue.Add(time.Hour)
	if late.After(during.serving.NotAfter) {
		late = during.serving.NotAfter.Add(-time.Second)
	}
	if out := decideOK(t, p, s, late, time.Time{}); out.data != nil {
		t.Fatalf("switched before the bundle was seen injected: %v", out.reasons)
	}
	// Seen injected a second after publishing: the switch waits for the
	// propagation delay after that, and next says when.
	trusted := caDue.Add(time.Second)
	out = decideOK(t, p, s, trusted, trusted)
	if out.data != nil {
		t.Fatalf("switched at once: %v", out.reasons)
	}
	if want := trusted.Add(p.delay); !out.next.Equal(want) {
		t.Errorf("next %v, want the end of the delay %v", out.next, want)
	}
	if out := decideOK(t, p, s, trusted.Add(p.delay-time.Nanosecond), trusted); out.data != nil {
		t.Fatalf("switched before the delay ended: %v", out.reasons)
	}
	out = decideOK(t, p, s, trusted.Add(p.delay), trusted)
	if out.data == nil {
		t.Fatal("no switch once the delay ended")
	}
	after := parse(t, apply(s, out))
	if !signedBy(after.serving, during.signing) {
		t.Error("the serving certificate is not signed by the new CA")
	}
	if !bytes.Equal(out.data[KeyCABundle], s.data[KeyCABundle]) {
		t.Error("the bundle changed with the switch")
	}
}

func TestDecideIssuesWithTheNewCAWhenTheOldCertificateExpires(t *testing.T) {
	p := testPolicy()
	s := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))
	// Lose ca.key: a new CA must be made, the served certificate kept.
	s.data[KeyCAKey] = []byte("garbage")
	out := decideOK(t, p, s, t0.Add(time.Minute), time.Time{})
	if out.data == nil {
		t.Fatal("no new CA for an unusable ca.key")
	}
	s2 := apply(s, out)
	c := parse(t, s2)
	if len(c.cas) != 2 {
		t.Errorf("bundle holds %d CAs, want the old (still valid) and the new", len(c.cas))
	}
	if !bytes.Equal(s2.data[KeyServingCert], s.data[KeyServingCert]) {
		t.Error("the serving certificate was replaced before the new CA was trusted")
	}
	if !out.next.Equal(c.serving.NotAfter) {
		t.Errorf("next %v, want the old certificate's expiry %v", out.next, c.serving.NotAfter)
	}
	// Never trusted (say, injection keeps failing): at expiry the old
	// certificate is useless and the new CA signs.
	out = decideOK(t, p, s2, c.serving.NotAfter, time.Time{})
	if out.data == nil || !signedBy(parse(t, apply(s2, out)).serving, c.signing) {
		t.Fatal("no certificate from the new CA once the old one expired")
	}
}

func TestDecideRepairs(t *testing.T) {
	p := testPolicy()
	good := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))
	ca := parse(t, good).signing
	foreign := apply(stored{}, decideOK(t, p, stored{}, t0, time.Time{}))

	cases := map[string]func(map[string][]byte){
		"no tls.crt":         func(d map[string][]byte) { delete(d, KeyServingCert) },
		"key does not match": func(d map[string][]byte) { d[KeyServingKey] = foreign.data[KeyServingKey] },
		"signed by another": func(d map[string][]byte) {
			d[KeyServingCert], d[KeyServingKey] = foreign.data[KeyServingCert], foreign.data[KeyServingKey]
		},
		"bundle reordered":     func(d map[string][]byte) { d[KeyCABundle] = append([]byte("\n"), d[KeyCABundle]...) },
		"garbage in bundle":    func(d map[string][]byte) { d[KeyCABundle] = append(d[KeyCABundle], "junk\n"...) },
		"a non-CA in bundle":   func(d map[string][]byte) { d[KeyCABundle] = append(d[KeyCABundle], good.data[KeyServingCert]...) },
		"CA missing in ca.crt": func(d map[string][]byte) { d[KeyCABundle] = foreign.data[KeyCABundle] },
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range good.data {
				data[k] = v
			}
			breakIt(data)
			s := stored{data: data, publishedAt: good.publishedAt}
			out := decideOK(t, p, s, t0.Add(time.Minute), time.Time{})
			if out.data == nil {
				t.Fatal("nothing written")
			}
			if len(out.reasons) == 0 {
				t.Error("no reason given")
			}
			c := parse(t, apply(s, out))
			if !slicesContainsIssuer(c) {
				t.Error("the serving certificate is signed by no CA of the bundle")
			}
			if name != "CA missing in ca.crt" && !c.signing.Equal(ca) {
				t.Error("the CA was replaced though it was usable")
			}
			if out := decideOK(t, p, apply(s, out), t0.Add(time.Minute), time.Time{}); out.data != nil {
				t.Errorf("not settled after one write: %v", out.reasons)
			}
		})
	}
}

func slicesContainsIssuer(c contents) bool {
	for _, ca := range c.cas {
		if signedBy(c.serving, ca) {
			return true
		}
	}
	return false
}

// TestDecideOverSeveralCALifetimes steps time through three CA lifetimes,
// injecting each bundle at once, with API servers that see a bundle only
// just under the propagation delay after it was written. At every step the
// certificate served must verify against the bundle the API servers hold,
// never outlive its CA, and the Secret must be written only with a reason.
func TestDecideOverSeveralCALifetimes(t *testing.T) {
	p := testPolicy()
	lag := p.delay - time.Second
	type published struct {
		at     time.Time
		bundle []byte
	}
	var (
		s        stored
		history  []published // bundles as written, oldest first
		trusted  time.Time
		writes   int
		cas      = map[string]bool{}
		servings = map[string]bool{}
	)
	// seen is the bundle the API servers use at now.
	seen := func(now time.Time) []byte {
		var b []byte
		for _, h := range history {
			if !h.at.After(now.Add(-lag)) {
				b = h.bundle
			}
		}
		return b
	}
	end := t0.Add(3 * caLifetimes * p.validity)
	step := p.validity / 97
	for now := t0; now.Before(end); now = now.Add(step) {
		out := decideOK(t, p, s, now, trusted)
		if out.data != nil {
			if len(out.reasons) == 0 {
				t.Fatalf("%v: a write without a reason", now.Sub(t0))
			}
			writes++
			if !bytes.Equal(out.data[KeyCABundle], s.data[KeyCABundle]) {
				history = append(history, published{at: now, bundle: out.data[KeyCABundle]})
				trusted = now // injected at once
			}
			s = apply(s, out)
		}
		if out.next.IsZero() || !out.next.After(now) {
			t.Fatalf("%v: next %v is not in the future", now.Sub(t0), out.next)
		}
		c := parse(t, s)
		cas[string(c.signing.Raw)] = true
		servings[string(c.serving.Raw)] = true
		if now.Sub(t0) < lag {
			continue // nothing was ever served before the first bundle propagated
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(seen(now)) {
			t.Fatalf("%v: the API servers hold no bundle", now.Sub(t0))
		}
		chains, err := c.serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "svc.ns.svc", CurrentTime: now})
		if err != nil {
			t.Fatalf("%v: the served certificate does not verify against the propagated bundle: %v", now.Sub(t0), err)
		}
		if issuer := chains[0][len(chains[0])-1]; c.serving.NotAfter.After(issuer.NotAfter) {
			t.Fatalf("%v: the serving certificate outlives its CA", now.Sub(t0))
		}
	}
	// Three CA lifetimes: the first CA and one new every 2/3 of a CA life.
	if len(cas) < 4 {
		t.Errorf("%d CAs over three CA lifetimes, want at least 4", len(cas))
	}
	if len(servings) < 3*caLifetimes*3/2 {
		t.Errorf("%d serving certificates, want at least %d", len(servings), 3*caLifetimes*3/2)
	}
	// Each write is a serving renewal, a new CA, or a CA dropping out.
	if max := len(servings) + 2*len(cas); writes > max {
		t.Errorf("%d writes, more than %d", writes, max)
	}
}

func TestIssueServingNeverOutlivesItsCA(t *testing.T) {
	ca, err := newCertificateAuthority(t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := issueServing(ca, sans{dns: []string{"x"}}, t0.Add(50*time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !kp.cert.NotAfter.Equal(ca.cert.NotAfter) {
		t.Errorf("NotAfter %v, want the CA's %v", kp.cert.NotAfter, ca.cert.NotAfter)
	}
	if _, err := issueServing(ca, sans{dns: []string{"x"}}, t0.Add(time.Hour), time.Hour); err == nil {
		t.Error("an expired CA signed a certificate")
	}
}
