package main

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	certutil "k8s.io/client-go/util/cert"

	"github.com/handroll/handroll/pkg/server"
)

// TestReadinessIsTheConjunctionOfItsCountedChecks: the rule at
// addReadiness. A replica serving its webhooks counts ping,
// webhook-certificate and informer-sync, and /readyz fails when any one of
// them does; the API server's readiness is listed but never counted.
func TestReadinessIsTheConjunctionOfItsCountedChecks(t *testing.T) {
	dir := t.TempDir()
	crt, key, err := certutil.GenerateSelfSignedCertKey("handroll-webhook.handroll-system.svc", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600), os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	webhookPort := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	p, readyz := servedProcess(t, "--webhook-port="+webhookPort, "--webhook-cert-dir="+dir)
	passing := func(string) error { return nil }
	set := func(name string, check func(string) error) {
		p.health.SetReadinessCheck(server.Check{Name: name, Check: func(*http.Request) error { return check(name) }})
	}
	set("informer-sync", passing) // step 8's check, synced

	counted := []string{"ping", "webhook-certificate", "informer-sync"}
	code, body := readyz()
	var listed, reported []string
	for line := range strings.Lines(body) {
		name, _, _ := strings.Cut(strings.TrimLeft(line, "[+-]"), " ")
		switch {
		case strings.Contains(line, "(reported, not counted)"):
			reported = append(reported, name)
		case strings.HasPrefix(line, "["):
			listed = append(listed, name)
		}
	}
	slices.Sort(listed)
	if want := slices.Sorted(slices.Values(counted)); !slices.Equal(listed, want) {
		t.Errorf("counted checks %v, want %v", listed, want)
	}
	if !slices.Contains(reported, "api-server") {
		t.Errorf("reported %v, want api-server among them", reported)
	}
	if code != http.StatusOK {
		t.Fatalf("/readyz with every counted check passing, the API server unreachable: %d\n%s", code, body)
	}

	for _, name := range counted {
		set(name, func(name string) error { return errors.New(name + " fails") })
		if code, body := readyz(); code != http.StatusInternalServerError || !strings.Contains(body, "readyz check failed: "+name) {
			t.Errorf("/readyz with %s failing: %d\n%s", name, code, body)
		}
		set(name, passing)
	}
}
