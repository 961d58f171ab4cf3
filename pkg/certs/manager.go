package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/server"
)

// Retry timing. A failed API call, a target not there yet and a stale cache
// are all retried per-item exponentially: 1 s, 2 s, … at most a minute, so
// that a webhook configuration applied after the operator started gets its
// bundle within a minute.
const (
	retryBaseDelay = time.Second
	retryMaxDelay  = time.Minute
	// minRequeue keeps a decision whose next time is now (it should never
	// be) from becoming a busy loop.
	minRequeue = 100 * time.Millisecond
	// maxWriteAttempts bounds the re-read-and-decide-again loop on
	// conflicts; past it, the work item is retried with backoff.
	maxWriteAttempts = 5
)

// queueKey is the single work item: every event asks for the same whole
// check, and the workqueue folds requests that arrive while one runs.
const queueKey = "sync"

// Manager keeps the webhook serving certificate and its CAs in a Secret,
// serves the certificate from memory, and injects the CA bundle into the
// webhook configurations and CRDs. Every replica runs one; they agree
// through the Secret.
type Manager struct {
	opts   Options
	policy policy
	kube   kubernetes.Interface
	dyn    dynamic.Interface

	informer cache.SharedIndexInformer
	secrets  corev1listers.SecretNamespaceLister
	queue    workqueue.TypedRateLimitingInterface[string]
	started  atomic.Bool
	// restored is set by RestoreClientConfigs: no injection pass may point
	// a clientConfig at the URL again afterwards.
	restored atomic.Bool

	// served is what GetCertificate serves; the informer's handler stores
	// it. One pointer, so that the expiry metric never pairs a certificate
	// with another's CA.
	served  atomic.Pointer[servedPair]
	loadMu  sync.Mutex
	loadErr error // why the Secret's pair last failed to load

	// metrics is the metrics server's certificate; nil without
	// Options.MetricsServiceName.
	metrics *metricsCert

	// Owned by the worker (one goroutine).
	trust   trust
	reports map[string]string // target → last state logged
	// records: per target, the replaced-client-configs record seen and
	// since when; recordPending: the last pass saw one not yet stale.
	records       map[string]recordSeen
	recordPending bool
}

// servedPair is the serving certificate and the CA of the Secret's bundle
// that issued it (nil if the bundle lacks it).
type servedPair struct {
	cert *tls.Certificate
	ca   *x509.Certificate
}

// trust records since when every target has held a bundle.
type trust struct {
	bundle []byte
	since  time.Time
}

// New validates opts and returns a Manager; nothing talks to the API server
// until Start.
func New(kube kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Manager, error) {
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("webhook certificates: %w", err)
	}
	if kube == nil || (dyn == nil && len(o.CRDs) > 0) {
		return nil, errors.New("webhook certificates: a kubernetes clientset, and a dynamic client for CRDs, are required")
	}
	m := &Manager{
		opts:    o,
		policy:  policy{names: o.names(), validity: o.Validity, delay: o.PropagationDelay},
		kube:    kube,
		dyn:     dyn,
		reports: map[string]string{},
		records: map[string]recordSeen{},
	}
	if o.MetricsServiceName != "" {
		m.metrics = &metricsCert{names: serviceNames(o.MetricsServiceName, o.Namespace), validity: o.Validity}
	}
	// A single-object informer: the Secret reaches every replica by watch,
	// within a second of any replica writing it, and the RBAC can name it.
	m.informer = corev1informers.NewFilteredSecretInformer(kube, o.Namespace, 0, cache.Indexers{},
		func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.SecretName).String()
		})
	m.secrets = corev1listers.NewSecretLister(m.informer.GetIndexer()).Secrets(o.Namespace)
	m.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBaseDelay, retryMaxDelay),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: o.Clock})
	onChange := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			m.load(s)
		}
		m.queue.Add(queueKey)
	}
	if _, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
		// The certificate in memory stays served: the next sync writes a
		// new Secret.
		DeleteFunc: func(any) { m.queue.Add(queueKey) },
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// Start keeps the certificates current until ctx is done, then returns nil.
// It runs on every replica, leader or not: each serves the webhooks. API
// errors are logged and retried with backoff, never returned. Start may be
// called once.
func (m *Manager) Start(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return errors.New("webhook certificates: Start called twice")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer m.queue.ShutDown()
	wg.Go(func() { m.informer.RunWithContext(ctx) })
	if !cache.WaitForNamedCacheSyncWithContext(ctx, m.informer.HasSynced) {
		return nil
	}
	wg.Go(func() {
		<-ctx.Done()
		m.queue.ShutDown()
	})
	klog.InfoS("Managing the webhook certificates", "secret", klog.KRef(m.opts.Namespace, m.opts.SecretName),
		"webhookConfigurations", m.opts.WebhookConfigurations, "crds", m.opts.CRDs, "url", m.opts.URL)
	m.queue.Add(queueKey)
	for m.processNext(ctx) {
	}
	return nil
}

