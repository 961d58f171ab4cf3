package operator

import (
	"net"
	"sync"
	"testing"
)

// LinkState is what a Proxy does with the bytes it receives.
type LinkState int

const (
	LinkUp        LinkState = iota
	LinkBlackhole           // bytes are dropped; connections stay open, unanswered
	LinkReset               // every connection is closed, and new ones at once
)

func (s LinkState) String() string {
	return [...]string{"up", "blackhole", "reset"}[s]
}

// Proxy is a TCP proxy between one operator process and the API server,
// whose link a test cuts and restores. TLS passes through it untouched: the
// process still verifies the API server's certificate (which names
// 127.0.0.1).
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	state LinkState
	conns map[net.Conn]struct{}
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port) until t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.closeAll()
	})
	return p
}

// Addr is the address the replica dials instead of the API server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut breaks the link in the given way.
func (p *Proxy) Cut(how LinkState) {
	p.mu.Lock()
	p.state = how
	p.mu.Unlock()
	if how == LinkReset {
		p.closeAll()
	}
}

// Restore heals the link. Connections from before are closed: a blackholed
// TLS stream has lost bytes and cannot resume.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.state = LinkUp
	p.mu.Unlock()
	p.closeAll()
}

func (p *Proxy) up() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == LinkUp
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == LinkReset {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
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
func (p *Proxy) pipe(dst, src net.Conn) {
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
