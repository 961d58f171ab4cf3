package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// buildArchive runs the build as `make image` does (two platforms, the
// operator's labels, SOURCE_DATE_EPOCH) on stand-in binaries and returns the
// archive's path and the digest it wrote to OUT.digest.
func buildArchive(t *testing.T) (archive, digest string) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"--name", "handroll", "--tag", "localhost/handroll:v0.1.0",
		"--title", "handroll", "--version", "v0.1.0", "--revision", strings.Repeat("ab", 20),
		"--source", "github.com/handroll/handroll", "--licenses", "Apache-2.0"}
	for i, arch := range []string{"amd64", "arm64"} {
		path := filepath.Join(dir, "handroll-linux-"+arch)
		if err := os.WriteFile(path, bytes.Repeat([]byte{byte(i), 'x'}, 64<<10), 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--binary", "linux/"+arch+"="+path)
	}
	archive = filepath.Join(dir, "handroll.tar")
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var out bytes.Buffer
	if err := run(context.Background(), append(args, "--out", archive), &out); err != nil {
		t.Fatalf("build: %v", err)
	}
	written, err := os.ReadFile(archive + ".digest")
	if err != nil {
		t.Fatal(err)
	}
	return archive, strings.TrimSpace(string(written))
}

// push runs `image push` and returns the last line it printed.
func push(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"push"}, args...), &out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], err
}

// TestPushToLoopbackRegistry pushes what the build wrote to a registry
// started here on loopback, then reads the tag back from the registry: the
// digest printed, the digest the build wrote and the registry's are one, and
// the index holds both platforms with their labels.
func TestPushToLoopbackRegistry(t *testing.T) {
	archive, built := buildArchive(t)
	srv := httptest.NewServer(registry.New(registry.Logger(discard())))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/team/handroll:v0.1.0"
	t.Setenv("DOCKER_CONFIG", t.TempDir())

	if _, err := push(t, "--archive", archive, "--tag", ref); err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("plain HTTP without --insecure: %v; want a refusal naming --insecure", err)
	}
	printed, err := push(t, "--archive", archive, "--tag", ref, "--insecure")
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if printed != built {
		t.Errorf("push printed %q last; the build wrote %s", printed, built)
	}

	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag)
	if err != nil {
		t.Fatalf("reading %s back: %v", ref, err)
	}
	got, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != built {
		t.Errorf("the registry serves %s under %s; the build wrote %s", got, ref, built)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, d := range m.Manifests {
		plats = append(plats, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatalf("%s: %v", d.Platform, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatalf("%s: %v", d.Platform, err)
		}
		if cfg.Config.Labels[LabelVersion] != "v0.1.0" || cfg.Config.Labels[LabelCreated] != "2023-11-14T22:13:20Z" {
			t.Errorf("%s: labels %v", d.Platform, cfg.Config.Labels)
		}
	}
	if !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("pushed index holds %v, want linux/amd64 and linux/arm64", plats)
	}
	want := map[string]string{
		LabelCreated: "2023-11-14T22:13:20Z", LabelTitle: "handroll", LabelVersion: "v0.1.0",
		LabelRevision: strings.Repeat("ab", 20), LabelSource: "github.com/handroll/handroll", LabelLicenses: "Apache-2.0",
	}
	if !maps.Equal(m.Annotations, want) {
		t.Errorf("index annotations %v, want %v", m.Annotations, want)
	}
}

// TestPushCredentials: a registry that wants basic auth gets the
// credentials of the config.json in $DOCKER_CONFIG, and refuses a push
// without them.
func TestPushCredentials(t *testing.T) {
	archive, built := buildArchive(t)
	const user, password = "publisher", "s3cret"
	var authorized atomic.Int64
	reg := registry.New(registry.Logger(discard()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/handroll:v0.1.0"

	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if _, err := push(t, "--archive", archive, "--tag", ref, "--insecure"); err == nil {
		t.Fatal("push without credentials succeeded")
	}
	if n := authorized.Load(); n != 0 {
		t.Fatalf("%d requests authorized without credentials", n)
	}

	dockerConfig := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	config := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
	if err := os.WriteFile(filepath.Join(dockerConfig, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dockerConfig)
	t.Setenv("REGISTRY_INSECURE", "true") // the Makefile's way to opt in
	printed, err := push(t, "--archive", archive, "--tag", ref)
	if err != nil {
		t.Fatalf("push with $DOCKER_CONFIG's credentials: %v", err)
	}
	if printed != built || authorized.Load() == 0 {
		t.Errorf("printed %q (built %s), %d authorized requests", printed, built, authorized.Load())
	}
}

func TestPushTag(t *testing.T) {
	for _, ref := range []string{"localhost:5000/handroll:v1", "127.0.0.1:5000/handroll:v1", "[::1]:5000/handroll:v1", "localhost/handroll:v1", "127.0.0.2/handroll:v1"} {
		if _, err := PushTag(ref, true); err != nil {
			t.Errorf("PushTag(%q, insecure): %v", ref, err)
		}
	}
	for _, ref := range []string{"registry.example.com/handroll:v1", "10.0.0.1:5000/handroll:v1", "192.168.1.2/handroll:v1", "localhost.example.com:5000/handroll:v1", "[::2]:5000/handroll:v1"} {
		if _, err := PushTag(ref, true); err == nil || !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("PushTag(%q, insecure) = %v; want a refusal naming --insecure", ref, err)
		} else if _, err := PushTag(ref, false); err != nil {
			t.Errorf("PushTag(%q) over HTTPS: %v", ref, err)
		}
	}
	for _, ref := range []string{"handroll:v1", "localhost/handroll", "localhost/handroll@sha256:" + strings.Repeat("0", 64)} {
		if _, err := PushTag(ref, false); err == nil {
			t.Errorf("PushTag(%q) accepted", ref)
		}
	}
}

// TestPushRefusesPlainHTTP: without --insecure no request leaves in plain
// HTTP, not even to a private address go-containerregistry would speak
// HTTP to on its own.
func TestPushRefusesPlainHTTP(t *testing.T) {
	archive, _ := buildArchive(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"push", "--archive", archive, "--tag", strings.TrimPrefix(srv.URL, "http://") + "/handroll:v1"}, &out)
	if err == nil || !strings.Contains(err.Error(), "refusing plain HTTP") {
		t.Errorf("push over plain HTTP without --insecure: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d plain-HTTP requests reached the server", n)
	}
}

func discard() *log.Logger { return log.New(io.Discard, "", 0) }
