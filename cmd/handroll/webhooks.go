package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/admission"
	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/server"
)

// ConversionPath is where the conversion webhook is served; the CRD's
// spec.conversion.webhook.clientConfig names it.
const ConversionPath = certs.DefaultConversionPath

// webhookCertOptions are the flags of the self-managed certificates.
type webhookCertOptions struct {
	secretName        string
	serviceName       string
	servicePort       int
	configurationName string
	conversionCRD     string
	validity          time.Duration
}

// validateWebhookURL checks --webhook-url with pkg/certs' own check, which
// the certificate manager applies to it again: one rule, so a URL the flag
// accepts is never refused later.
func validateWebhookURL(raw string) error {
	if err := certs.ValidateURL(raw); err != nil {
		return fmt.Errorf("--webhook-url: %w", err)
	}
	return nil
}

// metricsCAOptions are the flags of the metrics certificate signed by the
// self-managed CA.
type metricsCAOptions struct {
	configMap   string
	serviceName string
	// serviceNameSet: --metrics-service-name was given.
	serviceNameSet bool
}

// webhookParts are what webhookServer builds.
type webhookParts struct {
	srv *server.Server
	// start keeps the certificates current; it must run for as long as
	// the server does.
	start func(context.Context)
	// restore, set with --webhook-url, points the cluster's clientConfigs
	// back at what they called before; it runs when the process stops,
	// before the server does.
	restore func(context.Context)
	// metricsCert serves the metrics certificate the self-managed CA
	// signs; nil without --metrics-ca-configmap.
	metricsCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// webhookServer builds the WebhookServer (controller-runtime's
// webhook.Server plus its conversion registry) on every replica: admission
// and conversion handlers, and the certificate source with its readiness
// check. The webhook metrics (as controller-runtime's) and the
// certificates' expiry go into reg.
func webhookServer(cfg *rest.Config, kube kubernetes.Interface, s *runtime.Scheme, o options, health *server.Health, reg prometheus.Registerer) (w webhookParts, err error) {
	if err := validateWebhookURL(o.webhookURL); err != nil {
		return w, err
	}
	if err := certs.ValidateServicePort(o.webhookCerts.servicePort); err != nil {
		return w, fmt.Errorf("--webhook-service-port: %w", err)
	}
	// Both sources also give the expiry metric its certificates.
	var source interface {
		server.CertificateSource
		server.ServedChain
	}
	if o.webhookCertDir != "" {
		if o.webhookURL != "" {
			// Whoever mounts the certificate (cert-manager's cainjector)
			// also owns the webhook configurations' clientConfig.
			return w, errors.New("--webhook-url needs the self-managed certificates: leave --webhook-cert-dir empty")
		}
		cw, err := server.NewCertWatcher(o.webhookCertDir, server.CertWatcherOptions{})
		if err != nil {
			return w, fmt.Errorf("--webhook-cert-dir: %w", err)
		}
		health.AddReadinessCheck(cw.ReadyCheck())
		source = cw
		w.start = func(ctx context.Context) {
			if err := cw.Start(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Webhook certificate watcher stopped")
			}
		}
	} else {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return w, err
		}
		opts := certs.Options{
			Namespace:   o.operatorNamespace,
			SecretName:  o.webhookCerts.secretName,
			ServiceName: o.webhookCerts.serviceName,
			// What the conversion of --conversion-crd calls: the
			// chart's CRD and manifests/crd say the same.
			ServicePort:    int32(o.webhookCerts.servicePort), //nolint:gosec // checked above
			ConversionPath: ConversionPath,
			URL:            o.webhookURL,
			Validity:       o.webhookCerts.validity,
			CAConfigMap:    o.metricsCA.configMap,
		}
		if o.metricsCA.configMap != "" {
			opts.MetricsServiceName = o.metricsCA.serviceName
		}
		// Empty flags mean "inject into none", which Options spells as an
		// empty, non-nil list.
		opts.WebhookConfigurations = nonEmpty(o.webhookCerts.configurationName)
		opts.CRDs = nonEmpty(o.webhookCerts.conversionCRD)
		m, err := certs.New(kube, dyn, opts)
		if err != nil {
			return w, err
		}
		health.AddReadinessCheck(m.ReadyCheck())
		source = m
		if opts.MetricsServiceName != "" {
			w.metricsCert = m.GetMetricsCertificate
		}
		w.start = func(ctx context.Context) {
			if err := m.Start(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Webhook certificate manager stopped")
			}
		}
		if o.webhookURL != "" {
			w.restore = func(ctx context.Context) {
				if err := m.RestoreClientConfigs(ctx); err != nil {
					klog.ErrorS(err, "Could not point the webhook configurations and the CRD back at what they called before --webhook-url",
						"annotation", certs.AnnotationReplacedClientConfigs)
				}
			}
		}
	}
	srv := server.NewWebhookServer(net.JoinHostPort("", fmt.Sprint(o.webhookPort)), source)
	admission.Register(srv.Webhooks(), s)
	srv.Webhooks().Handle(ConversionPath, server.ServeConversion(s))
	if err := errors.Join(srv.Webhooks().RegisterMetrics(reg), reg.Register(server.NewCertificateExpiryCollector(source))); err != nil {
		return w, fmt.Errorf("webhook metrics: %w", err)
	}
	klog.V(2).InfoS("Webhooks", "port", o.webhookPort, "paths", srv.Webhooks().Paths(), "url", o.webhookURL)
	w.srv = srv
	return w, nil
}

func nonEmpty(name string) []string {
	if name == "" {
		return []string{}
	}
	return []string{name}
}
