package certs

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The Secret's keys. tls.crt and tls.key are what a kubernetes.io/tls
// Secret must hold; ca.crt is the bundle the API server trusts; ca.key
// signs the serving certificates.
const (
	KeyServingCert = corev1.TLSCertKey       // tls.crt
	KeyServingKey  = corev1.TLSPrivateKeyKey // tls.key
	KeyCABundle    = "ca.crt"
	KeyCAKey       = "ca.key"

	// AnnotationCAPublishedAt records (RFC 3339) when the CA of ca.key
	// entered ca.crt. A serving certificate is signed by that CA only once
	// it has been published for the propagation delay.
	AnnotationCAPublishedAt = "handroll.dev/ca-published-at"
)

// policy is what the options say about certificates.
type policy struct {
	names    sans
	validity time.Duration
	delay    time.Duration // PropagationDelay
}

// stored is what the Secret holds, as far as decisions go.
type stored struct {
	data        map[string][]byte
	publishedAt time.Time
}

// plan is the outcome of a decision.
type plan struct {
	// data holds the four keys to write, or is nil when the Secret is
	// current.
	data map[string][]byte
	// publishedAt is the annotation to write with data.
	publishedAt time.Time
	// reasons say, for the log, why data changed.
	reasons []string
	// next is when the Secret needs a decision again if nothing else
	// happens first (a renewal, a CA rotation, a CA expiring out of the
	// bundle, the end of a propagation delay); zero if never.
	next time.Time
}

// decide looks at the Secret's content at now and says what to write. What
// it decides depends only on its arguments (the keys it makes are random),
// so replicas that read the same Secret agree, and whichever writes first
// wins.
//
// trustedSince is since when this replica has seen the bundle of s
// (ca.crt, byte for byte) in every injected object, or zero. It only
// ever delays the switch to a new CA: the switch waits until the CA has been
// published, and seen injected, for the propagation delay. Until then the
// certificate of the previous CA, which every bundle still holds, is served.
func (p policy) decide(s stored, now, trustedSince time.Time) (plan, error) {
	d := &decision{
		policy: p, now: now, trustedSince: trustedSince,
		caKey: s.data[KeyCAKey], certPEM: s.data[KeyServingCert], keyPEM: s.data[KeyServingKey],
	}
	d.out.publishedAt = s.publishedAt
	d.keepValidCAs(s.data[KeyCABundle])
	if err := d.chooseCA(); err != nil {
		return plan{}, err
	}
	if err := d.chooseServing(); err != nil {
		return plan{}, err
	}
	d.out.next = d.nextLook()

	bundle := encodeBundle(d.cas)
	if !d.issue && !d.newCA && bytes.Equal(bundle, s.data[KeyCABundle]) {
		return d.out, nil
	}
	if len(d.out.reasons) == 0 {
		d.because("ca.crt is not in canonical form")
	}
	d.out.data = map[string][]byte{
		KeyServingCert: d.certPEM,
		KeyServingKey:  d.keyPEM,
		KeyCABundle:    bundle,
		KeyCAKey:       d.caKey,
	}
	return d.out, nil
}

// decision is one decide call's working state, in the order its steps
// fill it: the valid CAs, the signing CA, the serving certificate.
type decision struct {
	policy
	now, trustedSince time.Time
	out               plan

	caKey, certPEM, keyPEM []byte
	cas                    []*x509.Certificate // the bundle to publish
	signing                *keyPair
	newCA                  bool
	gate                   time.Time // when signing may sign what is served
	leaf                   *x509.Certificate
	issue, waiting         bool // a new serving certificate; waiting for trust
}

func (d *decision) because(format string, args ...any) {
	d.out.reasons = append(d.out.reasons, fmt.Sprintf(format, args...))
}

// keepValidCAs keeps, of the bundle, every CA that has not expired. An
// expired CA can vouch for nothing that is still valid.
func (d *decision) keepValidCAs(bundle []byte) {
	all := parseBundle(bundle)
	for _, c := range all {
		if !expired(c, d.now) {
			d.cas = append(d.cas, c)
		}
	}
	if n := len(all) - len(d.cas); n > 0 {
		d.because("dropped %d expired CA(s) from the bundle", n)
	}
}

