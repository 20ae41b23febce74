// Package s3test runs a real S3 server for integration tests: versitygw
// (Apache-2.0, pinned at v1.8.0) with its posix backend and object
// versioning turned on, listening on a free 127.0.0.1 port with its own
// temporary directories.
//
// The binary is looked up in this order (first hit wins):
//
//  1. $VERSITYGW
//  2. <repo>/bin/versitygw, where <repo> is the nearest directory at or
//     above the test's working directory that holds go.mod (`make tools`
//     puts the pinned version there, so it wins over whatever is on PATH)
//  3. versitygw on $PATH
//  4. $(go env GOPATH)/bin/versitygw
//  5. /tmp/vgwbin/versitygw
//
// When none exists, Start fails the test if CI=true and skips it otherwise,
// naming the install command ([InstallCommand]).
package s3test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"go/build"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pinfs/pinfs/integration/repo"
)

// Version is the versitygw release the harness is written against.
const Version = "v1.8.0"

// InstallCommand installs the pinned versitygw into $(go env GOPATH)/bin.
const InstallCommand = "go install github.com/versity/versitygw/cmd/versitygw@" + Version

const (
	startTimeout = 10 * time.Second // until the port answers HTTP
	stopTimeout  = 5 * time.Second  // until a killed process is reaped
	opTimeout    = 30 * time.Second // per helper S3 call
	startTries   = 3                // fresh ports tried when the chosen one was taken meanwhile

	// versionIDXattr is the xattr in which versitygw's posix backend keeps
	// the version id of the current version of an object (absent: "null").
	versionIDXattr = "user.version-id"
	nullVersionID  = "null"
)

// Server is a running versitygw on loopback.
type Server struct {
	Endpoint                     string // http://127.0.0.1:PORT
	AccessKey, SecretKey, Region string
	DataDir                      string // posix backend root (buckets are dirs here)
	VersioningDir                string

	bin     string
	addr    string // 127.0.0.1:PORT
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has been reaped
}

// Start runs versitygw (posix backend, versioning on) on a free loopback
// port and returns once the port answers HTTP (at most ~10 s). The server
// is stopped in t.Cleanup; its directories are t.TempDir()s. The gateway's
// own output is kept in a log file and printed when the test failed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("s3test: %v; install it with: %s (or `make tools`)", err, InstallCommand)
		}
		t.Skipf("s3test: %v; install it with: %s (or `make tools`), or set $VERSITYGW", err, InstallCommand)
	}

	s := &Server{
		AccessKey:     "pinfstestaccess",
		SecretKey:     "pinfstestsecret0123456789",
		Region:        "us-east-1",
		DataDir:       t.TempDir(),
		VersioningDir: t.TempDir(),
		bin:           bin,
		logPath:       filepath.Join(t.TempDir(), "versitygw.log"),
	}
	// Registered after the TempDirs, so it runs before they are removed.
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLog(t)
		}
	})

	var lastErr error
	for range startTries {
		addr, err := freeLoopbackAddr()
		if err != nil {
			t.Fatalf("s3test: pick a port: %v", err)
		}
		s.addr = addr
		s.Endpoint = "http://" + addr
		if lastErr = s.launch(); lastErr == nil {
			return s
		}
		s.Stop()
		if !strings.Contains(s.readLog(), "address already in use") {
			break
		}
	}
	s.dumpLog(t)
	t.Fatalf("s3test: start %s: %v", bin, lastErr)
	return nil
}

// Restart starts the gateway again after Stop, on the same port and with the
// same directories, so tests can bring a store back after an outage. It is a
// no-op when the server is running.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return
	}
	if err := s.launch(); err != nil {
		s.Stop()
		s.dumpLog(t)
		t.Fatalf("s3test: restart: %v", err)
	}
}

// launch starts the process on s.addr and waits until it answers.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy of the descriptor

	cmd := exec.Command(s.bin, s.args()...)
	cmd.Env = childEnv()
	cmd.Dir = s.DataDir
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Should the test binary die without running cleanups (go test
	// -timeout panic, SIGKILL), take the gateway down with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the OS thread that forked the child exits, not
	// the process: a test goroutine that locks its thread and returns
	// (TestFaults' interrupted pread does) ends its thread, and if that
	// thread had started the gateway, the gateway was killed mid-test. So
	// fork from a thread locked to a goroutine that lives as long as the
	// child.
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return waitReady(s.Endpoint, done, startTimeout)
}