func (m *Manager) processNext(ctx context.Context) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)

	next, settled, err := m.sync(ctx)
	switch {
	case ctx.Err() != nil:
		return true // shutting down; Get returns quit next
	case err != nil:
		klog.ErrorS(err, "Keeping the webhook certificates current; will retry",
			"secret", klog.KRef(m.opts.Namespace, m.opts.SecretName), "retries", m.queue.NumRequeues(key))
		m.queue.AddRateLimited(key)
	case !settled:
		m.queue.AddRateLimited(key)
	default:
		m.queue.Forget(key)
	}
	// Both are kept: the delaying queue fires at the earlier.
	m.queue.AddAfter(key, m.opts.ResyncPeriod)
	if m.opts.URL != "" || m.recordPending {
		// A record to renew, or one to watch go stale.
		m.queue.AddAfter(key, m.opts.RecordRenewal)
	}
	if !next.IsZero() {
		m.queue.AddAfter(key, max(next.Sub(m.opts.Clock.Now()), minRequeue))
	}
	return true
}

// sync is the whole check. First the bundle of the Secret as cached is
// injected, so that the decision sees whether this replica has found it
// everywhere; then the Secret is brought up to date, and the metrics
// certificate with it. A write to the Secret comes back through the watch
// and runs sync again, which injects the new bundle. settled is false when
// some target was missing, to look again sooner than the resync.
func (m *Manager) sync(ctx context.Context) (next time.Time, settled bool, err error) {
	cached, err := m.secrets.Get(m.opts.SecretName)
	if err != nil && !apierrors.IsNotFound(err) {
		return time.Time{}, false, err
	}
	var injectErr error
	settled = true
	if cached != nil && len(parseBundle(cached.Data[KeyCABundle])) > 0 {
		settled, injectErr = m.inject(ctx, cached)
	}
	next, err = m.syncSecret(ctx, cached)
	if m.metrics != nil {
		metricsNext, metricsErr := m.metrics.refresh(cached, m.opts.Clock.Now())
		if next.IsZero() || (!metricsNext.IsZero() && metricsNext.Before(next)) {
			next = metricsNext
		}
		err = errors.Join(err, metricsErr)
	}
	return next, settled, errors.Join(err, injectErr)
}

// syncSecret decides on the Secret and writes the outcome: created when
// absent, else updated with the resourceVersion read. When another replica
// wrote first (AlreadyExists, Conflict), it reads the Secret again and
// decides again, so the first writer's certificates are kept.
func (m *Manager) syncSecret(ctx context.Context, s *corev1.Secret) (time.Time, error) {
	client := m.kube.CoreV1().Secrets(m.opts.Namespace)
	ref := klog.KRef(m.opts.Namespace, m.opts.SecretName)
	for range maxWriteAttempts {
		p, err := m.policy.decide(storedIn(s), m.opts.Clock.Now(), m.trustedSince(s))
		if err != nil {
			return time.Time{}, err
		}
		if p.data == nil {
			return p.next, nil
		}
		var written *corev1.Secret
		if s == nil {
			written, err = client.Create(ctx, m.newSecret(p), metav1.CreateOptions{})
		} else {
			written, err = client.Update(ctx, withPlan(s, p), metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			kv := []any{"secret", ref, "reasons", p.reasons, "cas", len(parseBundle(written.Data[KeyCABundle]))}
			if pair, err := parsePair(written.Data[KeyServingCert], written.Data[KeyServingKey]); err == nil {
				kv = append(kv, "serial", pair.Leaf.SerialNumber.Text(16), "notAfter", pair.Leaf.NotAfter,
					"issuer", pair.Leaf.Issuer.CommonName)
			}
			klog.InfoS("Wrote the webhook certificates", kv...)
			return p.next, nil
		case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), apierrors.IsNotFound(err):
			klog.V(2).InfoS("The webhook certificate Secret changed under us; reading it again", "secret", ref, "err", err)
			if s, err = client.Get(ctx, m.opts.SecretName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				s = nil
			} else if err != nil {
				return time.Time{}, err
			}
		default:
			return time.Time{}, fmt.Errorf("writing Secret %s: %w", ref, err)
		}
	}
	return time.Time{}, fmt.Errorf("Secret %s kept changing under us (%d attempts)", ref, maxWriteAttempts)
}

