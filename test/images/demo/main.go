// Command demo is a small web server to run as a WebApp's image, so that the
// local cluster's real node has something of its own to run and the tests
// can see what handroll gave the pod. `make image-demo` builds it into the
// image localhost/handroll-demo:1, on an empty base like the operator's own
// image (hack/image).
//
// With no arguments it serves HTTP on --listen (default: the port in $PORT,
// else in $HANDROLL_PORT, which handroll sets to the WebApp's spec.port, else
// :8080):
//
//	GET /         200, the WebApp's config: each key of the ConfigMap
//	              mounted at /etc/handroll/config (spec.config) as a
//	              key=value line, sorted by key, read afresh on every request
//	GET /healthz  200, "ok"
//
// SIGTERM or SIGINT stops it gracefully: it stops accepting, lets the
// requests under way finish, and exits 0.
//
// `demo dial [--count N] [--timeout D] ADDR...` instead tries N TCP
// connections to each ADDR, logs each attempt and a summary, then waits for
// SIGTERM, so that the pod stays Running and its log can be read: the
// egress tests read from it what the pod could reach.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ConfigDir is where handroll mounts a WebApp's spec.config ConfigMap
// (pkg/controller/webapp.ConfigDir).
const ConfigDir = "/etc/handroll/config"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run is main's body: returning, rather than exiting, lets its deferred
// calls run.
func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "dial" {
		return dial(ctx, os.Stdout, os.Args[2:])
	}
	return serve(ctx, os.Args[1:])
}

var errUsage = errors.New("usage")

// serve runs the HTTP server until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fs.String("listen", defaultListen(os.Getenv), "the address to serve HTTP on")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (demo [--listen ADDR] | demo dial ...)", errUsage, fs.Args())
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: Handler(ConfigDir), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("demo: serving HTTP on %s, config from %s", ln.Addr(), ConfigDir)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Printf("demo: stopping")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	log.Printf("demo: stopped")
	return nil
}

// defaultListen is :$PORT, else :$HANDROLL_PORT, else :8080.
func defaultListen(getenv func(string) string) string {
	for _, name := range []string{"PORT", "HANDROLL_PORT"} {
		if p := getenv(name); p != "" {
			return ":" + p
		}
	}
	return ":8080"
}

// Handler serves the config in dir at / and "ok" at /healthz.
func Handler(dir string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		body, err := RenderConfig(dir)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, body)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
	})
	return mux
}

// RenderConfig reads the keys of the ConfigMap volume at dir and renders
// them as sorted key=value lines. A ConfigMap volume holds each key as a
// symlink into a timestamped directory, through the symlink ..data, which
// the kubelet swaps when the ConfigMap changes: the entries whose names
// begin with ".." are that machinery and are skipped, and a key is read
// through its symlink, so the value is the current one. An entry that is not
// a regular file once followed is skipped too. A value that would not stay
// on its line (a newline, say) is written Go-quoted. A missing dir is no
// config: an empty body.
func RenderConfig(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var keys []string
	values := map[string]string{}
	for _, e := range entries {
		key := e.Name()
		if strings.HasPrefix(key, "..") {
			continue
		}
		path := dir + "/" + key
		info, err := os.Stat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		keys = append(keys, key)
		values[key] = string(data)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := values[k]
		if !oneLine(v) {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return b.String(), nil
}

// oneLine reports whether v prints as itself on one line.
func oneLine(v string) bool {
	if strings.HasPrefix(v, `"`) {
		return false // would read as quoted
	}
	for _, r := range v {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// dial tries --count TCP connections to each address, one after another,
// logs each result and a summary, then waits for ctx to end.
func dial(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("demo dial", flag.ContinueOnError)
	count := fs.Int("count", 1, "connections to attempt per address")
	timeout := fs.Duration("timeout", 2*time.Second, "how long one attempt may take")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() == 0 || *count < 1 || *timeout <= 0 {
		return fmt.Errorf("%w: demo dial [--count N>0] [--timeout D>0] HOST:PORT...", errUsage)
	}
	attempts, connected := Dial(ctx, out, fs.Args(), *count, *timeout)
	fmt.Fprintf(out, "dial: %d attempts, %d connected\n", attempts, connected)
	<-ctx.Done()
	return nil
}

// Dial makes count attempts to connect to each address and writes a line
// for each: "dial ADDR: attempt I: connected" or the error. It stops early
// when ctx ends.
func Dial(ctx context.Context, out io.Writer, addrs []string, count int, timeout time.Duration) (attempts, connected int) {
	var d net.Dialer
	for _, addr := range addrs {
		for i := 1; i <= count; i++ {
			if ctx.Err() != nil {
				return attempts, connected
			}
			attemptCtx, cancel := context.WithTimeout(ctx, timeout)
			conn, err := d.DialContext(attemptCtx, "tcp", addr)
			cancel()
			attempts++
			result := "connected"
			if err != nil {
				result = err.Error()
			} else {
				connected++
				conn.Close()
			}
			fmt.Fprintf(out, "dial %s: attempt %d: %s\n", addr, i, result)
		}
	}
	return attempts, connected
}
