package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
)

// s3fsParallel is s3fs's parallel_count in every s3fs mount of the bench
// (the baseline: s3fs 1.90 from Debian, parallel_count 8).
const s3fsParallel = 8

// s3fsEnvSkip set to 0 skips every s3fs measurement (its rows say so):
// s3fs takes minutes over the shaped link, too long to iterate on pinfs.
const s3fsEnvSkip = "PINFS_BENCH_S3FS"

// s3fsMount is one s3fs daemon serving a bucket prefix read-only. s3fs
// does not verify what it serves and reads the current version of each
// key (the bench's objects have one version each).
type s3fsMount struct {
	dir  string
	pid  int
	done bool
}

// s3fsConf is how an s3fs mount reaches the server: its endpoint, its
// parallel_count and its multipart_size in MB (0: s3fs's default).
type s3fsConf struct {
	url       string
	parallel  int
	multipart int
}

// s3fsLoopback is the s3fs of the loopback rows: the server itself,
// parallel_count s3fsParallel.
func (b *bench) s3fsLoopback() s3fsConf { return s3fsConf{url: b.s.Endpoint, parallel: s3fsParallel} }

// opts is the -o list of an s3fs mount.
func (c s3fsConf) opts(passwd string) string {
	o := fmt.Sprintf("ro,url=%s,use_path_request_style,passwd_file=%s,parallel_count=%d,retries=2", c.url, passwd, c.parallel)
	if c.multipart > 0 {
		o += fmt.Sprintf(",multipart_size=%d", c.multipart)
	}
	return o
}

// mountS3fs mounts bucket:/prefix with the loopback s3fs (mountS3fsConf).
func (b *bench) mountS3fs(t *testing.T, bucket, prefix string) (*s3fsMount, error) {
	t.Helper()
	return b.mountS3fsConf(t, b.s3fsLoopback(), bucket, prefix)
}

// mountS3fsConf mounts bucket:/prefix with s3fs configured by conf and
// waits (bounded) until it serves. It returns an error, not a test
// failure, when s3fs is missing or fails: the rows then say why s3fs has
// no figure.
func (b *bench) mountS3fsConf(t *testing.T, conf s3fsConf, bucket, prefix string) (*s3fsMount, error) {
	t.Helper()
	if _, err := exec.LookPath("s3fs"); err != nil {
		return nil, errors.New("s3fs not installed (make bench-deps)")
	}
	if os.Getenv(s3fsEnvSkip) == "0" {
		return nil, errors.New("skipped (" + s3fsEnvSkip + "=0)")
	}
	passwd := filepath.Join(t.TempDir(), "passwd-s3fs")
	if err := os.WriteFile(passwd, []byte(b.s.AccessKey+":"+b.s.SecretKey+"\n"), 0o600); err != nil {
		return nil, err
	}
	dir := filepath.Join(t.TempDir(), "s3fs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &s3fsMount{dir: dir}
	t.Cleanup(func() { m.unmount(t) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "s3fs", bucket+":/"+prefix, dir, "-o", conf.opts(passwd))
	cmd.Env = s3fsEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("s3fs %s:/%s: %v: %s", bucket, prefix, err, firstLine(strings.TrimSpace(out.String())))
	}
	deadline := time.Now().Add(30 * time.Second)
	for !fusetest.Mounted(dir) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("s3fs %s:/%s: not mounted 30 s after it returned: %s", bucket, prefix, firstLine(out.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.pid = findPid("s3fs", dir)
	if m.pid == 0 {
		return nil, fmt.Errorf("s3fs %s:/%s: mounted but no s3fs process names %s", bucket, prefix, dir)
	}
	return m, nil
}

// s3fsEnv is this process's environment without AWS_* variables: s3fs
// takes its credentials from the passwd file only, and AWS_CA_BUNDLE
// (set for the Go SDK) must not point its curl at a bundle for a plain
// http endpoint.
func s3fsEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS") {
			env = append(env, kv)
		}
	}
	return env
}

// unmount unmounts s3fs and waits (bounded) for its daemon to exit. It
// runs once.
func (m *s3fsMount) unmount(t testing.TB) {
	if m.done {
		return
	}
	m.done = true
	if fusetest.Mounted(m.dir) {
		if r := run(unmountTimeout, nil, "umount", m.dir); r.err != nil {
			t.Logf("umount %s (s3fs): %v %s", m.dir, r.err, r.stderr)
		}
	}
	deadline := time.Now().Add(exitTimeout)
	for m.pid > 0 && alive(m.pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if m.pid > 0 && alive(m.pid) {
		t.Logf("s3fs %d still running %v after umount; killing it", m.pid, exitTimeout)
		syscall.Kill(m.pid, syscall.SIGKILL)
	}
	fusetest.ForceUnmount(t, m.dir)
}

// s3fsCell is what the s3fs column shows for a measurement: the figure,
// or why there is none.
func s3fsCell(figure string, err error) string {
	if err != nil {
		return "not run: " + err.Error()
	}
	return figure
}
