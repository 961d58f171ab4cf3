package certs

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultSecretName       = "handroll-webhook-tls"
	DefaultValidity         = 90 * 24 * time.Hour
	DefaultPropagationDelay = 10 * time.Second
	DefaultResyncPeriod     = 5 * time.Minute
	DefaultRecordRenewal    = time.Minute

	// DefaultWebhookConfiguration names both the mutating and the
	// validating webhook configuration of manifests/webhook.
	DefaultWebhookConfiguration = "handroll"
	// DefaultCRD is the CRD whose conversion webhook handroll serves.
	DefaultCRD = "webapps.handroll.dev"
	// DefaultServicePort is the webhook Service's port in manifests/webhook
	// and the chart.
	DefaultServicePort = 443
	// DefaultConversionPath is where handroll serves the conversion webhook.
	DefaultConversionPath = "/convert"
)

// caLifetimes is how many serving lifetimes a CA lives. A CA is replaced
// after two thirds of its life, so an old CA stays trusted for more than a
// serving lifetime after the last certificate it signed; and the bundle
// changes (the step that has to propagate) four times less often than the
// serving certificate.
const caLifetimes = 4

// Options configure a Manager. Zero values take the defaults above.
type Options struct {
	// Namespace is the operator's namespace, where the Secret lives.
	// Required.
	Namespace string
	// SecretName names the kubernetes.io/tls Secret that holds the serving
	// certificate and the CAs. Every replica shares it.
	SecretName string
	// ServiceName is the webhook Service. The serving certificate holds
	// <svc>, <svc>.<ns>, <svc>.<ns>.svc and <svc>.<ns>.svc.cluster.local.
	// Required unless URL is set. Without URL, every CRD's conversion is
	// pointed at it: service ServiceName in Namespace, at ServicePort and
	// ConversionPath.
	ServiceName string
	// ServicePort is the Service's port that leads to the webhook server.
	ServicePort int32
	// ConversionPath is the path at which the conversion webhook is served.
	ConversionPath string
	// URL, when set, is where the API server calls the webhooks instead of
	// the Service (an operator running outside the cluster):
	// https://host[:port], no path. Its host becomes a SAN (an IP address
	// or a DNS name), and every injected clientConfig gets url URL+path in
	// place of its service.
	URL string
	// Validity is the serving certificate's lifetime. A CA lives four times
	// as long.
	Validity time.Duration

	// WebhookConfigurations names the MutatingWebhookConfiguration and
	// ValidatingWebhookConfiguration objects to inject the CA bundle into;
	// each name is looked up as both kinds. nil means
	// [DefaultWebhookConfiguration]; an empty, non-nil slice means none.
	WebhookConfigurations []string
	// CRDs names the CustomResourceDefinitions whose conversion webhook
	// gets the CA bundle. nil means [DefaultCRD]; empty, non-nil means none.
	CRDs []string
	// CAConfigMap, when set, names a ConfigMap in Namespace that gets the
	// CA bundle under KeyCABundle, as the webhook configurations do: the
	// CAs without ca.key, for clients that cannot be given the Secret, such
	// as a Prometheus verifying the metrics server. It is a target like
	// them, so a new CA signs nothing until the ConfigMap holds it too.
	CAConfigMap string
	// MetricsServiceName, when set, has the Manager serve a second
	// certificate (GetMetricsCertificate) for that Service's DNS names in
	// Namespace, signed by the same CA as the webhook's; each replica
	// issues its own, in memory.
	MetricsServiceName string

	// PropagationDelay is how long a new CA must have been in every
	// injected bundle before it signs the serving certificate: the time the
	// API servers take to see the changed webhook configurations and CRDs.
	// It must be under a third of Validity.
	PropagationDelay time.Duration
	// ResyncPeriod is how often the injected objects are checked even when
	// nothing changed, so that a re-applied manifest that reset a caBundle
	// is mended.
	ResyncPeriod time.Duration
	// RecordRenewal is how often a manager with a URL renews the record of
	// the clientConfigs it replaced (AnnotationReplacedClientConfigs). A
	// manager without one restores them once a record has gone unrenewed
	// for StaleRecordRenewals renewals by its own clock: a run at a URL
	// that was killed, or lost its machine, cannot leave the cluster
	// calling an address that no longer answers.
	RecordRenewal time.Duration
	// Clock is for tests; nil is the real clock.
	Clock clock.WithTicker
}

// StaleRecordRenewals is how many missed renewals make a record stale.
const StaleRecordRenewals = 4

