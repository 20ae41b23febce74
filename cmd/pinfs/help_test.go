package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// commandFlags returns the flags of every command and sub-command that
// runs, by full name, defined as run defines them.
func commandFlags(t *testing.T) map[string]*command {
	t.Helper()
	out := map[string]*command{}
	for _, c := range commands {
		if c.setup != nil {
			out[c.name] = c
		}
		for _, s := range c.subs {
			out[c.name+" "+s.name] = s
		}
	}
	return out
}

// placeholder is what a flag's value is called in help: upper case, as in
// the synopses (N, SIZE, DURATION, FILE, NAME=DIGEST, RECORD-FILE).
var placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_=@:.<>|…-]*$`)

// TestFlagHelp: every flag of every command has a named placeholder in
// its help (no Go type name such as string, uint32 or size), a boolean
// is shown as --name (no [=true|false]), and a synopsis marks as required
// (outside [ ] and ( )) no flag that has a default.
func TestFlagHelp(t *testing.T) {
	for name, c := range commandFlags(t) {
		fs := pflag.NewFlagSet("pinfs "+name, pflag.ContinueOnError)
		c.setup(fs, &bytes.Buffer{})
		logFlags(fs)
		var out, errOut bytes.Buffer
		if code := run(t.Context(), append(strings.Fields(name), "--help"), &out, &errOut); code != exitOK {
			t.Fatalf("pinfs %s --help: exit %d: %s", name, code, errOut.String())
		}
		help := out.String()
		fs.VisitAll(func(f *pflag.Flag) {
			ph, _ := pflag.UnquoteUsage(f)
			quoted := strings.Count(f.Usage, "`") >= 2
			switch {
			case isBoolFlag(f) && quoted:
				t.Errorf("pinfs %s --%s: a boolean with a placeholder %q", name, f.Name, ph)
			case isBoolFlag(f):
				if !regexp.MustCompile(`(?m)^ +(-\w, )?--` + regexp.QuoteMeta(f.Name) + `  `).MatchString(help) {
					t.Errorf("pinfs %s --%s: not shown as a plain --%[2]s:\n%s", name, f.Name, help)
				}
			case !quoted || !placeholder.MatchString(ph):
				t.Errorf("pinfs %s --%s: placeholder %q; want a back-quoted upper-case name in its usage (N, SIZE, DURATION, FILE)", name, f.Name, ph)
			}
		})
		if strings.Contains(help, "[=") {
			t.Errorf("pinfs %s --help has [=...]:\n%s", name, help)
		}
		for _, fl := range requiredInSynopsis(c.args) {
			f := fs.Lookup(fl)
			if f == nil {
				t.Errorf("pinfs %s: synopsis %q names --%s, which it does not have", name, c.args, fl)
				continue
			}
			if fl != "store" && (defaultText(f) != "" || strings.Contains(f.Usage, "(default")) {
				t.Errorf("pinfs %s: synopsis %q marks --%s as required, but it has a default (%s)", name, c.args, fl, f.Usage)
			}
		}
	}
}

// requiredInSynopsis returns the flags that synopsis names outside any
// [ ] or ( ).
func requiredInSynopsis(synopsis string) []string {
	var out []string
	depth := 0
	for _, w := range strings.Fields(synopsis) {
		if depth == 0 && strings.HasPrefix(w, "--") && len(w) > 2 {
			out = append(out, strings.TrimRight(strings.TrimPrefix(w, "--"), ")]|"))
		}
		depth += strings.Count(w, "[") + strings.Count(w, "(") - strings.Count(w, "]") - strings.Count(w, ")")
	}
	return out
}

// TestTopHelp: pinfs --help lists every command and sub-command, and says
// which take no --store.
func TestTopHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"--help"}, &out, &errOut); code != exitOK {
		t.Fatalf("pinfs --help: exit %d: %s", code, errOut.String())
	}
	help := out.String()
	for name, c := range commandFlags(t) {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` +` + regexp.QuoteMeta(c.short) + `$`).MatchString(help) {
			t.Errorf("pinfs --help does not list %q:\n%s", name, help)
		}
	}
	_, except, _ := strings.Cut(strings.Join(strings.Fields(help), " "), "Every command takes it except ")
	except, _, _ = strings.Cut(except, ";")
	if except != "unmount, key generate, run list and version" {
		t.Errorf("pinfs --help: the commands without --store are %q, want unmount, key generate, run list and version", except)
	}
}

// TestSynopsisNamesFlagValuesAsTheFlagsDo: where a command's synopsis
// names a flag's value ("--store STORE"), it calls it what the Flags
// section below it does: the flag's placeholder (with … when repeatable),
// a list of the values it takes (prov|intoto), or words its usage uses
// for one of its forms (KEY|OUTPUT-DIGEST), never another name for the
// same value (--store URL below --store STORE).
func TestSynopsisNamesFlagValuesAsTheFlagsDo(t *testing.T) {
	valueWord := regexp.MustCompile(`--([a-z][a-z-]*)[ =]([^\s\[\]()]+)`)
	values := regexp.MustCompile(`^[a-z0-9]+(\|[a-z0-9]+)+$`)
	for name, c := range commandFlags(t) {
		fs := pflag.NewFlagSet("pinfs "+name, pflag.ContinueOnError)
		c.setup(fs, &bytes.Buffer{})
		logFlags(fs)
		for _, m := range valueWord.FindAllStringSubmatch(c.args, -1) {
			f, w := fs.Lookup(m[1]), strings.TrimRight(m[2], "|")
			if f == nil || isBoolFlag(f) || strings.HasPrefix(w, "--") {
				continue
			}
			ph, _ := pflag.UnquoteUsage(f)
			inUsage := regexp.MustCompile(`(^|[^\w$])` + regexp.QuoteMeta(w) + `(\W|$)`).MatchString(f.Usage)
			if w != ph && w != ph+"…" && !values.MatchString(w) && !inUsage {
				t.Errorf("pinfs %s: the synopsis says --%s %s, its Flags section --%[2]s %[4]s", name, m[1], w, ph)
			}
		}
	}
}

// TestHelpCommand: pinfs help CMD [SUB] prints what pinfs CMD [SUB] --help
// prints, for a sub-command too (pinfs help run show is run show's help,
// not the run group's).
func TestHelpCommand(t *testing.T) {
	for _, name := range []string{"mount", "run show", "alias set", "derive log", "run"} {
		var want, got, errOut bytes.Buffer
		if code := run(t.Context(), append(strings.Fields(name), "--help"), &want, &errOut); code != exitOK {
			t.Fatalf("pinfs %s --help: exit %d: %s", name, code, errOut.String())
		}
		if code := run(t.Context(), append([]string{"help"}, strings.Fields(name)...), &got, &errOut); code != exitOK || got.String() != want.String() {
			t.Errorf("pinfs help %s: exit %d, printed\n%s\nwant what pinfs %s --help prints:\n%s", name, code, got.String(), name, want.String())
		}
	}
}
