package dial

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/s3store"
	"github.com/pinfs/pinfs/verify/b3"
)

var ctx = context.Background()

// brokenAWSEnv makes any attempt to load the AWS configuration fail.
func brokenAWSEnv(t *testing.T) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("[default]\nregion = us-east-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfg)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", cfg)
	t.Setenv("AWS_PROFILE", "no-such-profile")
}

// fakeS3 serves bucket "data", key "k", version "v1" with the given bytes,
// and records the requests.
type fakeS3 struct {
	mu   sync.Mutex
	reqs []string
}

func startFake(t *testing.T, body string) *fakeS3 {
	t.Helper()
	f := &fakeS3{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Method+" "+r.URL.String())
		f.mu.Unlock()
		if r.URL.Path != "/data/k" || r.URL.Query().Get("versionId") != "v1" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "<Error><Code>NoSuchVersion</Code></Error>")
			return
		}
		w.Header().Set("x-amz-version-id", "v1")
		w.Header().Set("ETag", `"e"`)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_S3": srv.URL, "AWS_ENDPOINT_URL": "", "AWS_PROFILE": "", "AWS_REGION": "",
		"AWS_ACCESS_KEY_ID": "AKIDFAKE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	return f
}

func TestOpenParses(t *testing.T) {
	dir := t.TempDir()
	for _, raw := range []string{dir, "file://" + dir, "file://localhost" + dir} {
		s, err := Open(ctx, raw)
		if err != nil {
			t.Errorf("Open(%q): %v", raw, err)
			continue
		}
		if s.String() != dir {
			t.Errorf("Open(%q).String() = %q; want %q", raw, s.String(), dir)
		}
	}
	t.Chdir(dir)
	if s, err := Open(ctx, "rel/store"); err != nil || s.String() != filepath.Join(dir, "rel", "store") {
		t.Errorf("Open(relative) = %v, %v", s, err)
	}
	for _, raw := range []string{"", "s3://", "s3:///prefix", "gs://b/p", "ftp://host/x", "file://host/x", "file:rel"} {
		if _, err := Open(ctx, raw); err == nil {
			t.Errorf("Open(%q): want error", raw)
		}
	}
}

func TestOpenS3(t *testing.T) {
	startFake(t, "")
	s, err := Open(ctx, "s3://bkt/pinfs/store/")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*s3store.Bucket); !ok || s.String() != "s3://bkt/pinfs/store" {
		t.Errorf("Open(s3://bkt/pinfs/store/) = %T %q", s, s.String())
	}
	if s, err := Open(ctx, "s3://bkt"); err != nil || s.String() != "s3://bkt/" {
		t.Errorf("Open(s3://bkt) = %v, %v", s, err)
	}
}

// TestLocalNeedsNoAWS: with an AWS configuration that cannot load, a local
// store still works for blobs and CAS members, and only an S3 member read
// reports the configuration error.
func TestLocalNeedsNoAWS(t *testing.T) {
	brokenAWSEnv(t)
	s, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "manifests/m", []byte("m")); err != nil {
		t.Fatal(err)
	}
	obj, err := s.PutCAS(ctx, b3.Of([]byte("cas bytes")).String(), strings.NewReader("cas bytes"), 9)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.ReadRange(ctx, obj, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "bytes" {
		t.Errorf("CAS read = %q, %v", got, err)
	}
	if _, err := s.Stat(ctx, obj); err != nil {
		t.Errorf("CAS stat: %v", err)
	}
	if _, err := s.Stat(ctx, store.Object{Bucket: "b", Key: "k"}); !errors.Is(err, store.ErrNoVersion) {
		t.Errorf("Stat of an unpinned S3 object = %v; want ErrNoVersion", err)
	}
	s3obj, err := store.NewVersion("data", "k", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRange(ctx, s3obj, 0, -1); err == nil || !strings.Contains(err.Error(), "S3 client") {
		t.Errorf("S3 member with a broken AWS config = %v; want the client error", err)
	}
	if _, err := OpenLister(ctx); err == nil {
		t.Error("OpenLister with a broken AWS config: want error")
	}
}

// TestLocalReadsS3Members: a local store reads S3 members through S3 at
// their version, and keeps CAS members local.
func TestLocalReadsS3Members(t *testing.T) {
	f := startFake(t, "s3 member bytes")
	dir := t.TempDir()
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*local); !ok {
		t.Fatalf("Open(dir) = %T", s)
	}
	obj, err := store.NewVersion("data", "k", "v1")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rc, err := s.ReadRange(ctx, obj, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != "s3 member bytes" {
			t.Errorf("S3 member = %q, %v", got, err)
		}
	}
	if info, err := s.Stat(ctx, obj); err != nil || info.Size != 15 || info.ETag != `"e"` {
		t.Errorf("Stat = %+v, %v", info, err)
	}
	gone, _ := store.NewVersion("data", "k", "v2")
	if _, err := s.Stat(ctx, gone); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat(other version) = %v; want ErrNotFound", err)
	}
	cas := store.Object{CAS: "blake3:" + strings.Repeat("2", 64)}
	if _, err := s.Stat(ctx, cas); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing CAS member = %v; want ErrNotFound", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reqs {
		if !strings.Contains(r, "versionId=") {
			t.Errorf("request without versionId: %s", r)
		}
		if strings.Contains(r, "cas") {
			t.Errorf("a CAS member went to S3: %s", r)
		}
	}
	if len(f.reqs) != 4 {
		t.Errorf("%d S3 requests; want 4: %v", len(f.reqs), f.reqs)
	}
}

// TestLazyClientRetries: a failed creation is not cached.
func TestLazyClientRetries(t *testing.T) {
	calls := 0
	l := lazyClient{newClient: func(context.Context) (*s3store.Client, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("first try fails")
		}
		return &s3store.Client{}, nil
	}}
	if _, err := l.get(ctx); err == nil {
		t.Fatal("first get: want error")
	}
	c1, err := l.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := l.get(ctx)
	if c1 != c2 || calls != 2 {
		t.Errorf("client not reused: %p %p, %d calls", c1, c2, calls)
	}
}
