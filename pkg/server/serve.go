package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Timeouts and limits shared by every server: a slow or hostile client must
// not hold a connection or memory forever.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 1 << 20
)

// Server is one HTTP listener with its handler.
type Server struct {
	Name    string
	Addr    string
	Handler http.Handler
	// TLS, when set, makes the server speak HTTPS only.
	TLS *tls.Config

	listener net.Listener
	srv      *http.Server
}

// Listen binds the address now, so that a port conflict fails the start
// sequence before anything else starts, and so that ":0" resolves.
func (s *Server) Listen() error {
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("%s server: listening on %s: %w", s.Name, s.Addr, err)
	}
	if s.TLS != nil {
		l = tls.NewListener(l, s.TLS)
	}
	s.listener = l
	s.srv = &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// TLS handshake failures and the like go to our log, with the
		// server's name, rather than to the standard logger's stderr.
		ErrorLog: log.New(serverErrorWriter{name: s.Name}, "", 0),
	}
	return nil
}

// BoundAddr is the address actually bound (useful with port 0).
func (s *Server) BoundAddr() string { return s.listener.Addr().String() }

// Serve serves until ctx is done, then shuts down gracefully within
// shutdownTimeout. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, shutdownTimeout time.Duration) error {
	errCh := make(chan error, 1)
	go func() { errCh <- s.srv.Serve(s.listener) }()
	klog.InfoS("Serving", "server", s.Name, "address", s.BoundAddr())
	select {
	case err := <-errCh:
		return fmt.Errorf("%s server: %w", s.Name, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("%s server: shutting down: %w", s.Name, err)
	}
	if err := <-errCh; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", s.Name, err)
	}
	return nil
}

// serverErrorWriter turns net/http's error log lines into klog entries.
// They are about single connections. A failed TLS handshake is logged: on
// the webhook server it usually means the API server does not trust our
// certificate (a stale caBundle). The rest (a client that hung up) is noise
// unless debugging.
type serverErrorWriter struct{ name string }

func (w serverErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		klog.InfoS("TLS handshake failed", "server", w.name, "err", msg)
	} else {
		klog.V(2).InfoS("HTTP server error", "server", w.name, "err", msg)
	}
	return len(p), nil
}
