package mountstatus

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeMountinfo points the mount table at a file listing lines.
func fakeMountinfo(t *testing.T, lines ...string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := mountinfoPath
	mountinfoPath = p
	t.Cleanup(func() { mountinfoPath = old })
}

// pinfsLine is a mountinfo line of a pinfs mount at dir (escaped).
func pinfsLine(dir string) string {
	return "1094 29 0:71 / " + dir + " ro,nosuid,nodev,relatime shared:600 - fuse.pinfs sha256:ab ro,user_id=0,group_id=0,max_read=1048576"
}

// wantQueryErr runs Query on dir and checks the error, its text and the
// Status returned with it.
func wantQueryErr(t *testing.T, ctx context.Context, dir string, sentinel error, msg string) {
	t.Helper()
	st, err := Query(ctx, dir)
	if !errors.Is(err, sentinel) || err.Error() != msg {
		t.Fatalf("Query(%s): %v, want %q (%v)", dir, err, msg, sentinel)
	}
	abs, _ := filepath.Abs(dir)
	if st == nil || st.Serving || st.Error != msg || st.Mountpoint != abs {
		t.Errorf("Query(%s) status %+v, want not serving, error %q, mountpoint %s", dir, st, msg, abs)
	}
}

func TestQueryMissingPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	wantQueryErr(t, context.Background(), dir, ErrNotExist, dir+" does not exist")
}

func TestQueryNotAMount(t *testing.T) {
	dir := t.TempDir()
	wantQueryErr(t, context.Background(), dir, ErrNotMount, dir+" is not a pinfs mount")

	// A regular file, and a directory below a mount, are not a mount root.
	f := filepath.Join(dir, "file")
	os.WriteFile(f, nil, 0o600)
	fakeMountinfo(t, pinfsLine(dir))
	wantQueryErr(t, context.Background(), f, ErrNotMount, f+" is not a pinfs mount")
}

func TestQueryRelativePathIsMadeAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.Mkdir("sub", 0o700)
	wantQueryErr(t, context.Background(), "sub", ErrNotMount, filepath.Join(dir, "sub")+" is not a pinfs mount")
}

// TestQueryListedWithoutStatus: a directory listed as a pinfs mount that
// has no status attribute (a pinfs without Options.Status, or not FUSE at
// all) is not a pinfs mount to Query; a symbolic link to it resolves.
func TestQueryListedWithoutStatus(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "with space")
	os.Mkdir(dir, 0o700)
	fakeMountinfo(t, pinfsLine(strings.ReplaceAll(dir, " ", `\040`)))
	wantQueryErr(t, context.Background(), dir, ErrNotMount, dir+" is not a pinfs mount")

	var seen []string
	askFunc = func(d string) ([]byte, error) { seen = append(seen, d); return ask(d) }
	t.Cleanup(func() { askFunc = ask })
	link := filepath.Join(base, "link")
	os.Symlink(dir, link)
	wantQueryErr(t, context.Background(), link, ErrNotMount, link+" is not a pinfs mount")
	if len(seen) != 1 || seen[0] != link {
		t.Errorf("asked %v", seen)
	}
}

func TestQueryHungDaemon(t *testing.T) {
	release := make(chan struct{})
	askFunc = func(string) ([]byte, error) { <-release; return nil, syscall.EIO }
	t.Cleanup(func() { close(release); askFunc = ask })
	dir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st, err := Query(ctx, dir)
	prefix := dir + ": the pinfs daemon did not answer within "
	if !errors.Is(err, ErrNoAnswer) || !strings.HasPrefix(err.Error(), prefix) || st.Serving || st.Error != err.Error() {
		t.Fatalf("hung daemon: %v (status %+v), want %q…", err, st, prefix)
	}
	if d, perr := time.ParseDuration(strings.TrimPrefix(err.Error(), prefix)); perr != nil || d > 50*time.Millisecond {
		t.Errorf("hung daemon: %q names no bound of at most 50ms (%v)", err, perr)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := Query(ctx, dir); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoAnswer) {
		t.Errorf("canceled: %v", err)
	}
}

