package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// configMapVolume lays out dir as the kubelet lays out a ConfigMap volume:
// the data in a timestamped directory, the symlink ..data to it, and each
// key a symlink through ..data. Called again, it swaps ..data atomically to
// a new directory, as the kubelet does when the ConfigMap changes.
func configMapVolume(t *testing.T, dir, stamp string, data map[string]string) {
	t.Helper()
	ts := filepath.Join(dir, "..2026_01_01_00_00_00."+stamp)
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestConfigSortedSkippingTheVolumeMachinery(t *testing.T) {
	dir := t.TempDir()
	configMapVolume(t, dir, "1", map[string]string{
		"mode":     "prod",
		"app.yaml": "greeting: hello\nlevel: 2\n",
		"empty":    "",
	})
	// Not keys: a directory, and a symlink that leads nowhere.
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/missing", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(dir))
	defer srv.Close()

	code, body := get(t, srv, "/")
	want := `app.yaml="greeting: hello\nlevel: 2\n"` + "\nempty=\nmode=prod\n"
	if code != http.StatusOK || body != want {
		t.Fatalf("GET /: %d %q, want 200 %q", code, body, want)
	}
	if strings.Contains(body, "..") {
		t.Errorf("GET / shows the volume's .. entries: %q", body)
	}
}

func TestConfigReadOnEveryRequest(t *testing.T) {
	dir := t.TempDir()
	configMapVolume(t, dir, "1", map[string]string{"mode": "prod"})
	srv := httptest.NewServer(Handler(dir))
	defer srv.Close()

	if _, body := get(t, srv, "/"); body != "mode=prod\n" {
		t.Fatalf("first GET /: %q", body)
	}
	configMapVolume(t, dir, "2", map[string]string{"mode": "staging", "extra": "1"})
	if _, body := get(t, srv, "/"); body != "extra=1\nmode=staging\n" {
		t.Fatalf("GET / after the ConfigMap changed: %q", body)
	}
}

func TestNoConfigIsAnEmptyBody(t *testing.T) {
	srv := httptest.NewServer(Handler(filepath.Join(t.TempDir(), "absent")))
	defer srv.Close()
	if code, body := get(t, srv, "/"); code != http.StatusOK || body != "" {
		t.Fatalf("GET / without a config dir: %d %q, want 200 and nothing", code, body)
	}
}

func TestHealthzAndOtherPaths(t *testing.T) {
	srv := httptest.NewServer(Handler(t.TempDir()))
	defer srv.Close()
	if code, body := get(t, srv, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("GET /healthz: %d %q, want 200 ok", code, body)
	}
	if code, _ := get(t, srv, "/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", code)
	}
	resp, err := srv.Client().Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
}

func TestDefaultListen(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, ":8080"},
		{map[string]string{"HANDROLL_PORT": "9090"}, ":9090"},
		{map[string]string{"PORT": "8081", "HANDROLL_PORT": "9090"}, ":8081"},
	} {
		if got := defaultListen(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("defaultListen(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestDial dials loopback only: a listener, and a port nobody listens on.
func TestDial(t *testing.T) {
	ln := acceptingListener(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	var out bytes.Buffer
	attempts, connected := Dial(context.Background(), &out, []string{ln.Addr().String(), closedAddr}, 2, time.Second)
	if attempts != 4 || connected != 2 {
		t.Fatalf("Dial: %d attempts, %d connected, want 4 and 2\n%s", attempts, connected, out.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 lines, got %q", out.String())
	}
	for i, prefix := range []string{
		"dial " + ln.Addr().String() + ": attempt 1: connected",
		"dial " + ln.Addr().String() + ": attempt 2: connected",
		"dial " + closedAddr + ": attempt 1: ",
		"dial " + closedAddr + ": attempt 2: ",
	} {
		if !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("line %d = %q, want it to begin %q", i+1, lines[i], prefix)
		}
	}
	if strings.HasSuffix(lines[2], "connected") {
		t.Errorf("dialing a closed port connected: %q", lines[2])
	}
}

// TestDialModeSummaryThenWaits runs the dial mode to its summary and checks
// it waits for the signal (here: the context) before it returns.
func TestDialModeSummaryThenWaits(t *testing.T) {
	ln := acceptingListener(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- dial(ctx, pw, []string{"--count", "3", "--timeout", "1s", ln.Addr().String()})
		pw.Close()
	}()
	buf := make([]byte, 4096)
	var got string
	for !strings.Contains(got, "dial: 3 attempts, 3 connected\n") {
		n, err := pr.Read(buf)
		if err != nil {
			t.Fatalf("read: %v; so far %q", err, got)
		}
		got += string(buf[:n])
	}
	select {
	case err := <-done:
		t.Fatalf("dial returned before the signal: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := <-done; err != nil {
		t.Fatalf("dial: %v", err)
	}
}

// acceptingListener listens on loopback and accepts (and closes) every
// connection until the test ends.
func acceptingListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}
