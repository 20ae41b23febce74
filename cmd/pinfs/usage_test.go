package main

import (
	"bytes"
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// usageCase is a command line of one pinfs command without a mistake in
// how it is called (it may still fail, exit 1, against an empty store),
// from which TestUsageErrors makes the mistakes.
type usageCase struct {
	args     []string   // positional arguments, all of them required
	maxArgs  int        // how many positional arguments it takes (0: len(args); -1: any number)
	flags    []string   // the flags it needs, but --store
	dash     []string   // after --
	store    bool       // it needs --store (no default but $PINFS_STORE)
	digestAt []int      // positions in args that must be a full digest
	notSnap  string     // a non-digest to put there (default "latest")
	bad      [][]string // more mistakes: what follows the command name (and --store)
}

// usageCases returns a usageCase for every command and sub-command, by
// the name that pinfs --help gives it ("alias set"), with files under dir.
func usageCases(t *testing.T, dir string) map[string]usageCase {
	d := "sha256:" + strings.Repeat("0", 64)
	src := filepath.Join(dir, "src")
	mnt := filepath.Join(dir, "mnt")
	for _, p := range []string{src, mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := []string{"--cache-dir", filepath.Join(dir, "cache")}
	record := []string{"--run-record", filepath.Join(dir, "runs.jsonl")}
	snap := func(n int) usageCase {
		c := usageCase{store: true}
		for i := range n {
			c.args = append(c.args, d)
			c.digestAt = append(c.digestAt, i)
		}
		return c
	}
	with := func(c usageCase, f func(*usageCase)) usageCase { f(&c); return c }
	derive := []string{"--input", "raw=" + d, "--transform", "harvest@v1"}
	return map[string]usageCase{
		"pin": {args: []string{src}, store: true, bad: [][]string{
			{src, "--parent", "latest"}, {src, "--transform", "harvest@v1"}}},
		"verify":       snap(1),
		"ls":           with(snap(1), func(c *usageCase) { c.maxArgs = 2 }),
		"diff":         snap(2),
		"log":          snap(1),
		"mount":        {args: []string{d, mnt}, flags: cache, store: true, digestAt: []int{0}},
		"warm":         with(snap(1), func(c *usageCase) { c.maxArgs, c.flags = -1, cache }),
		"serve":        {flags: append(append([]string{}, cache...), "--listen", "127.0.0.1:99999"), store: true, bad: [][]string{{"--listen", "127.0.0.1:99999", "--max-requests", "0"}}},
		"unmount":      {args: []string{mnt}},
		"validate":     snap(1),
		"key generate": {args: []string{filepath.Join(dir, "alice")}},
		"approve": with(snap(1), func(c *usageCase) {
			c.flags = []string{"--key", filepath.Join(dir, "alice.key")}
			c.bad = [][]string{{d, "--key", filepath.Join(dir, "alice.key"), "--report", "latest"}}
		}),
		"status":         with(snap(1), func(c *usageCase) { c.notSnap = "sha256:1234" }), // any other name is a MOUNTPOINT
		"alias set":      {args: []string{"support", d}, store: true, digestAt: []int{1}},
		"alias rollback": {args: []string{"support", d}, store: true, digestAt: []int{1}},
		"alias show":     {args: []string{"support"}, store: true},
		"alias log":      {args: []string{"support"}, store: true},
		"resolve":        {args: []string{"support"}, store: true},
		"fence":          {args: []string{"support"}, flags: []string{"--tombstone", "1"}, store: true},
		"admit": {args: []string{"support"}, flags: append([]string{"--purpose", "demo"}, record...), store: true,
			digestAt: []int{0}, notSnap: "sha256:1234"}, // a gate name or a digest
		"run list": {flags: record},
		// The run commands take the store from the run's mounts without
		// --store, so only the record can say one is missing.
		"run show":   {args: []string{"r1"}, flags: record},
		"run replay": {args: []string{"r1"}, flags: record},
		"run export": {args: []string{"r1"}, flags: record},
		"derive": {flags: append(derive, cache...), dash: []string{"true"}, store: true, bad: [][]string{
			{"--input", "raw=latest", "--transform", "harvest@v1", "--", "true"},
			derive, // no command after --
		}},
		"derive log": snap(1),
		"version":    {},
		"list":       {store: true}, // pinfs list --store S (issue 24 item 6), where it exists
	}
}

// line assembles the command line of c for command name, with more flags
// before any --.
func (c usageCase) line(name string, args []string, store string, more ...string) []string {
	l := append(strings.Fields(name), args...)
	l = append(append(l, c.flags...), more...)
	if store != "" {
		l = append(l, "--store", store)
	}
	if c.dash != nil {
		l = append(append(l, "--"), c.dash...)
	}
	return l
}

// allCommands returns every command and sub-command by its full name,
// and the groups (commands with sub-commands and no run of their own).
func allCommands() (cmds []string, groups []*command) {
	for _, c := range commands {
		if c.subs != nil && c.setup == nil {
			groups = append(groups, c)
		} else {
			cmds = append(cmds, c.name)
		}
		for _, s := range c.subs {
			cmds = append(cmds, c.name+" "+s.name)
		}
	}
	return cmds, groups
}

// TestUsageErrors: every mistake in how a command is called (an unknown
// flag, a missing or extra argument, no --store, a name where a digest
// goes) is exit 2 with one line on stderr, from every command and
// sub-command. A command without a usageCase fails the test: add one.
func TestUsageErrors(t *testing.T) {
	t.Setenv("PINFS_STORE", "")
	t.Setenv(asPinfsEnv, "1") // a mount's daemon child runs as pinfs, not as these tests
	dir := t.TempDir()
	cases := usageCases(t, dir)
	st := filepath.Join(dir, "store")
	if err := os.Mkdir(st, 0o755); err != nil {
		t.Fatal(err)
	}
	usage := func(t *testing.T, args ...string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(t.Context(), args, &out, &errOut)
		lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
		if code != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], "pinfs") || out.Len() != 0 {
			t.Errorf("pinfs %s: exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr",
				strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
	cmds, groups := allCommands()
	for _, name := range cmds {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("no usageCase for pinfs %s: add one to usageCases", name)
			}
			store := ""
			if c.store {
				store = st
			}
			// The line itself is no usage error: each mistake below is.
			var out, errOut bytes.Buffer
			if code := run(t.Context(), c.line(name, c.args, store), &out, &errOut); code == exitUsage {
				t.Fatalf("pinfs %s: exit 2 without a mistake: %s", strings.Join(c.line(name, c.args, store), " "), errOut.String())
			}
			usage(t, c.line(name, c.args, store, "--no-such-flag")...)
			if len(c.args) > 0 {
				usage(t, c.line(name, c.args[:len(c.args)-1], store)...)
			}
			if max := cmp.Or(c.maxArgs, len(c.args)); max >= 0 {
				extra := slices.Clone(c.args)
				for len(extra) <= max {
					extra = append(extra, "extra")
				}
				usage(t, c.line(name, extra, store)...)
			}
			if c.store {
				usage(t, c.line(name, c.args, "")...)
			}
			for _, i := range c.digestAt {
				args := slices.Clone(c.args)
				args[i] = cmp.Or(c.notSnap, "latest")
				usage(t, c.line(name, args, store)...)
			}
			for _, b := range c.bad {
				l := strings.Fields(name)
				if c.store {
					l = append(l, "--store", st)
				}
				usage(t, append(l, b...)...)
			}
		})
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			usage(t, g.name)
			usage(t, g.name, "no-such-command")
		})
	}
	usage(t, "no-such-command")
}
