package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// CAConfigMapLabels are the labels of the ConfigMap the Manager creates
// (Options.CAConfigMap): an uninstall deletes a ConfigMap only if it
// carries them.
func CAConfigMapLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "handroll",
		"app.kubernetes.io/component": "ca-bundle",
	}
}

// syncCAConfigMap is the target sync of Options.CAConfigMap: the bundle
// goes under KeyCABundle, the ConfigMap is created when absent, and its
// other keys, labels and annotations are kept. Another replica creating or
// updating it first is read again, as a conflict.
func (m *Manager) syncCAConfigMap(name string) syncFunc {
	client := m.kube.CoreV1().ConfigMaps(m.opts.Namespace)
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	return func(ctx context.Context, in injection, beforeWrite func(context.Context) error) (outcome, error) {
		result := current
		err := retry.OnError(retry.DefaultRetry, retriable, func() error {
			result = current
			cm, err := client.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: m.opts.Namespace, Labels: CAConfigMapLabels(),
				}}
			case err != nil:
				return err
			case cm.Data[KeyCABundle] == string(in.bundle):
				return nil
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[KeyCABundle] = string(in.bundle)
			if err := beforeWrite(ctx); err != nil {
				return err
			}
			if cm.ResourceVersion == "" {
				_, err = client.Create(ctx, cm, metav1.CreateOptions{})
			} else {
				_, err = client.Update(ctx, cm, metav1.UpdateOptions{})
			}
			if err == nil {
				result = updated
			}
			return err
		})
		return result, err
	}
}

// metricsCert is the metrics server's certificate (Options.MetricsServiceName).
// Every replica issues its own, in memory, with ca.key: nothing more to
// store, and no replica waits for another. It follows the webhook serving
// certificate from one CA to the next: a new CA signs it only once the
// Secret's tls.crt is signed by that CA too, that is once the bundle
// holding it has been in every target (the CA ConfigMap among them) for
// the propagation delay, and once the CA has been published for
// metricsDelay. Only the worker calls refresh.
type metricsCert struct {
	names    sans
	validity time.Duration
	served   atomic.Pointer[tls.Certificate]
}

// maxMetricsDelay is how long a new CA must have been published before it
// signs a metrics certificate: the time a Prometheus takes to trust it,
// the Prometheus Operator copying the ConfigMap into a Secret of
// Prometheus's pod and the kubelet updating that volume, a minute or two.
// The API servers the webhooks' PropagationDelay waits for read the
// objects as they change; the kubelet does not. A short validity (tests)
// waits a tenth of it instead.
const maxMetricsDelay = 5 * time.Minute

func (c *metricsCert) delay() time.Duration { return min(maxMetricsDelay, c.validity/10) }

// refresh issues a new certificate when the one served is missing,
// expired, signed by no CA of the Secret's bundle, behind the webhook's
// certificate on a newer CA, two thirds through its life or lacking a
// name. It returns when to look again; zero when the Secret cannot sign
// yet (the next sync writes one that can).
func (c *metricsCert) refresh(s *corev1.Secret, now time.Time) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	var cas []*x509.Certificate
	for _, ca := range parseBundle(s.Data[KeyCABundle]) {
		if !expired(ca, now) {
			cas = append(cas, ca)
		}
	}
	var signing *keyPair
	if key, err := parseKey(s.Data[KeyCAKey]); err == nil {
		for _, ca := range cas {
			if matches(key, ca) {
				signing = &keyPair{cert: ca, key: key}
			}
		}
	}
	if signing == nil {
		return time.Time{}, nil // the decision writes one that signs
	}
	// When the signing CA may sign this certificate: never before the
	// webhook's has moved to it. An unreadable annotation: at once.
	var switchAt time.Time
	if webhook, err := parsePair(s.Data[KeyServingCert], s.Data[KeyServingKey]); err == nil && signedBy(webhook.Leaf, signing.cert) {
		published, _ := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationCAPublishedAt])
		switchAt = published.Add(c.delay())
	}
	reason, next := c.keep(cas, signing.cert, switchAt, now)
	if reason == "" {
		return next, nil
	}
	kp, err := issueServing(signing, c.names, now, c.validity)
	if err != nil {
		return time.Time{}, err
	}
	c.served.Store(&tls.Certificate{Certificate: [][]byte{kp.cert.Raw}, PrivateKey: kp.key, Leaf: kp.cert})
	klog.InfoS("Issued a metrics serving certificate", "reason", reason, "serial", kp.cert.SerialNumber.Text(16),
		"notAfter", kp.cert.NotAfter, "issuer", kp.cert.Issuer.CommonName, "names", strings.Join(c.names.dns, ","))
	return earliest(renewAt(kp.cert), kp.cert.NotAfter), nil
}

// keep says why the certificate served must be replaced, or, when it may
// stay, when to look again. switchAt is when signing may replace the CA
// of a certificate it did not sign; zero: not yet known.
func (c *metricsCert) keep(cas []*x509.Certificate, signing *x509.Certificate, switchAt, now time.Time) (reason string, next time.Time) {
	cur := c.served.Load()
	if cur == nil {
		return "none yet", time.Time{}
	}
	leaf := cur.Leaf
	var issuer *x509.Certificate
	for _, ca := range cas {
		if signedBy(leaf, ca) {
			issuer = ca
		}
	}
	switch {
	case expired(leaf, now):
		return "expired", time.Time{}
	case issuer == nil:
		return "signed by no CA of the bundle", time.Time{}
	case issuer != signing && !switchAt.IsZero() && !now.Before(switchAt):
		return "CA " + signing.Subject.CommonName + " signs the webhook certificate and has been published for " + c.delay().String(), time.Time{}
	case issuer != signing:
		// As the webhook's: kept past its renewal if need be, until the
		// new CA has been published everywhere.
		if !switchAt.IsZero() {
			return "", earliest(leaf.NotAfter, switchAt)
		}
		return "", leaf.NotAfter
	case !now.Before(renewAt(leaf)):
		return "two thirds through its life", time.Time{}
	case len(c.names.missingFrom(leaf)) > 0:
		return "lacks " + strings.Join(c.names.missingFrom(leaf), ", "), time.Time{}
	}
	return "", renewAt(leaf)
}

// GetMetricsCertificate is tls.Config.GetCertificate for the metrics
// server (Options.MetricsServiceName): the certificate issued last, from
// memory.
func (m *Manager) GetMetricsCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if m.metrics != nil {
		if c := m.metrics.served.Load(); c != nil {
			return c, nil
		}
	}
	return nil, errors.New("no metrics serving certificate issued yet")
}
