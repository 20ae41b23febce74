package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	access, secret, region = "AKFAULT", "secretfault", "us-east-1"
	objPath                = "/b/k"
)

// objects are the two versions of b/k on the fake server; v2 is current.
var objects = map[string][]byte{"v1": bytes.Repeat([]byte("one "), 4096), "v2": bytes.Repeat([]byte("TWO!"), 4096)}

// upstream is a fake S3 server for b/k that checks SigV4 signatures and
// serves ranges; seen receives each request's raw query and Range.
func upstream(t *testing.T) (*httptest.Server, chan string) {
	seen := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.RawQuery + " " + r.Header.Get("Range")
		if !validSignature(r) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<Error><Code>SignatureDoesNotMatch</Code></Error>")
			return
		}
		id := r.URL.Query().Get("versionId")
		if id == "" {
			id = "v2"
		}
		b, ok := objects[id]
		if r.URL.Path != objPath || !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "<Error><Code>NoSuchKey</Code></Error>")
			return
		}
		w.Header().Set("X-Amz-Version-Id", id)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

// validSignature signs a copy of r, with only the headers r signed and
// r's own time, and compares signatures.
func validSignature(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	_, signed, ok := strings.Cut(auth, "SignedHeaders=")
	if !ok {
		return false
	}
	signed, _, _ = strings.Cut(signed, ",")
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return false
	}
	c, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	for _, h := range strings.Split(signed, ";") {
		if h != "host" {
			c.Header.Set(h, r.Header.Get(h))
		}
	}
	c.Header.Del("X-Amz-Date")
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}
	if err := s.SignHTTP(context.Background(), creds, c, r.Header.Get("X-Amz-Content-Sha256"), "s3", region, when); err != nil {
		return false
	}
	return c.Header.Get("Authorization") == auth
}

func setup(t *testing.T) (*Proxy, *s3.Client, chan string) {
	t.Helper()
	return setupShaped(t, Shape{})
}

// setupShaped is setup with the proxy shaped by s.
func setupShaped(t *testing.T, s Shape) (*Proxy, *s3.Client, chan string) {
	t.Helper()
	up, seen := upstream(t)
	p, err := New(up.URL, Options{AccessKey: access, SecretKey: secret, Region: region, Shape: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := s3.New(s3.Options{
		Region: region, BaseEndpoint: aws.String(p.URL()), UsePathStyle: true,
		Credentials:      credentials.NewStaticCredentialsProvider(access, secret, ""),
		RetryMaxAttempts: 1,
	})
	return p, c, seen
}

// get GETs b/k at version id (all of it when rng is "") and reads the body.
func get(ctx context.Context, c *s3.Client, id, rng string) (*s3.GetObjectOutput, []byte, error) {
	in := &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), VersionId: aws.String(id)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return out, b, err
}

func TestForwardsAndRecords(t *testing.T) {
	p, c, seen := setup(t)
	out, b, err := get(t.Context(), c, "v1", "bytes=4-11")
	if err != nil || string(b) != "one one " || aws.ToString(out.VersionId) != "v1" {
		t.Fatalf("GET through the proxy: %q, %v", b, err)
	}
	if s := <-seen; !strings.Contains(s, "versionId=v1") || !strings.HasSuffix(s, "bytes=4-11") {
		t.Errorf("upstream saw %q", s)
	}
	rs := p.Requests()
	if len(rs) != 1 || rs[0].Method != "GET" || rs[0].Path != objPath || rs[0].VersionID() != "v1" || rs[0].Range != "bytes=4-11" || rs[0].Fault != "" {
		t.Errorf("record: %+v", rs)
	}
	if u := p.Unversioned("/b/"); len(u) != 0 {
		t.Errorf("Unversioned = %+v", u)
	}
}

func TestStatusTimesThenForward(t *testing.T) {
	p, c, _ := setup(t)
	in := p.Inject(Rule{Method: "GET", Path: "/b/", Fault: SlowDown(), Times: 2})
	p.Inject(Rule{Method: "GET", Path: "/other/", Fault: Forbidden()})
	for i := range 2 {
		_, _, err := get(t.Context(), c, "v1", "")
		if err == nil || !strings.Contains(err.Error(), "SlowDown") || !strings.Contains(err.Error(), "503") {
			t.Fatalf("GET %d: %v, want 503 SlowDown", i, err)
		}
	}
	if _, b, err := get(t.Context(), c, "v1", ""); err != nil || !bytes.Equal(b, objects["v1"]) {
		t.Fatalf("third GET: %v", err)
	}
	if in.Applied() != 2 {
		t.Errorf("Applied = %d, want 2", in.Applied())
	}
	rs := p.Requests()
	if len(rs) != 3 || rs[0].Fault != "503 SlowDown" || rs[2].Fault != "" {
		t.Errorf("record: %+v", rs)
	}
	p.Clear()
	p.Inject(Rule{Fault: Forbidden()})
	if _, _, err := get(t.Context(), c, "v1", ""); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("GET with 403 forever: %v", err)
	}
}

