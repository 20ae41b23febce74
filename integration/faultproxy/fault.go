package faultproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Kind names a fault.
type Kind int

// Fault kinds.
const (
	Status          Kind = iota + 1 // answer Fault.Status with an S3 error Fault.Code, not forwarded
	Reset                           // reset the TCP connection before any response header
	Cut                             // send the headers and Fault.After body bytes, then drop the connection
	Stall                           // send the headers and Fault.After body bytes, then nothing for Fault.For
	FlipBit                         // flip the low bit of the byte at object offset Fault.Offset
	IgnoreVersionID                 // forward without versionId, echo the asked one in x-amz-version-id
	IgnoreRange                     // forward without Range: the whole object, 200
)

// Fault is what the proxy does to a request instead of forwarding it
// faithfully.
type Fault struct {
	Kind   Kind
	Status int           // Status: the HTTP status
	Code   string        // Status: the S3 error code
	After  int64         // Cut, Stall: body bytes sent first
	For    time.Duration // Stall: how long; 0 until the client gives up or the proxy closes
	Offset int64         // FlipBit: the object offset of the byte to corrupt
}

// SlowDown is S3's throttling answer, 503 SlowDown.
func SlowDown() Fault {
	return Fault{Kind: Status, Status: http.StatusServiceUnavailable, Code: "SlowDown"}
}

// Forbidden is 403 AccessDenied.
func Forbidden() Fault {
	return Fault{Kind: Status, Status: http.StatusForbidden, Code: "AccessDenied"}
}

// ResetBeforeHeaders resets the connection before any response byte.
func ResetBeforeHeaders() Fault { return Fault{Kind: Reset} }

// CutAfter sends n body bytes, then drops the connection.
func CutAfter(n int64) Fault { return Fault{Kind: Cut, After: n} }

// StallAfter sends n body bytes, then nothing for d (0: until the client
// gives up), then the rest.
func StallAfter(n int64, d time.Duration) Fault { return Fault{Kind: Stall, After: n, For: d} }

// FlipBitAt flips the low bit of the object's byte at off in every
// response that carries it.
func FlipBitAt(off int64) Fault { return Fault{Kind: FlipBit, Offset: off} }

// IgnoreVersion forwards the request without its versionId and echoes the
// asked version id in the answer: a server that serves the current bytes
// under the pinned version's name.
func IgnoreVersion() Fault { return Fault{Kind: IgnoreVersionID} }

// IgnoreRangeHeader forwards the request without its Range header: the
// whole object with 200.
func IgnoreRangeHeader() Fault { return Fault{Kind: IgnoreRange} }

func (f Fault) String() string {
	switch f.Kind {
	case Status:
		return fmt.Sprintf("%d %s", f.Status, f.Code)
	case Reset:
		return "reset before headers"
	case Cut:
		return fmt.Sprintf("cut after %d bytes", f.After)
	case Stall:
		return fmt.Sprintf("stall after %d bytes for %v", f.After, f.For)
	case FlipBit:
		return fmt.Sprintf("flip bit at %d", f.Offset)
	case IgnoreVersionID:
		return "ignore versionId"
	case IgnoreRange:
		return "ignore Range"
	}
	return fmt.Sprintf("fault %d", f.Kind)
}

