// Command registry serves an OCI distribution registry on a loopback
// address, for the local cluster's real node: `make deploy` pushes the
// operator's image to it and the node's containerd pulls from it, as a
// cluster pulls from any registry. It is go-containerregistry's
// pkg/registry (manifests in memory, blobs on disk) with one log line per
// request, so a test can see who pulled what.
//
//	registry --addr 127.0.0.1:0 --dir .local/cluster/node/registry --log FILE
//
// It listens only on loopback: nothing off this machine may reach it, and
// it speaks plain HTTP, which clients accept only for such addresses.
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
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on (port 0: any free one)")
	dir := fs.String("dir", "", "directory for the blobs (required)")
	logFile := fs.String("log", "", "file to append one line per request to (default: stderr)")
	addrFile := fs.String("addr-file", "", "file to write the address listened on to, once listening")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	if err := loopbackOnly(*addr); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	var out io.Writer = os.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		out = f
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	reg := registry.New(
		registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(*dir)),
		// The OCI 1.1 referrers API, where cosign finds the signatures and
		// attestations of a release's image and chart.
		registry.WithReferrersSupport(true),
	)
	srv := &http.Server{
		Handler:           logRequests(log.New(out, "", log.LstdFlags|log.LUTC), reg),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if *addrFile != "" {
		// Written after Listen, renamed into place: whoever reads it can
		// connect at once.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Clean(*addrFile)); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// logRequests logs each request as "METHOD PATH STATUS USER-AGENT": the
// user agent tells a node's pull (containerd) from a push.
func logRequests(l *log.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		l.Printf("%s %s %d %q", r.Method, r.URL.Path, rec.status, r.UserAgent())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// loopbackOnly refuses an address that is not on loopback.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %q: only a loopback IP address is allowed (the registry speaks plain HTTP and must not be reachable from off this machine)", addr)
	}
	return nil
}
