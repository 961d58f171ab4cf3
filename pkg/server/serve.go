package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
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
	// HTTP2, when set, configures HTTP/2 (offered through TLS.NextProtos).
	HTTP2 *http.HTTP2Config
	// MaxConnectionAge, when set, ends a connection once it is older than
	// that, give or take a tenth, at its next request: the response asks
	// for the close (GOAWAY over HTTP/2, after the streams in flight), and
	// the client dials again.
	MaxConnectionAge time.Duration

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
	handler := s.Handler
	var connContext func(context.Context, net.Conn) context.Context
	if s.MaxConnectionAge > 0 {
		handler, connContext = withMaxConnectionAge(s.MaxConnectionAge, handler)
	}
	s.srv = &http.Server{
		Handler:           handler,
		ConnContext:       connContext,
		HTTP2:             s.HTTP2,
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

type connEndKey struct{}

// withMaxConnectionAge wraps h so that a response on a connection past its
// end asks for the close; connContext gives each connection its end, the
// age jittered so that connections opened together are not all redialled
// at once.
func withMaxConnectionAge(age time.Duration, h http.Handler) (http.Handler, func(context.Context, net.Conn) context.Context) {
	connContext := func(ctx context.Context, _ net.Conn) context.Context {
		jitter := time.Duration(rand.Int64N(int64(age)/5+1)) - age/10
		return context.WithValue(ctx, connEndKey{}, time.Now().Add(age+jitter))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if end, ok := r.Context().Value(connEndKey{}).(time.Time); ok && time.Now().After(end) {
			// HTTP/2: GOAWAY once the streams in flight end; HTTP/1.1:
			// the connection closes after this response.
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	}), connContext
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
