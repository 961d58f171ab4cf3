package certs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOptionsDefaults(t *testing.T) {
	o, err := Options{Namespace: "handroll-system", ServiceName: "handroll-webhook"}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if o.SecretName != DefaultSecretName || o.Validity != DefaultValidity ||
		o.PropagationDelay != DefaultPropagationDelay || o.ResyncPeriod != DefaultResyncPeriod || o.Clock == nil ||
		o.ServicePort != 443 || o.ConversionPath != "/convert" {
		t.Errorf("defaults not filled in: %+v", o)
	}
	if diff := cmp.Diff([]string{"handroll"}, o.WebhookConfigurations); diff != "" {
		t.Errorf("WebhookConfigurations: %s", diff)
	}
	if diff := cmp.Diff([]string{"webapps.handroll.dev"}, o.CRDs); diff != "" {
		t.Errorf("CRDs: %s", diff)
	}

	// Empty, not nil: inject into nothing.
	o, err = Options{Namespace: "ns", ServiceName: "svc", WebhookConfigurations: []string{}, CRDs: []string{}}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if len(o.WebhookConfigurations) != 0 || len(o.CRDs) != 0 {
		t.Errorf("empty lists were defaulted: %v %v", o.WebhookConfigurations, o.CRDs)
	}
}

func TestOptionsErrors(t *testing.T) {
	cases := map[string]struct {
		opts Options
		want string
	}{
		"no namespace":          {Options{ServiceName: "svc"}, "Namespace is required"},
		"no name to serve":      {Options{Namespace: "ns"}, "ServiceName or URL"},
		"http":                  {Options{Namespace: "ns", URL: "http://127.0.0.1:9443"}, "https only"},
		"a path":                {Options{Namespace: "ns", URL: "https://127.0.0.1:9443/hooks"}, "host[:port]"},
		"no host":               {Options{Namespace: "ns", URL: "https://:9443"}, "no host"},
		"delay too long":        {Options{Namespace: "ns", ServiceName: "svc", Validity: 30 * time.Second}, "under a third of Validity"},
		"negative":              {Options{Namespace: "ns", ServiceName: "svc", ResyncPeriod: -time.Second}, "negative"},
		"bad webhook name":      {Options{Namespace: "ns", ServiceName: "svc", WebhookConfigurations: []string{"Bad_Name"}}, "WebhookConfigurations"},
		"bad service name":      {Options{Namespace: "ns", ServiceName: "svc.x"}, "ServiceName"},
		"bad secret name":       {Options{Namespace: "ns", ServiceName: "svc", SecretName: "-x"}, "SecretName"},
		"bad CRD name":          {Options{Namespace: "ns", ServiceName: "svc", CRDs: []string{""}}, "CRDs"},
		"bad namespace":         {Options{Namespace: "Ns", ServiceName: "svc"}, "Namespace"},
		"bad service port":      {Options{Namespace: "ns", ServiceName: "svc", ServicePort: -1}, "ServicePort"},
		"relative path":         {Options{Namespace: "ns", ServiceName: "svc", ConversionPath: "convert"}, "ConversionPath"},
		"path with a query":     {Options{Namespace: "ns", ServiceName: "svc", ConversionPath: "/convert?x=1"}, "ConversionPath"},
		"several errors joined": {Options{URL: "ftp://x"}, "https only"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := tc.opts.complete()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// A trailing slash is accepted and dropped, so paths join cleanly.
	o, err := Options{Namespace: "ns", URL: "https://127.0.0.1:9443/"}.complete()
	if err != nil || o.URL != "https://127.0.0.1:9443" {
		t.Errorf("URL %q, %v", o.URL, err)
	}
}

func TestNames(t *testing.T) {
	names := func(o Options) []string {
		s := o.names()
		out := append([]string(nil), s.dns...)
		for _, ip := range s.ips {
			out = append(out, "ip:"+ip.String())
		}
		return out
	}
	for _, tc := range []struct {
		opts Options
		want []string
	}{
		{Options{Namespace: "ns", ServiceName: "svc"}, []string{"svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"}},
		{Options{Namespace: "ns", URL: "https://127.0.0.1:9443"}, []string{"ip:127.0.0.1"}},
		{Options{Namespace: "ns", URL: "https://[::1]:9443"}, []string{"ip:::1"}},
		{Options{Namespace: "ns", ServiceName: "svc", URL: "https://dev.example:9443"},
			[]string{"svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local", "dev.example"}},
		{Options{Namespace: "ns", ServiceName: "svc", URL: "https://svc.ns.svc:9443"},
			[]string{"svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"}},
	} {
		if diff := cmp.Diff(tc.want, names(tc.opts)); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.opts, diff)
		}
	}
}