// complete returns o with defaults filled in, or an error naming the first
// option that is wrong.
func (o Options) complete() (Options, error) {
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.Validity == 0 {
		o.Validity = DefaultValidity
	}
	if o.PropagationDelay == 0 {
		o.PropagationDelay = DefaultPropagationDelay
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	if o.RecordRenewal == 0 {
		o.RecordRenewal = DefaultRecordRenewal
	}
	if o.WebhookConfigurations == nil {
		o.WebhookConfigurations = []string{DefaultWebhookConfiguration}
	}
	if o.CRDs == nil {
		o.CRDs = []string{DefaultCRD}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.ServicePort == 0 {
		o.ServicePort = DefaultServicePort
	}
	if o.ConversionPath == "" {
		o.ConversionPath = DefaultConversionPath
	}
	urlErr := ValidateURL(o.URL)
	o.URL = strings.TrimSuffix(o.URL, "/")

	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("Namespace is required"))
	} else if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("Namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(o.SecretName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("SecretName %q: %s", o.SecretName, strings.Join(msgs, "; ")))
	}
	if o.ServiceName == "" && o.URL == "" {
		errs = append(errs, errors.New("ServiceName or URL is required: the serving certificate needs a name to be called by"))
	}
	if o.ServiceName != "" {
		if msgs := validation.IsDNS1035Label(o.ServiceName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("ServiceName %q: %s", o.ServiceName, strings.Join(msgs, "; ")))
		}
	}
	if o.MetricsServiceName != "" {
		if msgs := validation.IsDNS1035Label(o.MetricsServiceName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("MetricsServiceName %q: %s", o.MetricsServiceName, strings.Join(msgs, "; ")))
		}
	}
	if o.CAConfigMap != "" {
		if msgs := validation.IsDNS1123Subdomain(o.CAConfigMap); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("CAConfigMap %q: %s", o.CAConfigMap, strings.Join(msgs, "; ")))
		}
	}
	if urlErr != nil {
		errs = append(errs, urlErr)
	}
	if err := ValidateServicePort(int(o.ServicePort)); err != nil {
		errs = append(errs, fmt.Errorf("ServicePort: %w", err))
	}
	if u, err := url.Parse(o.ConversionPath); err != nil || !strings.HasPrefix(o.ConversionPath, "/") || u.Path != o.ConversionPath {
		errs = append(errs, fmt.Errorf("ConversionPath %q: give an absolute path, no query or fragment", o.ConversionPath))
	}
	if o.Validity < 0 || o.PropagationDelay < 0 || o.ResyncPeriod < 0 || o.RecordRenewal < 0 {
		errs = append(errs, errors.New("Validity, PropagationDelay, ResyncPeriod and RecordRenewal cannot be negative"))
	} else if 3*o.PropagationDelay >= o.Validity {
		// A serving certificate is renewed with a third of its life left;
		// the switch to a new CA waits PropagationDelay, and the old
		// certificate must still be valid when it ends.
		errs = append(errs, fmt.Errorf("PropagationDelay %v must be under a third of Validity %v", o.PropagationDelay, o.Validity))
	}
	for _, n := range o.WebhookConfigurations {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("WebhookConfigurations: %q: %s", n, strings.Join(msgs, "; ")))
		}
	}
	for _, n := range o.CRDs {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("CRDs: %q: %s", n, strings.Join(msgs, "; ")))
		}
	}
	return o, errors.Join(errs...)
}

// ValidateURL checks a URL at which the API server is to call the webhooks
// (Options.URL, handroll's --webhook-url): https://host[:port], with at
// most a trailing slash, because each webhook's path is appended. Empty is
// valid: the webhooks are called through the Service.
func ValidateURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("URL %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("URL %q: the API server calls webhooks over https only", raw)
	case u.Hostname() == "":
		return fmt.Errorf("URL %q has no host", raw)
	case (u.Path != "" && u.Path != "/") || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || strings.HasSuffix(raw, "#") || u.User != nil || u.Opaque != "":
		return fmt.Errorf("URL %q: give only https://host[:port]; each webhook's path is appended", raw)
	}
	return nil
}

// ValidateServicePort checks the webhook Service's port (Options.ServicePort,
// handroll's --webhook-service-port): a Service's port is 1 to 65535.
func ValidateServicePort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%d is not a Service port: give 1 to 65535", port)
	}
	return nil
}

// conversionService is the service reference of every CRD's conversion
// without a URL, as it reads in JSON: the chart's CRD and manifests/crd
// (with its namespace) say the same, so a re-apply changes nothing.
func (o Options) conversionService() map[string]any {
	return map[string]any{
		"namespace": o.Namespace,
		"name":      o.ServiceName,
		"path":      o.ConversionPath,
		"port":      int64(o.ServicePort),
	}
}

// names are the SANs the options ask for: the Service's DNS names and the
// URL's host.
func (o Options) names() sans {
	s := serviceNames(o.ServiceName, o.Namespace)
	if o.URL != "" {
		u, _ := url.Parse(o.URL) // checked by complete
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			s.ips = append(s.ips, ip)
		} else if !slices.Contains(s.dns, u.Hostname()) {
			s.dns = append(s.dns, u.Hostname())
		}
	}
	return s
}

// serviceNames are the DNS names of Service svc in namespace ns, short to
// fully qualified; none without a Service.
func serviceNames(svc, ns string) sans {
	if svc == "" {
		return sans{}
	}
	return sans{dns: []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}}
}