func storedIn(s *corev1.Secret) stored {
	if s == nil {
		return stored{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationCAPublishedAt])
	return stored{data: s.Data, publishedAt: t}
}

func (m *Manager) trustedSince(s *corev1.Secret) time.Time {
	if s == nil || m.trust.bundle == nil || !bytes.Equal(m.trust.bundle, s.Data[KeyCABundle]) {
		return time.Time{}
	}
	return m.trust.since
}

// SecretLabels are the labels of the Secret the Manager makes: an
// uninstall deletes a Secret of that name only if it carries them, since a
// user's own (--webhook-cert-dir's source) may have the same name.
func SecretLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "handroll",
		"app.kubernetes.io/component": "webhook-certificates",
	}
}

func (m *Manager) newSecret(p plan) *corev1.Secret {
	return withPlan(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      m.opts.SecretName,
			Namespace: m.opts.Namespace,
			Labels:    SecretLabels(),
		},
		Type: corev1.SecretTypeTLS,
	}, p)
}

// withPlan returns a copy of s holding p's keys and annotation. Other keys,
// labels and annotations are kept.
func withPlan(s *corev1.Secret, p plan) *corev1.Secret {
	s = s.DeepCopy()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range p.data {
		s.Data[k] = v
	}
	if !p.publishedAt.IsZero() {
		metav1.SetMetaDataAnnotation(&s.ObjectMeta, AnnotationCAPublishedAt, p.publishedAt.UTC().Format(time.RFC3339Nano))
	}
	return s
}

// inject writes the bundle of s into every target. It records, for the
// decision, since when every target has held that bundle: from the end of
// the last pass that had to write one. A target that is missing (or a CRD
// without a conversion webhook) is not an error: nothing calls the webhook
// through it. settled is false then, to look again soon.
func (m *Manager) inject(ctx context.Context, s *corev1.Secret) (settled bool, err error) {
	if m.restored.Load() {
		return true, nil
	}
	in := injection{bundle: s.Data[KeyCABundle], url: m.opts.URL,
		records: records{now: m.opts.Clock.Now(), renew: m.opts.RecordRenewal}}
	if m.opts.URL == "" {
		in.records.stale = m.staleRecord
		in.service = m.opts.conversionService()
	}
	m.recordPending = false
	checked := false
	// Before the first write of a pass, make sure the cached Secret is the
	// stored one. Writes are rare (a new bundle, a re-applied manifest), so
	// the extra read is too.
	beforeWrite := func(ctx context.Context) error {
		if m.restored.Load() {
			return errRestored // checked before every write, retries too
		}
		if checked {
			return nil
		}
		live, err := m.kube.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if live.ResourceVersion != s.ResourceVersion {
			return errStaleSecret
		}
		checked = true
		return nil
	}
	var errs []error
	settled, wrote := true, false
	for _, t := range m.targets() {
		got, err := t.sync(ctx, in, beforeWrite)
		m.report(t, got, err)
		switch {
		case errors.Is(err, errRestored):
			return true, nil
		case errors.Is(err, errStaleSecret):
			m.trust = trust{}
			return false, nil // the watch brings the new Secret and another sync
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
		case got == updated:
			wrote = true
		case got == absent, got == notWebhook:
			settled = false
		}
	}
	switch {
	case len(errs) > 0:
		m.trust = trust{}
	case wrote || !bytes.Equal(m.trust.bundle, in.bundle):
		m.trust = trust{bundle: bytes.Clone(in.bundle), since: m.opts.Clock.Now()}
	}
	return settled, errors.Join(errs...)
}

