package upgrade

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
)

// service stands for the webhook Service of a rolling Deployment, on
// loopback: one stable address that the webhook configurations and the
// CRD's conversion call, in front of whichever operator processes are its
// endpoints. As the endpoints controller does, the test adds a process once
// its /readyz passes and removes it when it is about to be stopped; each
// connection goes to the next endpoint in turn and stays there until either
// side closes it, as kube-proxy's do. TLS passes through untouched.
type service struct {
	ln net.Listener

	mu        sync.Mutex
	endpoints []string
	next      int
	accepted  map[string]int // connections per endpoint
	refused   int            // connections with no endpoint, or one that did not answer
}

// newWebhookEndpoint is the webhooks as the API server reaches them: the
// certificate every process serves, written into certDir as cert-manager
// mounts it, with its CA (caBundle, as cert-manager's cainjector writes it
// into the configurations), and the Service in front of the processes, at
// url.
func newWebhookEndpoint(t *testing.T) (certDir string, caBundle []byte, svc *service, url string) {
	t.Helper()
	certDir = t.TempDir()
	caBundle, err := controlplane.WriteServingCertificate(certDir)
	if err != nil {
		t.Fatal(err)
	}
	svc = newService(t)
	return certDir, caBundle, svc, "https://" + svc.Addr()
}

func newService(t *testing.T) *service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &service{ln: ln, accepted: map[string]int{}}
	go s.serve()
	t.Cleanup(func() { _ = ln.Close() })
	return s
}

// Addr is the Service's stable address.
func (s *service) Addr() string { return s.ln.Addr().String() }

func (s *service) add(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = append(s.endpoints, endpoint)
}

// remove takes endpoint out of rotation; its open connections stay until
// the process closes them, as a terminating pod's do.
func (s *service) remove(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = slices.DeleteFunc(s.endpoints, func(e string) bool { return e == endpoint })
}

// counts returns the connections made to each endpoint, and those refused.
func (s *service) counts() (map[string]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.accepted {
		out[k] = v
	}
	return out, s.refused
}

func (s *service) pick() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.endpoints) == 0 {
		s.refused++
		return ""
	}
	e := s.endpoints[s.next%len(s.endpoints)]
	s.next++
	s.accepted[e]++
	return e
}

func (s *service) serve() {
	for {
		client, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		go s.forward(client)
	}
}

func (s *service) forward(client net.Conn) {
	defer client.Close()
	endpoint := s.pick()
	if endpoint == "" {
		return
	}
	backend, err := net.Dial("tcp", endpoint)
	if err != nil {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, backend); done <- struct{}{} }()
	<-done // either side closed: close both
}