// args are the versitygw flags: global ones first, then the posix
// subcommand with the backend root as its positional argument.
func (s *Server) args() []string {
	return []string{
		"--port", s.addr,
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--region", s.Region,
		"--quiet",      // no per-request lines on stdout
		"--keep-alive", // as S3 does: without it every request pays a TCP connect, which no real client sees
		"posix",
		"--versioning-dir", s.VersioningDir,
		s.DataDir,
	}
}

// Stop kills the gateway and waits (bounded) until it is reaped; afterwards
// the endpoint refuses connections. Stop is idempotent and safe to call
// concurrently; Restart brings the server back.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
	}
	s.cmd, s.done = nil, nil
}

// Env returns the AWS SDK environment for a child process (the pinfs
// binary) that should talk to this server; append it to os.Environ().
// Endpoint is plain http on an IP address, so the client must use
// path-style addressing (the SDKs have no standard variable for that).
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_DEFAULT_REGION=" + s.Region,
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint,
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// UseEnv points this process's AWS SDK environment at the server for the
// rest of test t (t.Setenv): Env, with no profile, session token or
// shared config files that could name another endpoint or identity. For
// tests that open stores the way the pinfs commands do (store/dial).
func (s *Server) UseEnv(t testing.TB) {
	t.Helper()
	for _, k := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Client returns an aws-sdk-go-v2 S3 client for this server: path-style,
// static credentials, no shared config files or environment consulted.
func (s *Server) Client(t testing.TB) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// RawClient is the raw baseline client of the benchmarks: Client with 64
// idle connections per host (net/http keeps 2, which churns connections
// under parallel GETs) and checksums only where S3 requires them, as
// pinfs's own client (store/s3store) is configured.
func (s *Server) RawClient() *s3.Client { return s.RawClientAt(s.Endpoint) }

// RawClientAt is RawClient sending its requests to endpoint instead, such
// as a proxy in front of the server (the bench's shaping proxy).
func (s *Server) RawClientAt(endpoint string) *s3.Client {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = 256
		tr.MaxIdleConnsPerHost = 64
	})
	return s3.New(s3.Options{
		Region:                     s.Region,
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:                 hc,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// CreateBucket creates bucket and, when versioned, enables versioning on it.
// An unversioned bucket has never had versioning configured, so its objects
// carry the version id "null".
func (s *Server) CreateBucket(t testing.TB, name string, versioned bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	c := s.Client(t)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %q: %v", name, err)
	}
	if !versioned {
		return
	}
	_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket: aws.String(name),
		VersioningConfiguration: &types.VersioningConfiguration{
			Status: types.BucketVersioningStatusEnabled,
		},
	})
	if err != nil {
		t.Fatalf("s3test: enable versioning on %q: %v", name, err)
	}
}

// Put stores data under bucket/key and returns the new version id: a ULID
// in a versioned bucket, "" in an unversioned one (its version is "null").
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) (versionID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out, err := s.Client(t).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
		Body:   bytes.NewReader(data),
	})
	if err != nil {
		t.Fatalf("s3test: put %s/%s: %v", bucket, key, err)
	}
	return aws.ToString(out.VersionId)
}

// Get returns the bytes of bucket/key at versionID ("" for the current
// version).
func (s *Server) Get(t testing.TB, bucket, key, versionID string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if versionID != "" {
		in.VersionId = aws.String(versionID)
	}
	out, err := s.Client(t).GetObject(ctx, in)
	if err != nil {
		t.Fatalf("s3test: get %s/%s@%s: %v", bucket, key, versionID, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("s3test: read %s/%s@%s: %v", bucket, key, versionID, err)
	}
	return b
}

// DeleteVersion permanently deletes one version of bucket/key. Deleting the
// current version makes the newest remaining version current again (versitygw
// copies its bytes back to the object's path under DataDir).
func (s *Server) DeleteVersion(t testing.TB, bucket, key, versionID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := s.Client(t).DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket:    aws.String(bucket),
		Key:       aws.String(key),
		VersionId: aws.String(versionID),
	})
	if err != nil {
		t.Fatalf("s3test: delete %s/%s@%s: %v", bucket, key, versionID, err)
	}
}