func TestQueryAnswers(t *testing.T) {
	src := testSource(time.Now())
	askFunc = func(string) ([]byte, error) { return src.JSON(), nil }
	t.Cleanup(func() { askFunc = ask })
	dir := t.TempDir()
	st, err := Query(context.Background(), dir)
	if err != nil || !st.Serving || st.Mountpoint != dir || st.Digest != src.Digest || st.Error != "" {
		t.Fatalf("Query: %+v, %v", st, err)
	}

	for _, c := range []struct {
		answer, want string
	}{
		{`{"serving":true`, dir + ": the pinfs daemon's status is not valid JSON: "},
		{`{"serving":false,"digest":"sha256:ab"}`, dir + ": the pinfs daemon says it is not serving"},
	} {
		askFunc = func(string) ([]byte, error) { return []byte(c.answer), nil }
		st, err := Query(context.Background(), dir)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || st.Serving || st.Error != err.Error() {
			t.Errorf("answer %s: %+v, %v; want %q", c.answer, st, err, c.want)
		}
	}
}

// TestQueryStoreRefused: a daemon whose last fetch the store refused for
// access is not ready, with the refusal on the one line; any other store
// error is reported and the mount serves.
func TestQueryStoreRefused(t *testing.T) {
	src := testSource(time.Now())
	se := &StoreError{Kind: "access", Time: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC),
		Message: "s3://st: the secret key is wrong (the signature does not match; check AWS_SECRET_ACCESS_KEY or the profile)"}
	src.StoreError = func() *StoreError { return se }
	askFunc = func(string) ([]byte, error) { return src.JSON(), nil }
	t.Cleanup(func() { askFunc = ask })
	dir := t.TempDir()
	want := dir + ": the store refuses the mount's credentials (last refused at 2026-12-02T08:00:00Z; " +
		"reads of bytes not cached fail until a fetch succeeds): " + se.Message
	st, err := Query(context.Background(), dir)
	if !errors.Is(err, ErrStoreRefused) || err.Error() != want || st.Serving || st.Error != want ||
		st.StoreError == nil || *st.StoreError != *se || st.RunID != src.RunID {
		t.Fatalf("refused: %v (status %+v)\nwant %q", err, st, want)
	}

	for _, kind := range []string{"unreachable", "missing", "other"} {
		se = &StoreError{Kind: kind, Message: "m", Time: time.Now()}
		st, err := Query(context.Background(), dir)
		if err != nil || !st.Serving || st.StoreError == nil || st.StoreError.Kind != kind {
			t.Errorf("%s: %v (status %+v), want serving with the store error", kind, err, st)
		}
	}
}

func TestClassify(t *testing.T) {
	gone := "/x: the pinfs daemon is gone (transport endpoint is not connected); remove the dead mount with pinfs unmount /x"
	for _, c := range []struct {
		err      error
		sentinel error
		want     string
	}{
		{&os.PathError{Op: "lstat", Path: "/x", Err: syscall.ENOENT}, ErrNotExist, "/x does not exist"},
		{&os.PathError{Op: "lstat", Path: "/x", Err: syscall.ENOTCONN}, ErrGone, gone},
		{syscall.ECONNABORTED, ErrGone, gone},
		{syscall.ENODATA, ErrNotMount, "/x is not a pinfs mount"},
		{syscall.ENOTSUP, ErrNotMount, "/x is not a pinfs mount"},
		{&os.PathError{Op: "lstat", Path: "/x/y", Err: syscall.EACCES}, syscall.EACCES, "/x: permission denied"},
	} {
		got := classify("/x", c.err)
		if !errors.Is(got, c.sentinel) || got.Error() != c.want {
			t.Errorf("classify(%v) = %v, want %q", c.err, got, c.want)
		}
	}
}
