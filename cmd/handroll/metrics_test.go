package main

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/handroll/handroll/pkg/server"
)

// A --metrics-cert-dir that cannot be used is refused, naming the flags,
// rather than quietly serving plain HTTP or the self-signed certificate.
func TestMetricsCertDirNeedsSecureMetrics(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"no directory", options{metricsAddr: ":8443"}, ""},
		{"secure, no directory", options{metricsAddr: ":8443", metricsSecure: true}, ""},
		{"secure with a directory", options{metricsAddr: ":8443", metricsSecure: true, metricsCertDir: "/certs"}, ""},
		{"a directory without --metrics-secure", options{metricsAddr: ":8443", metricsCertDir: "/certs"}, "--metrics-cert-dir needs --metrics-secure"},
		{"a directory, metrics off", options{metricsAddr: "0", metricsSecure: true, metricsCertDir: "/certs"}, "--metrics-bind-address is 0"},
	} {
		err := validateMetricsFlags(tc.o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// --metrics-ca-configmap, and --metrics-service-name, are refused, naming
// the flag, wherever there is no self-managed CA to publish or no
// certificate of it to serve.
func TestMetricsCAConfigMapNeedsTheSelfManagedCA(t *testing.T) {
	ok := options{metricsAddr: ":8443", metricsSecure: true, webhookPort: 9443, metricsCA: metricsCAOptions{configMap: "handroll-ca"}}
	with := func(change func(*options)) options {
		o := ok
		change(&o)
		return o
	}
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"self-managed, secure", ok, ""},
		{"with a Service name", with(func(o *options) { o.metricsCA.serviceName, o.metricsCA.serviceNameSet = "metrics", true }), ""},
		{"neither", options{metricsAddr: ":8443", metricsSecure: true}, ""},
		{"a Service name alone", options{metricsAddr: ":8443", metricsSecure: true, metricsCA: metricsCAOptions{serviceName: "m", serviceNameSet: true}},
			"--metrics-service-name needs --metrics-ca-configmap"},
		{"plain HTTP", with(func(o *options) { o.metricsSecure = false }), "--metrics-ca-configmap needs --metrics-secure"},
		{"metrics off", with(func(o *options) { o.metricsAddr = "0" }), "--metrics-bind-address is 0"},
		{"certificate files", with(func(o *options) { o.metricsCertDir = "/certs" }), "--metrics-ca-configmap and --metrics-cert-dir"},
		{"webhook files", with(func(o *options) { o.webhookCertDir = "/certs" }), "--webhook-cert-dir turns off"},
		{"webhooks off", with(func(o *options) { o.webhookPort = 0 }), "--webhook-port=0"},
	} {
		err := validateMetricsFlags(tc.o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// A directory without a loadable pair fails the start with the flag's name,
// as --webhook-cert-dir does.
func TestMetricsCertDirMustHoldAPair(t *testing.T) {
	_, _, _, err := metricsHandler(&rest.Config{Host: "https://127.0.0.1:1"}, server.NewRegistry(), true, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "--metrics-cert-dir") || !strings.Contains(err.Error(), "tls.crt") {
		t.Errorf("an empty --metrics-cert-dir: got %v, want an error naming the flag and tls.crt", err)
	}
}
