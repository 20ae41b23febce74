// Package faultproxy is a fault-injecting HTTP reverse proxy for tests: it
// sits between an S3 client (a pinfs mount, pointed at it with
// AWS_ENDPOINT_URL) and an S3 server (versitygw), forwards every request,
// and injects a fault into the requests that match a rule.
//
// # Shape
//
// With Options.Shape the proxy also stands in for the network between a
// client and a remote S3: a first-byte latency before every response and a
// bandwidth cap that paces each response body on its own (shape.go). The
// bench runs every client through one shaping proxy.
//
// # Faults
//
// A fault is one of: an error status with an S3 error document (503
// SlowDown, 403 AccessDenied) instead of forwarding; a TCP reset before any
// response header; a body cut off after some bytes; a body that stalls after
// some bytes; one bit flipped at a fixed object offset; a server that
// ignores versionId (and echoes the asked one in x-amz-version-id); a server
// that ignores Range (the whole object, 200). Down makes the proxy refuse
// connections for a while, like a gateway that is restarting.
//
// A Rule matches on method and path prefix (path-style S3: /bucket/key), so
// a test can fault member GETs under one prefix while the store's own
// objects still load. A rule applies to its first Times matching requests,
// or to every one when Times is 0; Injection.Applied says how often it did,
// so a test can prove that the fault happened.
//
// # Signatures
//
// Dropping versionId or Range changes what the client signed, so for those
// two faults the proxy signs the request again (SigV4, with Options'
// credentials) before forwarding it. Every other request goes upstream
// with the client's own signature and its Host header unchanged.
//
// # Record
//
// Every request that reaches the proxy is recorded as the client sent it
// (before any fault changes it), so a test can check, for example, that no
// member GET went out without its versionId.
package faultproxy

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Options configures a Proxy.
type Options struct {
	// AccessKey, SecretKey and Region sign the requests that the
	// IgnoreVersionID and IgnoreRange faults change. Without them those
	// faults forward an unsigned request, which a real server refuses.
	AccessKey, SecretKey, Region string

	// Shape, when not zero, makes every response look as if it came over
	// a network link (shape.go): first-byte latency and a per-response
	// bandwidth cap. Faults apply as without it.
	Shape Shape
}

// Rule injects Fault into matching requests.
type Rule struct {
	Method string // "" matches any method
	Path   string // a prefix of the request path, e.g. "/data/ds/big.bin"; "" matches any
	Fault  Fault
	Times  int // how many requests it applies to; 0: every matching one
}

// Injection is a rule in effect. Its methods are safe for concurrent use.
type Injection struct {
	rule    Rule
	mu      sync.Mutex
	applied int
	removed bool
}

// Applied returns how many requests the rule has been applied to.
func (in *Injection) Applied() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.applied
}

// claim counts one application if the rule may still apply.
func (in *Injection) claim() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.removed || in.rule.Times > 0 && in.applied >= in.rule.Times {
		return false
	}
	in.applied++
	return true
}

// Request is one request as the client sent it.
type Request struct {
	Time   time.Time
	Method string
	Path   string
	Query  url.Values
	Range  string // the Range header, "" if none
	Fault  string // the fault applied to it, "" for none
}

// VersionID returns the versionId the client asked for ("" if none).
func (r Request) VersionID() string { return r.Query.Get("versionId") }

// Proxy is a running fault-injecting reverse proxy on 127.0.0.1. Its
// methods are safe for concurrent use.
type Proxy struct {
	target *url.URL
	opts   Options
	addr   string
	srv    *http.Server
	tr     *http.Transport
	done   chan struct{} // closed by Close: stalls end

	mu     sync.Mutex
	ln     net.Listener // nil while down
	conns  map[net.Conn]struct{}
	rules  []*Injection
	record []Request
	closed bool
	upTmr  *time.Timer
}

// New starts a proxy to target (an http:// URL) on a free loopback port.
func New(target string, opts Options) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, errors.New("faultproxy: target must be http://host:port")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		target: u,
		opts:   opts,
		addr:   ln.Addr().String(),
		done:   make(chan struct{}),
		conns:  map[net.Conn]struct{}{},
		tr: &http.Transport{
			Proxy:              nil,
			DisableCompression: true, // forward bodies exactly as the server sent them
			// Enough kept-alive upstream connections for every client
			// request in flight at once (the benches run up to 32 readers
			// and as many part requests): the default 2 would make the
			// proxy open and close connections all the time.
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 512,
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ConnState: p.connState}
	p.ln = ln
	go p.srv.Serve(ln)
	return p, nil
}