// VersionPath returns the file on disk that holds the bytes of bucket/key at
// exactly versionID, current or noncurrent, so a test can corrupt data at
// rest. versionID "" or "null" names the null version.
//
// Layout of versitygw v1.8.0's posix backend (backend/posix/posix.go):
//
//   - The current version of an object is the plain file
//     DataDir/<bucket>/<key> (key split on "/" into directories). Its version
//     id is in the xattr "user.version-id"; when that xattr is absent the
//     version id is "null" (unversioned bucket, or written while versioning
//     was suspended). ETag, checksums and metadata are further user.* xattrs.
//   - Each noncurrent version is a full copy (not a link; PutObject snapshots
//     the old current file by copying it) at
//     VersioningDir/<bucket>/<h[0:2]>/<h[2:4]>/<h[4:6]>/<h>/<versionID>,
//     h = lowercase hex SHA-256 of the key, carrying the same xattrs.
//   - Version ids are ULIDs (26 chars, Crockford base32, time ordered).
//   - Deleting the current version copies the last entry of the key's
//     version directory (by name: the newest ULID, but "null" sorts after
//     all ULIDs) to DataDir/<bucket>/<key> and removes it from there, so
//     the path of a version can move from VersioningDir to DataDir.
//
// Call VersionPath again after any write or delete of that key. It fails the
// test when the version has no file.
func (s *Server) VersionPath(t testing.TB, bucket, key, versionID string) string {
	t.Helper()
	if versionID == "" {
		versionID = nullVersionID
	}
	cur := filepath.Join(s.DataDir, bucket, filepath.FromSlash(key))
	if fi, err := os.Stat(cur); err == nil && fi.Mode().IsRegular() {
		id, err := getXattr(cur, versionIDXattr)
		switch {
		case errors.Is(err, syscall.ENODATA):
			id = nullVersionID
		case err != nil:
			t.Fatalf("s3test: read %s of %s: %v", versionIDXattr, cur, err)
		}
		if id == versionID {
			return cur
		}
	}
	p := filepath.Join(s.VersioningDir, bucket, versionKey(key), versionID)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("s3test: no file for %s/%s@%s (looked at %s and %s)", bucket, key, versionID, cur, p)
	}
	return p
}

// versionKey mirrors genObjVersionKey in versitygw's posix backend.
func versionKey(key string) string {
	h := fmt.Sprintf("%x", sha256.Sum256([]byte(key)))
	return filepath.Join(h[:2], h[2:4], h[4:6], h)
}

func getXattr(path, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := syscall.Getxattr(path, name, buf)
		if errors.Is(err, syscall.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
}

// findBinary returns the first versitygw found in the documented order.
func findBinary() (string, error) {
	if p := os.Getenv("VERSITYGW"); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("$VERSITYGW=%s is not an executable file", p)
	}
	var candidates []string
	if root, err := repo.Root(); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", "versitygw"))
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		candidates = append(candidates, p)
	}
	if gopath := filepath.SplitList(build.Default.GOPATH); len(gopath) > 0 && gopath[0] != "" {
		candidates = append(candidates, filepath.Join(gopath[0], "bin", "versitygw"))
	}
	candidates = append(candidates, "/tmp/vgwbin/versitygw")
	for _, p := range candidates {
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", errors.New("versitygw not found ($VERSITYGW, <repo>/bin, PATH, GOPATH/bin, /tmp/vgwbin)")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// childEnv is the test's environment without the variables versitygw reads
// its configuration from, so only the flags in args apply.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VGW_") || strings.HasPrefix(name, "ROOT_") ||
			name == "LOGFILE" || name == "WEBHOOK" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// freeLoopbackAddr returns 127.0.0.1:PORT for a port that was free a moment ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// waitReady polls endpoint until any HTTP response arrives, the process
// exits, or timeout passes.
func waitReady(endpoint string, exited <-chan struct{}, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			return errors.New("versitygw exited during startup")
		default:
		}
		resp, err := hc.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer on %s within %v: %v", endpoint, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) readLog() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

func (s *Server) dumpLog(t testing.TB) {
	t.Helper()
	log := s.readLog()
	const max = 8 << 10
	if len(log) > max {
		log = "…" + log[len(log)-max:]
	}
	t.Logf("versitygw %s output (%s):\n%s", strings.Join(s.args(), " "), s.logPath, log)
}
