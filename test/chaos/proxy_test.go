package chaos

import (
	"net"
	"sync"
	"testing"
)

// linkState is what a proxy does with the bytes it receives.
type linkState int

const (
	linkUp        linkState = iota
	linkBlackhole           // bytes are dropped; connections stay open, unanswered
	linkReset               // every connection is closed, and new ones at once
)

func (s linkState) String() string {
	return [...]string{"up", "blackhole", "reset"}[s]
}

// proxy is a TCP proxy between one replica and the API server, whose link
// the test cuts and restores. TLS passes through it untouched: the replica
// still verifies the API server's certificate (which names 127.0.0.1).
type proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	state linkState
	conns map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.closeAll()
	})
	return p
}

// Addr is the address the replica dials instead of the API server's.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Cut breaks the link in the given way.
func (p *proxy) Cut(how linkState) {
	p.mu.Lock()
	p.state = how
	p.mu.Unlock()
	if how == linkReset {
		p.closeAll()
	}
}

// Restore heals the link. Connections from before are closed: a blackholed
// TLS stream has lost bytes and cannot resume.
func (p *proxy) Restore() {
	p.mu.Lock()
	p.state = linkUp
	p.mu.Unlock()
	p.closeAll()
}

func (p *proxy) up() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == linkUp
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == linkReset {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(client) {
			_ = client.Close()
			continue
		}
		go func() {
			server, err := net.Dial("tcp", p.target)
			if err != nil || !p.track(server) {
				_ = client.Close()
				if server != nil {
					_ = server.Close()
				}
				return
			}
			go p.pipe(server, client)
			p.pipe(client, server)
		}()
	}
}

// pipe copies src to dst while the link is up and drops the bytes while it
// is blackholed, until either side closes.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.up() {
			if _, err := dst.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = src.Close()
	_ = dst.Close()
}