// URL returns the proxy's endpoint, http://127.0.0.1:PORT.
func (p *Proxy) URL() string { return "http://" + p.addr }

// Env returns AWS endpoint variables that point an SDK client at the
// proxy; append them after the server's own environment.
func (p *Proxy) Env() []string {
	return []string{"AWS_ENDPOINT_URL_S3=" + p.URL(), "AWS_ENDPOINT_URL=" + p.URL()}
}

// Inject adds a rule after the ones in effect and returns it.
func (p *Proxy) Inject(r Rule) *Injection {
	in := &Injection{rule: r}
	p.mu.Lock()
	p.rules = append(p.rules, in)
	p.mu.Unlock()
	return in
}

// Clear removes every rule; requests already being faulted go on.
func (p *Proxy) Clear() {
	p.mu.Lock()
	rules := p.rules
	p.rules = nil
	p.mu.Unlock()
	for _, in := range rules {
		in.mu.Lock()
		in.removed = true
		in.mu.Unlock()
	}
}

// Requests returns a copy of the record, in arrival order.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.record...)
}

// Unversioned returns the recorded GET and HEAD requests under pathPrefix
// that the client sent without a versionId.
func (p *Proxy) Unversioned(pathPrefix string) []Request {
	var out []Request
	for _, r := range p.Requests() {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			strings.HasPrefix(r.Path, pathPrefix) && r.VersionID() == "" {
			out = append(out, r)
		}
	}
	return out
}

// Down closes the listener and every open connection, so that the proxy
// refuses connections, and listens again on the same port after d. The
// returned channel is closed once it listens again (or Close was called).
func (p *Proxy) Down(d time.Duration) <-chan struct{} {
	up := make(chan struct{})
	p.mu.Lock()
	if p.closed || p.ln == nil {
		p.mu.Unlock()
		close(up)
		return up
	}
	p.ln.Close()
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	p.upTmr = time.AfterFunc(d, func() {
		defer close(up)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return
		}
		for range 50 { // the port was ours a moment ago; retry briefly if it lingers
			ln, err := net.Listen("tcp", p.addr)
			if err == nil {
				p.ln = ln
				go p.srv.Serve(ln)
				return
			}
			p.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			p.mu.Lock()
			if p.closed {
				return
			}
		}
	})
	p.mu.Unlock()
	return up
}

// Close stops the proxy, ends stalls and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.upTmr != nil {
		p.upTmr.Stop()
	}
	close(p.done)
	p.mu.Unlock()
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	return err
}

func (p *Proxy) connState(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.conns[c] = struct{}{}
	case http.StateHijacked, http.StateClosed:
		delete(p.conns, c)
	}
}

// pick records r and returns the fault to apply to it, if any.
func (p *Proxy) pick(r *http.Request) (Fault, bool) {
	p.mu.Lock()
	rules := append([]*Injection(nil), p.rules...)
	p.mu.Unlock()
	var f Fault
	ok := false
	for _, in := range rules {
		if in.rule.matches(r) && in.claim() {
			f, ok = in.rule.Fault, true
			break
		}
	}
	rec := Request{
		Time: time.Now(), Method: r.Method, Path: r.URL.Path,
		Query: r.URL.Query(), Range: r.Header.Get("Range"),
	}
	if ok {
		rec.Fault = f.String()
	}
	p.mu.Lock()
	p.record = append(p.record, rec)
	p.mu.Unlock()
	return f, ok
}

// matches reports whether the rule's fault can apply to r.
func (rl Rule) matches(r *http.Request) bool {
	if rl.Method != "" && rl.Method != r.Method || !strings.HasPrefix(r.URL.Path, rl.Path) {
		return false
	}
	switch rl.Fault.Kind {
	case FlipBit:
		return covers(r.Header.Get("Range"), rl.Fault.Offset)
	case IgnoreVersionID:
		return r.URL.Query().Has("versionId")
	case IgnoreRange:
		return r.Header.Get("Range") != ""
	case Cut, Stall:
		// Only a body longer than After reaches the fault: a short read
		// (a member's tail block) that raced ahead must not use it up.
		return longer(r.Header.Get("Range"), rl.Fault.After)
	}
	return true
}
