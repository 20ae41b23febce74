package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// passthroughLog returns the "passthrough on" and "passthrough off" lines
// of the JSON log file p.
func passthroughLog(t testing.TB, p string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for l := range strings.Lines(string(b)) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue // the "run ... serving" line of stdout
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, "passthrough ") {
			out = append(out, m)
		}
	}
	return out
}

// passthroughStatus is the passthrough part of pinfs status --json.
type passthroughStatus struct {
	Passthrough *struct {
		Enabled bool   `json:"enabled"`
		Reason  string `json:"reason"`
		Opens   int64  `json:"opens"`
	} `json:"passthrough"`
}

// TestPassthroughProbe is issue 25 item 3 on a real mount: a mount as root
// on this kernel says once, at info, "passthrough on", and its status
// says so; --passthrough=false and --cache-disk 0 say once why it is off,
// in the log and the status, and with --passthrough=false the run record
// has no trace of passthrough.
func TestPassthroughProbe(t *testing.T) {
	t.Parallel()
	f := pinFixture(t)
	for _, c := range []struct {
		name   string
		flags  []string
		msg    string
		reason string
	}{
		{"default", nil, "passthrough on", ""},
		{"disabled", []string{"--passthrough=false"}, "passthrough off", "disabled (--passthrough=false)"},
		{"no disk", []string{"--cache-disk", "0"}, "passthrough off", "no disk cache (--cache-disk 0): no files to hand over"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cache, record := filepath.Join(t.TempDir(), "cache"), filepath.Join(t.TempDir(), "run.jsonl")
			dir, d := f.mount(t, cache, record, append([]string{"--log-format", "json", "--flush-interval", "1h"}, c.flags...)...)
			if got, err := readFile(t, filepath.Join(dir, "README")); err != nil || !bytes.Equal(got, f.data["README"]) {
				t.Fatalf("README: %d bytes, %v", len(got), err)
			}
			var st passthroughStatus
			if err := json.Unmarshal([]byte(mustPinfs(t, f.env, "status", dir, "--json").stdout), &st); err != nil {
				t.Fatal(err)
			}
			p := st.Passthrough
			if p == nil || p.Enabled != (c.reason == "") || p.Reason != c.reason || p.Opens != 0 {
				t.Errorf("status passthrough %+v, want enabled %v, reason %q, no opens", p, c.reason == "", c.reason)
			}
			if text := mustPinfs(t, f.env, "status", dir).stdout; !strings.Contains(text, "  "+c.msg) {
				t.Errorf("status text lacks %q:\n%s", c.msg, text)
			}
			d.stop(t, 30*time.Second)
			lines := passthroughLog(t, d.log)
			if len(lines) != 1 || lines[0]["msg"] != c.msg || lines[0]["level"] != "INFO" || (c.reason != "" && lines[0]["reason"] != c.reason) {
				t.Errorf("log lines %v, want one info line %q reason %q", lines, c.msg, c.reason)
			}
			if c.name != "disabled" {
				return
			}
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("passthrough")) {
				t.Errorf("a --passthrough=false run record mentions passthrough:\n%s", b)
			}
		})
	}
}

// TestNonRootPassthroughOff: a mount by a user other than root serves as
// before, and its log says once why passthrough is off.
func TestNonRootPassthroughOff(t *testing.T) {
	m := nonRootFixture(t)
	m.f.env = append(m.f.env, "PINFS_LOG_FORMAT=json")
	_, log := m.mount(t)
	m.wantServed(t, "README")
	lines := passthroughLog(t, log)
	const want = "no CAP_SYS_ADMIN: the kernel takes backing files only from root"
	if len(lines) != 1 || lines[0]["msg"] != "passthrough off" || lines[0]["level"] != "INFO" || lines[0]["reason"] != want {
		t.Errorf("log lines %v, want one info line passthrough off with reason %q", lines, want)
	}
	if r := m.asUser(t, "unmount", m.dir); r.code != 0 {
		t.Fatalf("pinfs unmount as nobody: %v", r)
	}
	m.waitRunEnd(t)
}