func TestResetBeforeHeaders(t *testing.T) {
	p, c, _ := setup(t)
	p.Inject(Rule{Fault: ResetBeforeHeaders(), Times: 1})
	_, _, err := get(t.Context(), c, "v1", "")
	if err == nil || !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("GET after a reset: %v, want a connection error", err)
	}
	if _, b, err := get(t.Context(), c, "v1", ""); err != nil || !bytes.Equal(b, objects["v1"]) {
		t.Fatalf("GET after the reset rule ran out: %v", err)
	}
}

func TestCutAfter(t *testing.T) {
	p, c, _ := setup(t)
	p.Inject(Rule{Fault: CutAfter(100)})
	_, b, err := get(t.Context(), c, "v1", "")
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(b) != 100 || !bytes.Equal(b, objects["v1"][:100]) {
		t.Fatalf("cut body: %d bytes, %v; want 100 bytes and unexpected EOF", len(b), err)
	}
}

func TestStall(t *testing.T) {
	p, c, _ := setup(t)
	in := p.Inject(Rule{Fault: StallAfter(100, 0), Times: 1})
	ctx, cancel := context.WithCancel(t.Context())
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), VersionId: aws.String("v1")})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() { b, _ := io.ReadAll(out.Body); got <- len(b) }()
	select {
	case n := <-got:
		t.Fatalf("a stalled body ended by itself after %d bytes", n)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	if n := <-got; n != 100 {
		t.Errorf("stalled body gave %d bytes before the client gave up, want 100", n)
	}
	if in.Applied() != 1 {
		t.Errorf("Applied = %d", in.Applied())
	}
	// A bounded stall delivers the rest afterwards.
	p.Inject(Rule{Fault: StallAfter(10, 200*time.Millisecond)})
	start := time.Now()
	if _, b, err := get(t.Context(), c, "v1", ""); err != nil || !bytes.Equal(b, objects["v1"]) {
		t.Fatalf("GET with a bounded stall: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("bounded stall took %v", d)
	}
}

func TestFlipBit(t *testing.T) {
	p, c, _ := setup(t)
	in := p.Inject(Rule{Fault: FlipBitAt(5000), Times: 1})
	// A range that does not hold the offset is not affected and does not
	// use up the rule.
	if _, b, err := get(t.Context(), c, "v1", "bytes=0-4095"); err != nil || !bytes.Equal(b, objects["v1"][:4096]) {
		t.Fatalf("range without the offset: %v", err)
	}
	_, b, err := get(t.Context(), c, "v1", "bytes=4096-8191")
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(objects["v1"][4096:8192])
	want[5000-4096] ^= 1
	if !bytes.Equal(b, want) {
		t.Errorf("flipped range differs from the original in more than the one bit")
	}
	if in.Applied() != 1 {
		t.Errorf("Applied = %d, want 1", in.Applied())
	}
	if _, b, err := get(t.Context(), c, "v1", "bytes=4096-8191"); err != nil || !bytes.Equal(b, objects["v1"][4096:8192]) {
		t.Errorf("a flip-once rule flipped again: %v", err)
	}
	p.Inject(Rule{Fault: FlipBitAt(7)})
	for range 2 {
		if _, b, _ := get(t.Context(), c, "v1", ""); b[7] == objects["v1"][7] || !bytes.Equal(b[8:], objects["v1"][8:]) {
			t.Errorf("flip-always: whole object not flipped at 7 only")
		}
	}
}

func TestIgnoreVersionAndRange(t *testing.T) {
	p, c, seen := setup(t)
	p.Inject(Rule{Fault: IgnoreVersion(), Times: 1})
	out, b, err := get(t.Context(), c, "v1", "bytes=0-7")
	if err != nil {
		t.Fatalf("GET with versionId ignored (a request not signed again gets 403): %v", err)
	}
	if string(b) != "TWO!TWO!" || aws.ToString(out.VersionId) != "v1" {
		t.Errorf("got %q at version %q; want the current bytes under the asked version v1", b, aws.ToString(out.VersionId))
	}
	if s := <-seen; strings.Contains(s, "versionId") {
		t.Errorf("upstream saw a versionId: %q", s)
	}
	if rs := p.Requests(); rs[0].VersionID() != "v1" || rs[0].Fault != "ignore versionId" {
		t.Errorf("the record must keep what the client sent: %+v", rs[0])
	}

	p.Inject(Rule{Fault: IgnoreRangeHeader()})
	out, b, err = get(t.Context(), c, "v1", "bytes=4-7")
	if err != nil || !bytes.Equal(b, objects["v1"]) || out.ContentRange != nil {
		t.Fatalf("GET with Range ignored: %d bytes, Content-Range %v, %v; want the whole object", len(b), out.ContentRange, err)
	}
	if s := <-seen; strings.HasSuffix(s, "bytes=4-7") {
		t.Errorf("upstream saw the Range: %q", s)
	}
}

func TestDown(t *testing.T) {
	p, c, _ := setup(t)
	// A kept-alive connection must not survive the outage either.
	if _, _, err := get(t.Context(), c, "v1", ""); err != nil {
		t.Fatal(err)
	}
	up := p.Down(500 * time.Millisecond)
	addr := strings.TrimPrefix(p.URL(), "http://")
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Fatal("the proxy accepts connections while down")
	}
	if _, _, err := get(t.Context(), c, "v1", ""); err == nil {
		t.Fatal("GET succeeded while down")
	}
	select {
	case <-up:
	case <-time.After(10 * time.Second):
		t.Fatal("not up again after 10 s")
	}
	if _, b, err := get(t.Context(), c, "v1", ""); err != nil || !bytes.Equal(b, objects["v1"]) {
		t.Fatalf("GET after the outage: %v", err)
	}
}

