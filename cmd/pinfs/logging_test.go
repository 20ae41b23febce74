package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// logCommand adds to the command list, for the test, a command "logtest"
// that logs one line at each level through logFrom(ctx) and one warning
// through slog.Default(), and returns whether it ran.
func logCommand(t *testing.T) *bool {
	t.Helper()
	ran := new(bool)
	c := &command{name: "logtest", setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error {
			*ran = true
			l := logFrom(ctx)
			l.Debug("debug line", "k", 1)
			l.Info("info line", "k", 2)
			l.Warn("warn line", "k", 3)
			slog.Default().Warn("default line", "k", 4)
			return nil
		}
	}}
	saved := commands
	commands = append(append([]*command{}, commands...), c)
	t.Cleanup(func() {
		commands = saved
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	})
	return ran
}

// runLogged runs pinfs with args and returns its stderr lines; the
// command must succeed.
func runLogged(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("pinfs %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
}

// jsonLines decodes every line as one JSON object and returns their msg
// fields.
func jsonLines(t *testing.T, lines []string) []string {
	t.Helper()
	var msgs []string
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not a JSON object: %v: %q", err, line)
		}
		if m["level"] == nil || m["time"] == nil {
			t.Errorf("JSON log line lacks level or time: %q", line)
		}
		msg, _ := m["msg"].(string)
		msgs = append(msgs, msg)
	}
	return msgs
}

func TestLogFormatJSON(t *testing.T) {
	logCommand(t)
	got := jsonLines(t, runLogged(t, "logtest", "--log-format", "json"))
	// A command other than mount logs warnings and errors only.
	if want := []string{"warn line", "default line"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("--log-format json logged %q, want %q", got, want)
	}
	got = jsonLines(t, runLogged(t, "logtest", "--log-format=json", "--debug"))
	if want := []string{"debug line", "info line", "warn line", "default line"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("--log-format json --debug logged %q, want %q", got, want)
	}
}

func TestLogFormatText(t *testing.T) {
	logCommand(t)
	lines := runLogged(t, "logtest")
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2 (warnings only): %q", len(lines), lines)
	}
	for i, want := range []string{`level=WARN msg="warn line" k=3`, `level=WARN msg="default line" k=4`} {
		if !strings.HasPrefix(lines[i], "time=") || !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d is %q, want time=… %s", i, lines[i], want)
		}
	}
}

func TestLogFormatFromEnvironment(t *testing.T) {
	logCommand(t)
	t.Setenv("PINFS_LOG_FORMAT", "json")
	jsonLines(t, runLogged(t, "logtest"))
	lines := runLogged(t, "logtest", "--log-format", "text")
	if !strings.HasPrefix(lines[0], "time=") {
		t.Errorf("--log-format text did not override $PINFS_LOG_FORMAT=json: %q", lines[0])
	}
}

func TestLogFormatRefused(t *testing.T) {
	ran := logCommand(t)
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"logtest", "--log-format", "xml"}, "pinfs logtest: --log-format xml: want text or json\n"},
		{"", []string{"logtest", "--log-format="}, "pinfs logtest: --log-format : want text or json\n"},
		{"yaml", []string{"logtest"}, "pinfs logtest: $PINFS_LOG_FORMAT yaml: want text or json\n"},
		{"yaml", []string{"logtest", "--log-format", "yaml"}, "pinfs logtest: --log-format yaml: want text or json\n"},
		{"", []string{"verify", "--log-format", "JSON", "sha256:00"}, "pinfs verify: --log-format JSON: want text or json\n"},
	} {
		t.Setenv("PINFS_LOG_FORMAT", tc.env)
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != exitUsage {
			t.Errorf("%v (PINFS_LOG_FORMAT=%s): exit %d, want %d", tc.args, tc.env, code, exitUsage)
		}
		if errOut.String() != tc.want {
			t.Errorf("%v (PINFS_LOG_FORMAT=%s): stderr %q, want %q", tc.args, tc.env, errOut.String(), tc.want)
		}
	}
	if *ran {
		t.Error("the command ran despite a bad log format")
	}
}

// TestLogFlagsInHelp: every command, and every command of a group, lists
// --log-format and --debug in its --help, once.
func TestLogFlagsInHelp(t *testing.T) {
	var lines [][]string
	for _, c := range commands {
		if c.setup != nil {
			lines = append(lines, []string{c.name, "--help"})
		}
		for _, s := range c.subs {
			lines = append(lines, []string{c.name, s.name, "--help"})
		}
	}
	if len(lines) < len(commands) {
		t.Fatalf("only %d command lines for %d commands", len(lines), len(commands))
	}
	for _, args := range lines {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitOK {
			t.Errorf("pinfs %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
			continue
		}
		for _, flag := range []string{"--log-format FORMAT", "--debug"} {
			if n := strings.Count(out.String(), "      "+flag); n != 1 {
				t.Errorf("pinfs %s lists %s %d times, want once:\n%s", strings.Join(args, " "), flag, n, out.String())
			}
		}
	}
}

// TestMountLogLevel: pinfs mount logs at info level, and its own --debug
// (every FUSE request) also sets debug level.
func TestMountLogLevel(t *testing.T) {
	for _, tc := range []struct {
		debug bool
		want  slog.Level
	}{{false, slog.LevelInfo}, {true, slog.LevelDebug}} {
		fs := pflag.NewFlagSet("pinfs mount", pflag.ContinueOnError)
		mountCmd.setup(fs, io.Discard)
		logFlags(fs)
		args := []string{"--log-format", "json"}
		if tc.debug {
			args = append(args, "--debug")
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		l, err := newLogger(fs, &buf, "mount")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if !l.Enabled(ctx, tc.want) || l.Enabled(ctx, tc.want-1) {
			t.Errorf("mount --debug=%v: logger not at level %v", tc.debug, tc.want)
		}
		l.Info("serving")
		jsonLines(t, []string{strings.TrimSuffix(buf.String(), "\n")})
	}
}