// serve handles one request: records it, and forwards it with its fault.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	f, faulty := p.pick(r)
	if !faulty {
		f = Fault{}
	}
	switch f.Kind {
	case Status:
		if p.delay(r.Context()) {
			writeError(w, r, f)
		}
		return
	case Reset:
		resetConn(w)
		return
	}

	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host // the client signed the proxy's host
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	asked := r.URL.Query().Get("versionId")
	switch f.Kind {
	case IgnoreVersionID:
		q := out.URL.Query()
		q.Del("versionId")
		out.URL.RawQuery = q.Encode()
		p.resign(out)
	case IgnoreRange:
		out.Header.Del("Range")
		p.resign(out)
	}

	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		// The upstream is unreachable: look like a broken gateway.
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if !p.delay(r.Context()) {
		return
	}
	for k, vs := range resp.Header {
		if isHop(k) {
			continue
		}
		w.Header()[k] = vs
	}
	if f.Kind == IgnoreVersionID && asked != "" {
		w.Header().Set("X-Amz-Version-Id", asked)
	}
	w.WriteHeader(resp.StatusCode)

	start := int64(0) // the object offset of the first body byte
	if resp.StatusCode == http.StatusPartialContent {
		start, _ = contentRangeStart(resp.Header.Get("Content-Range"))
	}
	if resp.StatusCode/100 != 2 {
		f = Fault{} // error documents go through as they are
	}
	var bw io.Writer = w
	if p.opts.Shape.Rate > 0 {
		pw := newPacedWriter(r.Context(), p.done, w, p.opts.Shape.Rate)
		defer pw.stop()
		bw = pw
	}
	p.copyBody(w, bw, r, resp.Body, f, start)
}

// copyBody streams body to bw (w itself, or w paced by the shape),
// applying a Cut, Stall or FlipBit fault.
func (p *Proxy) copyBody(w http.ResponseWriter, bw io.Writer, r *http.Request, body io.Reader, f Fault, start int64) {
	rc := http.NewResponseController(w)
	if f.Kind == Cut || f.Kind == Stall {
		if _, err := io.CopyN(bw, body, f.After); err != nil && err != io.EOF {
			return
		}
		rc.Flush()
		if f.Kind == Cut {
			panic(http.ErrAbortHandler) // the server drops the connection mid-body
		}
		var until <-chan time.Time
		if f.For > 0 {
			t := time.NewTimer(f.For)
			defer t.Stop()
			until = t.C
		}
		select {
		case <-r.Context().Done():
			return
		case <-p.done:
			panic(http.ErrAbortHandler)
		case <-until:
		}
	}
	if f.Kind != FlipBit {
		copyBuffered(bw, body)
		return
	}
	pos := start
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if f.Offset >= pos && f.Offset < pos+int64(n) {
				buf[f.Offset-pos] ^= 1
			}
			pos += int64(n)
			if _, werr := bw.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// writeError answers with an S3 error document.
func writeError(w http.ResponseWriter, r *http.Request, f Fault) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("X-Amz-Request-Id", "faultproxy")
	w.WriteHeader(f.Status)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Error><Code>%s</Code><Message>injected by faultproxy</Message><RequestId>faultproxy</RequestId></Error>`, f.Code)
	}
}

// resetConn closes the client's connection with a TCP RST.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// hopHeaders are connection-level headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func isHop(h string) bool {
	for _, x := range hopHeaders {
		if strings.EqualFold(h, x) {
			return true
		}
	}
	return false
}

// covers reports whether an HTTP Range header value ("" is the whole
// longer reports whether a request with Range header rng (one range, or
// none for the whole object) asks for more than n bytes.
func longer(rng string, n int64) bool {
	spec, ok := strings.CutPrefix(rng, "bytes=")
	if rng == "" || !ok {
		return true
	}
	a, b, _ := strings.Cut(spec, "-")
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	return err1 != nil || err2 != nil || hi-lo+1 > n
}

// object) includes object offset off. Suffix ranges count as covering.
func covers(rng string, off int64) bool {
	spec, ok := strings.CutPrefix(rng, "bytes=")
	if rng == "" {
		return true
	}
	if !ok {
		return false
	}
	for part := range strings.SplitSeq(spec, ",") {
		a, b, _ := strings.Cut(strings.TrimSpace(part), "-")
		if a == "" {
			return true
		}
		lo, err := strconv.ParseInt(a, 10, 64)
		if err != nil || off < lo {
			continue
		}
		if b == "" {
			return true
		}
		if hi, err := strconv.ParseInt(b, 10, 64); err == nil && off <= hi {
			return true
		}
	}
	return false
}

// contentRangeStart parses the first offset of "bytes a-b/total".
func contentRangeStart(cr string) (int64, bool) {
	spec, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	a, _, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(a, 10, 64)
	return n, err == nil
}
