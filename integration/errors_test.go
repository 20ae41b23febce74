package integration

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
)

// sdkNoise is text of the SDK's error chain, which a user-facing message
// leaves out (--debug and the log keep it).
var sdkNoise = []string{"operation error", "RequestID", "HostID", "StatusCode", "api error"}

// oneLineError fails unless r failed with exit code and stderr is exactly
// one line that contains want and none of the SDK's chain.
func oneLineError(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\n%v", r.code, code, r)
	}
	msg := strings.TrimSpace(r.stderr)
	if strings.Contains(msg, "\n") {
		t.Errorf("stderr is not one line:\n%s", r.stderr)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	for _, noise := range sdkNoise {
		if strings.Contains(msg, noise) {
			t.Errorf("stderr contains %q:\n%s", noise, r.stderr)
		}
	}
}

// refusedEndpoint returns an http://127.0.0.1:PORT on which nothing listens.
func refusedEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// TestErrors tries the common mistakes of a new user on a real S3 server
// and checks that each says, in one line, what is wrong and where.
func TestErrors(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	s := s3test.Start(t)
	env := s.Env()
	dataset(t, s) // buckets data and store
	s.CreateBucket(t, "plain", false)
	s.Put(t, "plain", "ds/a", []byte("unversioned"))
	st := "s3://store/p"
	d := mustPinfs(t, env, "pin", "s3://data/ds/", "--store", st).lastLine()
	unknown := "sha256:" + strings.Repeat("0", 64)
	work := t.TempDir()
	mnt := filepath.Join(work, "mnt")
	live := filepath.Join(work, "live")
	srcDir := filepath.Join(work, "src")
	for _, dir := range []string{mnt, live, srcDir} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(srcDir, "a"), []byte("a local file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fusetest.ForceUnmount(t, mnt) }) // should a row mount after all
	startMount(t, env, live, d, live, "--store", st, "--cache-dir", t.TempDir())

	missing := filepath.Join(work, "missing")
	refused := refusedEndpoint(t)
	noCreds := []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent",
		"AWS_CONFIG_FILE=/nonexistent", "AWS_EC2_METADATA_DISABLED=true"}
	// mount is pinfs mount DIGEST at mnt in the background (as a user runs
	// it) with a fresh cache, so that no row is served from another's.
	mount := func(digest, store string) []string {
		return []string{"mount", digest, mnt, "--store", store, "--cache-dir", t.TempDir()}
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"wrong store prefix", mount(d, "s3://store/wrong"), nil, 1,
			"pinfs mount: no manifest " + d + " in store s3://store/wrong"},
		{"unknown digest", mount(unknown, st), nil, 1,
			"pinfs mount: no manifest " + unknown + " in store " + st},
		{"unknown digest, ls", []string{"ls", unknown, "--store", st}, nil, 1,
			"pinfs ls: no manifest " + unknown + " in store " + st},
		{"missing bucket", mount(d, "s3://nonexistent-bucket/p"), nil, 1,
			"bucket nonexistent-bucket does not exist"},
		{"wrong access key", []string{"ls", d, "--store", st}, []string{"AWS_ACCESS_KEY_ID=AKIAWRONG"}, 1,
			"s3://store: the access key ID is not known to the server (check AWS_ACCESS_KEY_ID or the profile)"},
		{"wrong secret", []string{"ls", d, "--store", st}, []string{"AWS_SECRET_ACCESS_KEY=wrong"}, 1,
			"s3://store: the secret key is wrong (the signature does not match; check AWS_SECRET_ACCESS_KEY or the profile)"},
		{"wrong secret, mount", mount(d, st), []string{"AWS_SECRET_ACCESS_KEY=wrong"}, 1,
			"s3://store: the secret key is wrong (the signature does not match; check AWS_SECRET_ACCESS_KEY or the profile)"},
		{"missing credentials", []string{"ls", d, "--store", st}, noCreds, 1,
			"no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or give the pod a role"},
		{"endpoint refused", []string{"ls", d, "--store", st},
			[]string{"AWS_ENDPOINT_URL_S3=" + refused, "AWS_ENDPOINT_URL=" + refused}, 1,
			"cannot reach S3 at " + refused + ": connection refused"},
		{"unversioned source bucket", []string{"pin", "s3://plain/ds/", "--store", st}, nil, 1,
			"pinfs pin: bucket plain does not have versioning enabled (status: off); enable it: pinfs pins exact object versions"},
		{"unversioned store bucket", []string{"pin", srcDir, "--store", "s3://plain/p"}, nil, 1,
			"bucket plain does not have versioning enabled (status: off); enable it: pinfs pins exact object versions"},
		{"missing mountpoint", []string{"mount", d, missing, "--store", st, "--cache-dir", t.TempDir()}, nil, 1,
			"pinfs mount: mountpoint " + missing + " does not exist"},
		{"mountpoint already mounted", []string{"mount", d, live, "--store", st, "--cache-dir", t.TempDir()}, nil, 1,
			"pinfs mount: mountpoint " + live + " is already mounted (pinfs " + d + "); unmount it first: pinfs unmount " + live},
		{"missing local store", []string{"ls", d, "--store", missing}, nil, 1,
			"pinfs ls: no manifest " + d + " in store " + missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oneLineError(t, pinfs(t, append(append([]string{}, env...), tc.env...), tc.args...), tc.code, tc.want)
			if fusetest.Mounted(mnt) {
				t.Errorf("%s is mounted after a failed mount", mnt)
				fusetest.ForceUnmount(t, mnt)
			}
		})
	}

	// --debug adds the SDK's error (request and host ids) on a log line
	// before the one-line message.
	r := pinfs(t, env, "ls", d, "--store", "s3://nonexistent-bucket/p", "--debug")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if r.code != 1 || !strings.HasPrefix(last, "pinfs ls: ") || !strings.Contains(last, "bucket nonexistent-bucket does not exist") {
		t.Errorf("--debug: want the one-line error last, exit 1:\n%v", r)
	}
	debug := strings.Join(lines[:len(lines)-1], "\n")
	for _, w := range []string{"error detail", "bucket nonexistent-bucket does not exist", "operation error S3: GetObject", "RequestID", "NoSuchBucket"} {
		if !strings.Contains(debug, w) {
			t.Errorf("--debug output lacks %q:\n%s", w, r.stderr)
		}
	}
}