// chooseCA finds the signing CA, the one whose key is ca.key, or makes a
// new one. It is replaced when two thirds of its life have passed, early
// enough that the certificates it signed all expire before it leaves the
// bundle.
func (d *decision) chooseCA() error {
	if key, err := parseKey(d.caKey); err == nil {
		for _, c := range d.cas {
			if matches(key, c) {
				d.signing = &keyPair{cert: c, key: key}
				break
			}
		}
	}
	d.newCA = true
	switch {
	case d.signing == nil && len(d.caKey) == 0:
		d.because("no CA yet")
	case d.signing == nil:
		d.because("ca.key is not the key of a valid CA in ca.crt")
	case !d.now.Before(renewAt(d.signing.cert)):
		d.because("CA %s is two thirds through its life", d.signing.cert.Subject.CommonName)
	default:
		d.newCA = false
	}
	if d.newCA {
		ca, err := newCertificateAuthority(d.now, caLifetimes*d.validity)
		if err != nil {
			return err
		}
		if d.caKey, err = encodeKey(ca.key); err != nil {
			return err
		}
		d.signing = ca
		d.cas = append(d.cas, ca.cert)
		d.out.publishedAt = d.now
	}
	d.gate = laterOf(d.out.publishedAt, d.trustedSince).Add(d.delay)
	return nil
}

// chooseServing keeps the serving certificate or issues a new one with
// the signing CA, once that CA has been trusted for the propagation delay.
func (d *decision) chooseServing() error {
	gateOpen := !d.trustedSince.IsZero() && !d.now.Before(d.gate)
	var issuer *x509.Certificate
	pair, loadErr := parsePair(d.certPEM, d.keyPEM)
	if loadErr == nil {
		d.leaf = pair.Leaf
		for _, c := range d.cas {
			if signedBy(d.leaf, c) {
				issuer = c
				break
			}
		}
	}
	d.issue = true
	names := d.names
	switch {
	case len(d.certPEM) == 0:
		d.because("no serving certificate yet")
	case d.leaf == nil:
		d.because("tls.crt and tls.key do not load: %v", loadErr)
	case expired(d.leaf, d.now):
		d.because("the serving certificate has expired")
	case issuer == nil:
		d.because("the serving certificate is signed by no CA of the bundle")
	case d.leaf.NotAfter.After(issuer.NotAfter):
		d.because("the serving certificate outlives its CA")
	case issuer != d.signing.cert && !gateOpen:
		// Keep serving the previous CA's certificate, past its renewal
		// time if need be, until the new CA is trusted everywhere.
		d.issue, d.waiting = false, true
	case issuer != d.signing.cert:
		d.because("CA %s has been trusted for %v", d.signing.cert.Subject.CommonName, d.delay)
	case !d.now.Before(renewAt(d.leaf)):
		d.because("the serving certificate is two thirds through its life")
	default:
		missing := d.names.missingFrom(d.leaf)
		if len(missing) == 0 {
			d.issue = false
			break
		}
		d.because("the serving certificate lacks %s", strings.Join(missing, ", "))
		// Keep the names it has: a replica still running with other
		// options (during a rolling update) then finds its names too,
		// rather than the two rewriting the Secret in turn. The next
		// renewal drops the names no replica asks for.
		names = d.names.union(d.leaf)
	}
	if !d.issue {
		return nil
	}
	kp, err := issueServing(d.signing, names, d.now, d.validity)
	if err != nil {
		return err
	}
	if d.keyPEM, err = encodeKey(kp.key); err != nil {
		return err
	}
	d.certPEM, d.leaf = encodeCert(kp.cert), kp.cert
	return nil
}

// nextLook is when to look again: the next renewal, CA rotation, CA
// expiry or end of the propagation delay. Without a known trust time, the
// switch waits for an injection pass, which asks for a decision itself.
func (d *decision) nextLook() time.Time {
	next := renewAt(d.signing.cert)
	if d.waiting {
		next = earliest(next, d.leaf.NotAfter)
		if !d.trustedSince.IsZero() {
			next = earliest(next, d.gate)
		}
	} else {
		next = earliest(next, renewAt(d.leaf))
	}
	for _, c := range d.cas {
		next = earliest(next, c.NotAfter)
	}
	return next
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
