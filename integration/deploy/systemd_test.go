package deploy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitFile is the systemd unit pinfs ships, relative to the repository.
const unitFile = "deploy/systemd/pinfs@.service"

// minStopTimeout is the least TimeoutStopSec for pinfs to unmount and write
// the consumed set and run_end to the run record after SIGTERM.
const minStopTimeout = 60 * time.Second

// unit is a parsed systemd unit file: section, then key, then its values in
// order (a key may repeat, as ExecStartPre does).
type unit map[string]map[string][]string

// get returns the last value of key in section, or "".
func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// parseUnit parses a systemd unit file: [Section] headers, Key=Value lines,
// # and ; comments, "\" continuations.
func parseUnit(text string) (unit, error) {
	u := unit{}
	section := ""
	var cont strings.Builder
	for n, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if cont.Len() == 0 && (t == "" || t[0] == '#' || t[0] == ';') {
			continue
		}
		if body, ok := strings.CutSuffix(t, "\\"); ok {
			cont.WriteString(body + " ")
			continue
		}
		cont.WriteString(t)
		t = cont.String()
		cont.Reset()
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			section = t[1 : len(t)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, val, ok := strings.Cut(t, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("line %d: %q is not Key=Value in a [Section]", n+1, t)
		}
		u[section][strings.TrimSpace(key)] = append(u[section][strings.TrimSpace(key)], strings.TrimSpace(val))
	}
	return u, nil
}

// execArgv splits an Exec*= value into its argument list, dropping the
// special prefixes (-, @, :, +, !) before the path.
func execArgv(v string) ([]string, error) {
	v = strings.TrimLeft(v, "-@:+!")
	return shellWords(v)
}

// spanUnits are systemd time span units (systemd.time(7)).
var spanUnits = map[string]time.Duration{
	"": time.Second, "us": time.Microsecond, "usec": time.Microsecond, "ms": time.Millisecond, "msec": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
}

var spanPart = regexp.MustCompile(`^(\d+)\s*([a-z]*)`)

// parseSpan parses a systemd time span such as "90s", "3min" or "1min 30s".
func parseSpan(s string) (time.Duration, error) {
	var d time.Duration
	rest := strings.TrimSpace(s)
	if rest == "" || rest == "infinity" {
		return 0, fmt.Errorf("time span %q: want a finite span", s)
	}
	for rest != "" {
		m := spanPart.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("time span %q: not a systemd time span", s)
		}
		unit, ok := spanUnits[m[2]]
		if !ok {
			return 0, fmt.Errorf("time span %q: unknown unit %q", s, m[2])
		}
		n, _ := strconv.Atoi(m[1])
		d += time.Duration(n) * unit
		rest = strings.TrimSpace(rest[len(m[0]):])
	}
	return d, nil
}

// unitCmd is the pinfs command line of an Exec*= setting.
type unitCmd struct {
	key  string
	argv []string
}

// checkUnit checks the pinfs@.service text and returns its pinfs command
// lines (ExecStart, ExecStartPost), for the CLI to parse.
func checkUnit(text string) ([]unitCmd, []error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	u, err := parseUnit(text)
	if err != nil {
		return nil, []error{err}
	}
	for _, k := range []string{"Wants", "After"} {
		if !slices.Contains(strings.Fields(u.get("Unit", k)), "network-online.target") {
			bad("[Unit] %s= lacks network-online.target: the store must be reachable when pinfs starts", k)
		}
	}
	svc := "Service"
	if t := u.get(svc, "Type"); t != "exec" && t != "simple" {
		bad("Type=%s: want exec (pinfs mount --foreground is the service's process)", t)
	}
	if f := strings.TrimPrefix(u.get(svc, "EnvironmentFile"), "-"); f != "/etc/pinfs/pinfs.env" {
		bad("EnvironmentFile=%s: want /etc/pinfs/pinfs.env (PINFS_STORE, AWS_*)", f)
	}
	var cmds []unitCmd
	mount, err := execArgv(u.get(svc, "ExecStart"))
	switch {
	case err != nil:
		bad("ExecStart: %v", err)
	case len(mount) < 4 || path.Base(mount[0]) != "pinfs" || mount[1] != "mount":
		bad("ExecStart=%s: want pinfs mount %%i /data/%%i …", u.get(svc, "ExecStart"))
	default:
		cmds = append(cmds, unitCmd{"ExecStart", mount})
		if mount[2] != "%i" || mount[3] != "/data/%i" {
			bad("ExecStart mounts %s at %s: want %%i (the digest is the instance) at /data/%%i", mount[2], mount[3])
		}
		if !slices.Contains(mount, "--foreground") {
			bad("ExecStart without --foreground: pinfs mount would return and systemd would stop the unit")
		}
	}
	mkdir := false
	for _, v := range u[svc]["ExecStartPre"] {
		a, _ := execArgv(v)
		mkdir = mkdir || len(a) == 3 && path.Base(a[0]) == "mkdir" && a[1] == "-p" && a[2] == "/data/%i"
	}
	if !mkdir {
		bad("no ExecStartPre=/usr/bin/mkdir -p /data/%%i: pinfs mount refuses a mountpoint that does not exist")
	}
	errs = append(errs, checkReady(u, &cmds)...)
	if s := u.get(svc, "KillSignal"); s != "" && s != "SIGTERM" {
		bad("KillSignal=%s: pinfs unmounts and writes run_end on SIGTERM", s)
	}
	if d, err := parseSpan(u.get(svc, "TimeoutStopSec")); err != nil || d < minStopTimeout {
		bad("TimeoutStopSec=%s: want at least %v for the unmount and run_end after SIGTERM", u.get(svc, "TimeoutStopSec"), minStopTimeout)
	}
	if r := u.get(svc, "Restart"); r != "on-failure" {
		bad("Restart=%s: want on-failure", r)
	}
	if u.get("Install", "WantedBy") == "" {
		bad("no [Install] WantedBy=: systemctl enable would not start it at boot")
	}
	return cmds, errs
}