// report logs a target's state when it changes, so that a missing target
// is logged once, not at every retry. Errors are logged by processNext.
func (m *Manager) report(t target, got outcome, err error) {
	if err != nil {
		delete(m.reports, t.String())
		return
	}
	key, state := t.String(), string(got)
	if got == updated {
		klog.InfoS("Injected the CA bundle", "kind", t.kind, "name", t.name, "url", m.opts.URL)
		state = string(current)
	} else if m.reports[key] != state {
		switch got {
		case absent:
			klog.InfoS("Not found; injecting the CA bundle once it exists", "kind", t.kind, "name", t.name)
		case notWebhook:
			klog.InfoS("The CRD's conversion strategy is not Webhook; injecting the CA bundle once it is", "name", t.name)
		case current:
			klog.V(2).InfoS("Holds the CA bundle", "kind", t.kind, "name", t.name)
		}
	}
	m.reports[key] = state
}

// load makes the Secret's pair the one served, if it loads. A pair that
// does not load is logged once and the previous one kept: the next sync
// writes a good one.
func (m *Manager) load(s *corev1.Secret) {
	pair, err := parsePair(s.Data[KeyServingCert], s.Data[KeyServingKey])
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	if err != nil {
		if m.loadErr == nil || m.loadErr.Error() != err.Error() {
			klog.ErrorS(err, "The webhook certificate Secret holds no usable serving certificate; keeping the previous one",
				"secret", klog.KObj(s))
		}
		m.loadErr = err
		return
	}
	m.loadErr = nil
	ca := server.IssuerOf(pair.Leaf, parseBundle(s.Data[KeyCABundle]))
	old := m.served.Load()
	if old != nil && bytes.Equal(old.cert.Leaf.Raw, pair.Leaf.Raw) {
		// The same certificate; its CA may have entered the bundle since.
		if !sameCert(old.ca, ca) {
			m.served.Store(&servedPair{cert: old.cert, ca: ca})
		}
		return
	}
	m.served.Store(&servedPair{cert: pair, ca: ca})
	klog.InfoS("Serving a new webhook certificate", "secret", klog.KObj(s),
		"serial", pair.Leaf.SerialNumber.Text(16), "notAfter", pair.Leaf.NotAfter,
		"issuer", pair.Leaf.Issuer.CommonName, "names", strings.Join(certNames(pair.Leaf), ","))
}

func sameCert(a, b *x509.Certificate) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// GetCertificate is tls.Config.GetCertificate (server.CertificateSource): it
// returns the certificate loaded last, from memory.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if p := m.served.Load(); p != nil {
		return p.cert, nil
	}
	return nil, errors.New("no webhook serving certificate loaded yet")
}

// ServedChain (server.ServedChain) is the certificate served now and the
// CA that issued it, for the expiry metric; nil before the first load.
func (m *Manager) ServedChain() (serving, ca *x509.Certificate) {
	if p := m.served.Load(); p != nil {
		return p.cert.Leaf, p.ca
	}
	return nil, nil
}

// Ready fails until a serving certificate is loaded, and when the one
// loaded has expired.
func (m *Manager) Ready() error {
	p := m.served.Load()
	if p == nil {
		m.loadMu.Lock()
		defer m.loadMu.Unlock()
		if m.loadErr != nil {
			return fmt.Errorf("no webhook serving certificate: %w", m.loadErr)
		}
		return fmt.Errorf("no webhook serving certificate yet (Secret %s/%s)", m.opts.Namespace, m.opts.SecretName)
	}
	if leaf := p.cert.Leaf; expired(leaf, m.opts.Clock.Now()) {
		return fmt.Errorf("webhook serving certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// ReadyCheck is Ready as a check for Health.AddReadinessCheck.
func (m *Manager) ReadyCheck() server.Check {
	return server.Check{Name: "webhook-certificate", Check: func(*http.Request) error { return m.Ready() }}
}
