package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Defaults of the CertWatcher: the key names of a kubernetes.io/tls Secret
// (and of cert-manager's Certificates) mounted as a volume.
const (
	DefaultCertName          = "tls.crt"
	DefaultKeyName           = "tls.key"
	DefaultCertCheckInterval = time.Second
)

// CertWatcherOptions name the files in the certificate directory and say how
// often to look at them. Zero values take the defaults above.
type CertWatcherOptions struct {
	CertName string
	KeyName  string
	Interval time.Duration
}

// CertWatcher serves a certificate and key pair read from a directory and
// picks up a new pair without a restart. It replaces controller-runtime's
// certwatcher.CertWatcher.
//
// controller-runtime watches with fsnotify and polls as a fallback; handroll
// only polls. A mounted Secret is updated by the kubelet through a symlink
// swap, which file watches often miss, and reading two small files and
// hashing them once a second costs next to nothing. A change is detected by
// content, not mtime, because the swap can keep mtimes or go back in time.
//
// A new pair that does not load (a half-written file, a key that does not
// match the certificate) is logged and ignored: the previous certificate
// keeps being served, and the pair is tried again as soon as either file
// changes.
type CertWatcher struct {
	certFile, keyFile string
	interval          time.Duration

	mu       sync.RWMutex
	cert     *tls.Certificate
	ca       *x509.Certificate // cert's issuer, when the file's chain holds it
	seen     [sha256.Size]byte // hash of the files last tried, loaded or not
	lastErr  error             // why the files last tried did not load
	loadedAt time.Time
}

// NewCertWatcher reads the pair from dir now: a webhook server without a
// certificate cannot serve, so a missing or invalid pair at start is an error
// rather than something to wait for.
func NewCertWatcher(dir string, opts CertWatcherOptions) (*CertWatcher, error) {
	if opts.CertName == "" {
		opts.CertName = DefaultCertName
	}
	if opts.KeyName == "" {
		opts.KeyName = DefaultKeyName
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultCertCheckInterval
	}
	cw := &CertWatcher{
		certFile: filepath.Join(dir, opts.CertName),
		keyFile:  filepath.Join(dir, opts.KeyName),
		interval: opts.Interval,
	}
	if _, err := cw.reload(); err != nil {
		return nil, err
	}
	return cw, nil
}

// GetCertificate is tls.Config.GetCertificate: every handshake gets the
// certificate loaded last.
func (cw *CertWatcher) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cw.mu.RLock()
	defer cw.mu.RUnlock()
	if cw.cert == nil {
		return nil, errors.New("no serving certificate loaded")
	}
	return cw.cert, nil
}

// Start polls the files every interval until ctx is done. It returns nil:
// a failure to read or load is logged and retried, never fatal, because the
// loaded certificate stays valid meanwhile.
func (cw *CertWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(cw.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if changed, err := cw.reload(); err != nil {
				klog.ErrorS(err, "Keeping the previous serving certificate", "cert", cw.certFile, "key", cw.keyFile)
			} else if changed {
				klog.InfoS("Loaded a new serving certificate", "cert", cw.certFile, "notAfter", cw.notAfter())
			}
		}
	}
}

// reload reads both files and, when their content differs from the last
// attempt, loads them. It reports whether a new certificate is now served.
// An error for content already tried is not repeated, so that a bad pair
// is logged once, not every interval.
func (cw *CertWatcher) reload() (bool, error) {
	certPEM, err := os.ReadFile(cw.certFile)
	if err != nil {
		return false, cw.fail(fmt.Errorf("reading certificate: %w", err))
	}
	keyPEM, err := os.ReadFile(cw.keyFile)
	if err != nil {
		return false, cw.fail(fmt.Errorf("reading key: %w", err))
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", len(certPEM)) // length prefix: no two pairs hash alike by shifting bytes between files
	h.Write(certPEM)
	h.Write(keyPEM)
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))

	cw.mu.RLock()
	same := sum == cw.seen
	cw.mu.RUnlock()
	if same {
		return false, nil
	}

	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.seen = sum
	if err != nil {
		cw.lastErr = fmt.Errorf("loading %s and %s: %w", cw.certFile, cw.keyFile, err)
		return false, cw.lastErr
	}
	cw.cert, cw.ca, cw.lastErr, cw.loadedAt = &pair, chainIssuer(&pair), nil, time.Now()
	return true, nil
}

// chainIssuer finds the leaf's issuer among the certificates that follow it
// in the file (cert-manager writes the chain there when its issuer gives
// one). Without a chain it is not known: the watcher reads only the pair,
// and a ca.crt beside it is the API server's business.
func chainIssuer(pair *tls.Certificate) *x509.Certificate {
	if pair.Leaf == nil || len(pair.Certificate) < 2 {
		return nil
	}
	var chain []*x509.Certificate
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			chain = append(chain, c)
		}
	}
	return IssuerOf(pair.Leaf, chain)
}

// ServedChain is the serving certificate loaded last and its issuer from
// the file's chain (nil without one), for the expiry metric.
func (cw *CertWatcher) ServedChain() (serving, ca *x509.Certificate) {
	cw.mu.RLock()
	defer cw.mu.RUnlock()
	if cw.cert == nil {
		return nil, nil
	}
	return cw.cert.Leaf, cw.ca
}

// fail records a read error. Reading fails transiently while a volume is
// being updated, so it is returned (and logged by Start) but the content hash
// is left alone: the next poll tries again.
func (cw *CertWatcher) fail(err error) error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.lastErr = err
	return err
}

func (cw *CertWatcher) notAfter() time.Time {
	cw.mu.RLock()
	defer cw.mu.RUnlock()
	if cw.cert == nil || cw.cert.Leaf == nil {
		return time.Time{}
	}
	return cw.cert.Leaf.NotAfter
}

// Ready fails when no certificate is loaded or the one served has expired.
// A bad replacement on disk does not fail it: the previous certificate is
// still served, and taking the pod out of the webhook Service would turn a
// problem with the next certificate into an outage now.
func (cw *CertWatcher) Ready() error {
	cw.mu.RLock()
	defer cw.mu.RUnlock()
	if cw.cert == nil {
		if cw.lastErr != nil {
			return fmt.Errorf("no serving certificate: %w", cw.lastErr)
		}
		return errors.New("no serving certificate")
	}
	if leaf := cw.cert.Leaf; leaf != nil && time.Now().After(leaf.NotAfter) {
		return fmt.Errorf("serving certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// ReadyCheck is Ready as a named check for Health.AddReadinessCheck.
func (cw *CertWatcher) ReadyCheck() Check {
	return Check{Name: "webhook-certificate", Check: func(*http.Request) error { return cw.Ready() }}
}
