package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// WithAuthenticationAndAuthorization guards h as the API server guards its
// own endpoints, and as controller-runtime's
// filters.WithAuthenticationAndAuthorization guards /metrics: the bearer
// token must pass a TokenReview (401 otherwise), and a SubjectAccessReview
// must allow its user to "get" the request's path as a non-resource URL
// (403 otherwise). Decisions are cached for ttl so that a scrape every few
// seconds does not cost two API requests each. The two reviews together
// take at most ReviewTimeout; past it the scrape gets a 500.
//
// client should have a rate limiter of its own: sharing the controllers',
// the reviews would queue behind the reconciles exactly when the metrics
// matter most, under load.
func WithAuthenticationAndAuthorization(client kubernetes.Interface, ttl time.Duration, h http.Handler) http.Handler {
	a := &authorizer{client: client, ttl: ttl, cache: map[string]decision{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		code, msg := a.decide(r.Context(), strings.TrimSpace(token), r.Method, r.URL.Path)
		if code != http.StatusOK {
			http.Error(w, msg, code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type decision struct {
	code    int
	msg     string
	expires time.Time
}

type authorizer struct {
	client kubernetes.Interface
	ttl    time.Duration

	mu    sync.Mutex
	cache map[string]decision // token + verb + path → decision
}

func (a *authorizer) decide(ctx context.Context, token, method, path string) (int, string) {
	verb := strings.ToLower(method)
	if method == http.MethodHead {
		verb = "get"
	}
	key := token + "\x00" + verb + "\x00" + path
	a.mu.Lock()
	if d, ok := a.cache[key]; ok && time.Now().Before(d.expires) {
		a.mu.Unlock()
		return d.code, d.msg
	}
	a.mu.Unlock()

	code, msg, cacheable := a.review(ctx, token, verb, path)
	if cacheable {
		a.mu.Lock()
		if len(a.cache) > 1024 { // bounded: a flood of tokens cannot grow it
			a.cache = map[string]decision{}
		}
		a.cache[key] = decision{code: code, msg: msg, expires: time.Now().Add(a.ttl)}
		a.mu.Unlock()
	}
	return code, msg
}

// ReviewTimeout bounds the TokenReview and SubjectAccessReview of one
// scrape, well within a Prometheus scrape timeout (10 s by default).
const ReviewTimeout = 5 * time.Second

// review asks the API server; a failure to ask is a 500 and is not cached.
func (a *authorizer) review(ctx context.Context, token, verb, path string) (int, string, bool) {
	ctx, cancel := context.WithTimeout(ctx, ReviewTimeout)
	defer cancel()
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		klog.ErrorS(err, "TokenReview failed")
		return http.StatusInternalServerError, "Internal Server Error: could not review the token", false
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "Unauthorized", true
	}
	user := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		klog.ErrorS(err, "SubjectAccessReview failed")
		return http.StatusInternalServerError, "Internal Server Error: could not authorize the request", false
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Sprintf("Forbidden: user %q may not %s %s", user.Username, verb, path), true
	}
	return http.StatusOK, "", true
}

// SelfSignedTLS returns a TLS configuration with a fresh self-signed
// certificate for the loopback addresses and host names given, for
// --metrics-secure without a certificate of one's own (controller-runtime
// does the same). Scrapers then skip verification or pin the certificate.
func SelfSignedTLS(hosts ...string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "handroll-metrics"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     append([]string{"localhost"}, hosts...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
	}, nil
}