// checkReady checks ExecStartPost: pinfs status /data/%i --wait D, within
// TimeoutStartSec.
func checkReady(u unit, cmds *[]unitCmd) []error {
	post := u["Service"]["ExecStartPost"]
	var status []string
	for _, v := range post {
		if a, err := execArgv(v); err == nil && len(a) > 1 && path.Base(a[0]) == "pinfs" && a[1] == "status" {
			status = a
		}
	}
	if status == nil {
		return []error{errors.New("no ExecStartPost=… pinfs status /data/%i --wait D: the unit would be started before the mount serves")}
	}
	*cmds = append(*cmds, unitCmd{"ExecStartPost", status})
	if len(status) < 3 || status[2] != "/data/%i" {
		return []error{fmt.Errorf("ExecStartPost asks pinfs status %q: want /data/%%i, the mountpoint", status[2:])}
	}
	i := slices.Index(status, "--wait")
	if i < 0 || i+1 >= len(status) {
		return []error{errors.New("ExecStartPost: pinfs status without --wait asks once, before the mount can serve")}
	}
	wait, err := time.ParseDuration(status[i+1])
	if err != nil {
		return []error{fmt.Errorf("ExecStartPost: --wait %s: %v", status[i+1], err)}
	}
	start, err := parseSpan(u.get("Service", "TimeoutStartSec"))
	if err != nil || start <= wait {
		return []error{fmt.Errorf("TimeoutStartSec=%s: want longer than pinfs status --wait %v, or systemd kills the wait", u.get("Service", "TimeoutStartSec"), wait)}
	}
	return nil
}

func TestSystemdUnit(t *testing.T) {
	cmds, errs := checkUnit(readRepoFile(t, unitFile))
	for _, err := range errs {
		t.Error(err)
	}
	if len(cmds) != 2 {
		t.Errorf("found %d pinfs command lines; want ExecStart and ExecStartPost", len(cmds))
	}
}

func TestRefusesBrokenUnits(t *testing.T) {
	good := readRepoFile(t, unitFile)
	if _, errs := checkUnit(good); len(errs) > 0 {
		t.Fatalf("%s is refused: %v", unitFile, errors.Join(errs...))
	}
	edit := func(old, new string) string {
		t.Helper()
		lines := strings.SplitAfter(good, "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, "#") && strings.Contains(l, old) {
				lines[i] = strings.Replace(l, old, new, 1)
				return strings.Join(lines, "")
			}
		}
		t.Fatalf("%q is in no setting of %s", old, unitFile)
		return ""
	}
	cases := []struct{ name, text, want string }{
		{"no network", edit("After=network-online.target", "After=network.target"), "After= lacks network-online.target"},
		{"forking", edit("Type=exec", "Type=forking"), "Type=forking"},
		{"no env file", edit("EnvironmentFile=/etc/pinfs/pinfs.env\n", ""), "EnvironmentFile="},
		{"no foreground", edit(" --foreground", ""), "without --foreground"},
		{"unescaped instance", edit("mount %i /data/%i", "mount %I /data/%i"), "want %i"},
		{"other mountpoint", edit("mount %i /data/%i", "mount %i /mnt/%i"), "at /mnt/%i"},
		{"no mkdir", edit("ExecStartPre=/usr/bin/mkdir -p /data/%i\n", ""), "no ExecStartPre=/usr/bin/mkdir"},
		{"no readiness", edit("ExecStartPost=/usr/local/bin/pinfs status /data/%i --wait 2m\n", ""), "no ExecStartPost"},
		{"no wait", edit(" --wait 2m", ""), "without --wait"},
		{"status elsewhere", edit("status /data/%i", "status /mnt/%i"), "want /data/%i"},
		{"start timeout shorter than wait", edit("TimeoutStartSec=3min", "TimeoutStartSec=90s"), "longer than pinfs status --wait 2m0s"},
		{"SIGKILL", edit("KillSignal=SIGTERM", "KillSignal=SIGKILL"), "KillSignal=SIGKILL"},
		{"short stop timeout", edit("TimeoutStopSec=90s", "TimeoutStopSec=10s"), "TimeoutStopSec=10s: want at least 1m0s"},
		{"no stop timeout", edit("TimeoutStopSec=90s\n", ""), "TimeoutStopSec=: want"},
		{"always restart", edit("Restart=on-failure", "Restart=no"), "Restart=no"},
		{"no install", edit("WantedBy=multi-user.target\n", ""), "no [Install] WantedBy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := checkUnit(c.text)
			err := errors.Join(errs...)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("refused for another reason: %v; want %q", err, c.want)
			}
		})
	}
}

func TestParseSpan(t *testing.T) {
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "90s": 90 * time.Second,
		"3min": 3 * time.Minute, "1min 30s": 90 * time.Second, "2h": 2 * time.Hour, "500ms": 500 * time.Millisecond} {
		if got, err := parseSpan(in); err != nil || got != want {
			t.Errorf("parseSpan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "infinity", "3 fortnights", "s"} {
		if d, err := parseSpan(in); err == nil {
			t.Errorf("parseSpan(%q) = %v; want an error", in, d)
		}
	}
}
