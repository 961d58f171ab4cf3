package main

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/handroll/handroll/pkg/certs"
)

func TestValidateWebhookURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", ""},
		{"https://127.0.0.1:9443", ""},
		{"https://host.example:9443/", ""},
		{"http://127.0.0.1:9443", "https only"},
		{"https://", "no host"},
		{"https://127.0.0.1:9443/webhooks", "each webhook's path is appended"},
		{"https://127.0.0.1:9443?x=1", "each webhook's path is appended"},
		{"https://user@127.0.0.1:9443", "each webhook's path is appended"},
		{"https://[::1", "--webhook-url"},
	} {
		err := validateWebhookURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want an error containing %q", tc.url, err, tc.want)
		}
	}
}

// The flag check and pkg/certs, which gets the URL next, accept the same
// URLs: a --webhook-url that passes the flag check never fails later.
func TestWebhookURLCheckedOnce(t *testing.T) {
	for _, raw := range []string{
		"https://127.0.0.1:9443",
		"https://127.0.0.1:9443/",
		"https://127.0.0.1:9443/?",
		"https://127.0.0.1:9443/#",
		"https://127.0.0.1:9443//",
		"https://127.0.0.1:9443/hooks",
	} {
		flagErr := validateWebhookURL(raw)
		_, certsErr := certs.New(fake.NewClientset(), nil, certs.Options{Namespace: "ns", URL: raw, CRDs: []string{}})
		if (flagErr == nil) != (certsErr == nil) {
			t.Errorf("%q: the flag check says %v, pkg/certs says %v", raw, flagErr, certsErr)
		}
	}
}

// An impossible --webhook-service-port is refused at start, by its name,
// before anything is built.
func TestWebhookServicePortRefused(t *testing.T) {
	for _, port := range []int{0, -1, 65536} {
		o := options{webhookPort: 9443, webhookCerts: webhookCertOptions{servicePort: port}}
		_, err := webhookServer(nil, nil, nil, o, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "--webhook-service-port") {
			t.Errorf("--webhook-service-port=%d: %v; want an error naming the flag", port, err)
		}
	}
}