func TestUnversioned(t *testing.T) {
	p, c, _ := setup(t)
	get(t.Context(), c, "v1", "")
	c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	u := p.Unversioned("/b/")
	if len(u) != 1 || u[0].VersionID() != "" {
		t.Fatalf("Unversioned = %+v, want the one GET without versionId", u)
	}
	if u := p.Unversioned("/other/"); len(u) != 0 {
		t.Errorf("Unversioned(/other/) = %+v", u)
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		rng  string
		off  int64
		want bool
	}{
		{"", 123, true}, {"bytes=0-99", 99, true}, {"bytes=0-99", 100, false}, {"bytes=100-", 1 << 40, true},
		{"bytes=100-", 99, false}, {"bytes=-10", 0, true}, {"bytes=0-1,50-60", 55, true}, {"items=0-1", 0, false},
	} {
		if got := covers(tc.rng, tc.off); got != tc.want {
			t.Errorf("covers(%q, %d) = %v", tc.rng, tc.off, got)
		}
	}
	if n, ok := contentRangeStart("bytes 1048576-2097151/5242880"); !ok || n != 1048576 {
		t.Errorf("contentRangeStart = %d, %v", n, ok)
	}
}

// TestCutAndStallSkipShortBodies: a rule that cuts or stalls after N bytes
// is kept for a request that asks for more than N, so that a short tail
// read which happens to arrive first does not use it up.
func TestCutAndStallSkipShortBodies(t *testing.T) {
	for _, tc := range []struct {
		rng  string
		want bool
	}{
		{"", true}, {"bytes=0-1048575", true}, {"bytes=3145728-3150048", false},
		{"bytes=0-99999", false}, {"bytes=0-100000", true}, {"bytes=5-", true},
	} {
		r, _ := http.NewRequest("GET", "http://x/data/ds/big.bin", nil)
		if tc.rng != "" {
			r.Header.Set("Range", tc.rng)
		}
		for _, f := range []Fault{StallAfter(100_000, 0), CutAfter(100_000)} {
			rule := Rule{Method: "GET", Path: "/data/ds/big.bin", Fault: f}
			if got := rule.matches(r); got != tc.want {
				t.Errorf("%v with Range %q: matches %v, want %v", f, tc.rng, got, tc.want)
			}
		}
	}
}
