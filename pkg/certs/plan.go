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
	var (
		out     plan
		caKey   = s.data[KeyCAKey]
		certPEM = s.data[KeyServingCert]
		keyPEM  = s.data[KeyServingKey]
	)
	out.publishedAt = s.publishedAt
	because := func(format string, args ...any) { out.reasons = append(out.reasons, fmt.Sprintf(format, args...)) }

	// The bundle: every CA that has not expired. An expired CA can vouch
	// for nothing that is still valid.
	var cas []*x509.Certificate
	all := parseBundle(s.data[KeyCABundle])
	for _, c := range all {
		if !expired(c, now) {
			cas = append(cas, c)
		}
	}
	if n := len(all) - len(cas); n > 0 {
		because("dropped %d expired CA(s) from the bundle", n)
	}

	// The signing CA: the one whose key is ca.key. It is replaced when two
	// thirds of its life have passed, early enough that the certificates
	// it signed all expire before it leaves the bundle.
	var signing *keyPair
	if key, err := parseKey(caKey); err == nil {
		for _, c := range cas {
			if matches(key, c) {
				signing = &keyPair{cert: c, key: key}
				break
			}
		}
	}
	newCA := true
	switch {
	case signing == nil && len(caKey) == 0:
		because("no CA yet")
	case signing == nil:
		because("ca.key is not the key of a valid CA in ca.crt")
	case !now.Before(renewAt(signing.cert)):
		because("CA %s is two thirds through its life", signing.cert.Subject.CommonName)
	default:
		newCA = false
	}
	if newCA {
		ca, err := newCertificateAuthority(now, caLifetimes*p.validity)
		if err != nil {
			return plan{}, err
		}
		if caKey, err = encodeKey(ca.key); err != nil {
			return plan{}, err
		}
		signing = ca
		cas = append(cas, ca.cert)
		out.publishedAt = now
	}
	// gate is when the signing CA may sign the certificate served.
	gate := laterOf(out.publishedAt, trustedSince).Add(p.delay)
	gateOpen := !trustedSince.IsZero() && !now.Before(gate)

	// The serving certificate.
	var leaf, issuer *x509.Certificate
	pair, loadErr := parsePair(certPEM, keyPEM)
	if loadErr == nil {
		leaf = pair.Leaf
		for _, c := range cas {
			if signedBy(leaf, c) {
				issuer = c
				break
			}
		}
	}
	issue, waiting, names := true, false, p.names
	switch {
	case len(certPEM) == 0:
		because("no serving certificate yet")
	case leaf == nil:
		because("tls.crt and tls.key do not load: %v", loadErr)
	case expired(leaf, now):
		because("the serving certificate has expired")
	case issuer == nil:
		because("the serving certificate is signed by no CA of the bundle")
	case leaf.NotAfter.After(issuer.NotAfter):
		because("the serving certificate outlives its CA")
	case issuer != signing.cert && !gateOpen:
		// Keep serving the previous CA's certificate, past its renewal
		// time if need be, until the new CA is trusted everywhere.
		issue, waiting = false, true
	case issuer != signing.cert:
		because("CA %s has been trusted for %v", signing.cert.Subject.CommonName, p.delay)
	case !now.Before(renewAt(leaf)):
		because("the serving certificate is two thirds through its life")
	default:
		missing := p.names.missingFrom(leaf)
		if len(missing) == 0 {
			issue = false
			break
		}
		because("the serving certificate lacks %s", strings.Join(missing, ", "))
		// Keep the names it has: a replica still running with other
		// options (during a rolling update) then finds its names too,
		// rather than the two rewriting the Secret in turn. The next
		// renewal drops the names no replica asks for.
		names = p.names.union(leaf)
	}
	if issue {
		kp, err := issueServing(signing, names, now, p.validity)
		if err != nil {
			return plan{}, err
		}
		if keyPEM, err = encodeKey(kp.key); err != nil {
			return plan{}, err
		}
		certPEM, leaf = encodeCert(kp.cert), kp.cert
	}

	// When to look again: the next renewal, CA rotation, CA expiry or end
	// of the propagation delay. Without a known trust time, the switch
	// waits for an injection pass, which asks for a decision itself.
	next := renewAt(signing.cert)
	if waiting {
		next = earliest(next, leaf.NotAfter)
		if !trustedSince.IsZero() {
			next = earliest(next, gate)
		}
	} else {
		next = earliest(next, renewAt(leaf))
	}
	for _, c := range cas {
		next = earliest(next, c.NotAfter)
	}
	out.next = next

	bundle := encodeBundle(cas)
	if !issue && !newCA && bytes.Equal(bundle, s.data[KeyCABundle]) {
		return out, nil
	}
	if len(out.reasons) == 0 {
		because("ca.crt is not in canonical form")
	}
	out.data = map[string][]byte{
		KeyServingCert: certPEM,
		KeyServingKey:  keyPEM,
		KeyCABundle:    bundle,
		KeyCAKey:       caKey,
	}
	return out, nil
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
