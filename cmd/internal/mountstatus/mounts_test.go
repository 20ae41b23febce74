package mountstatus

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/fs/mountinfo"
)

// TestMountsOf: the pinfs mounts of one digest in the mount table, once
// each; other file systems and digests are left out.
func TestMountsOf(t *testing.T) {
	table := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"36 35 0:52 / /data/a rw,nosuid shared:1 - fuse.pinfs sha256:aa rw,user_id=0",
		"37 35 0:53 / /data/b rw - fuse.pinfs sha256:bb rw,user_id=0",
		"38 35 0:54 / /data/c\\040d rw - fuse.pinfs sha256:aa rw,user_id=0",
		"39 35 0:55 / /data/e rw - fuse.sshfs sha256:aa rw",
		"40 36 0:56 / /data/a rw - fuse.pinfs sha256:aa rw,user_id=0",
	}
	if err := os.WriteFile(table, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := mountinfoPath
	mountinfoPath = table
	t.Cleanup(func() { mountinfoPath = old })
	got, err := MountsOf("sha256:aa")
	if err != nil || strings.Join(got, ",") != "/data/a,/data/c d" {
		t.Fatalf("MountsOf = %q, %v", got, err)
	}
}

// TestMountsOfRun: of the pinfs mounts of a digest, those serving the run
// are returned, but only when the uid that mounted them (the table's
// user_id) is the uid of the process whose pid they answer with: another
// user's file system that names itself fuse.pinfs after the digest and
// answers with the run's id and the real daemon's pid is not the run's
// mount, and neither is what is mounted over a mount of the run.
func TestMountsOfRun(t *testing.T) {
	me, other := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getuid()+1000)
	table := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"36 35 0:52 / /data/fake rw - fuse.pinfs sha256:aa rw,user_id=" + other + ",group_id=" + other + ",allow_other",
		"37 35 0:53 / /data/real rw - fuse.pinfs sha256:aa rw,user_id=" + me + ",group_id=0",
		"38 35 0:54 / /data/run2 rw - fuse.pinfs sha256:aa rw,user_id=" + me,
		"39 35 0:55 / /data/nouid rw - fuse.pinfs sha256:aa rw",
		"40 35 0:56 / /data/over rw - fuse.pinfs sha256:aa rw,user_id=" + me,
		"41 40 0:57 / /data/over rw - fuse.pinfs sha256:aa rw,user_id=" + other + ",allow_other",
		"42 35 0:58 / /data/deadpid rw - fuse.pinfs sha256:aa rw,user_id=" + me,
	}
	if err := os.WriteFile(table, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := mountinfoPath
	mountinfoPath = table
	t.Cleanup(func() { mountinfoPath = old })
	askFunc = func(dir string) ([]byte, error) {
		st := Status{Serving: true, Digest: "sha256:aa", RunID: "r1", PID: os.Getpid()}
		switch dir {
		case "/data/run2":
			st.RunID = "r2"
		case "/data/deadpid":
			st.PID = 1 << 30 // no such process
		}
		return json.Marshal(st)
	}
	t.Cleanup(func() { askFunc = ask })

	got := MountsOfRun(context.Background(), "sha256:aa", "r1", time.Second)
	var dirs []string
	for _, m := range got {
		dirs = append(dirs, m.Dir)
		if m.Status == nil || m.Status.PID != os.Getpid() || time.Until(m.Until) > time.Second || m.Until.IsZero() {
			t.Errorf("%s: status %+v", m.Dir, m.Status)
		}
	}
	if strings.Join(dirs, ",") != "/data/real" {
		t.Errorf("MountsOfRun = %q, want only /data/real: the others are another user's, another run's, or name no user", dirs)
	}
}

// TestMountedBy: the effective uid counts as the real one does.
func TestMountedBy(t *testing.T) {
	status := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(status, []byte("Name:\tpinfs\nUid:\t1000\t0\t0\t0\nGid:\t1000\t0\t0\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := procStatus
	procStatus = func(int) string { return status }
	t.Cleanup(func() { procStatus = old })
	for uid, want := range map[string]bool{"1000": true, "0": true, "65534": false, "": false} {
		e := mountinfoEntry(uid)
		if got := mountedBy(e, 7); got != want {
			t.Errorf("mountedBy(user_id=%q) = %v, want %v", uid, got, want)
		}
	}
}

func mountinfoEntry(uid string) mountinfo.Entry {
	return mountinfo.Entry{Point: "/m", FSType: FSType, Source: "sha256:aa", UserID: uid}
}
