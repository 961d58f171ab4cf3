package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
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
