package integration

// pinfs derive end to end, on a local directory store and on versitygw:
// a deterministic transform derived, cached and checked; the same version
// producing other bytes; a nondeterministic transform; inputs that are not
// digests; a failing transform; and derive log over two levels. Every
// derive must leave no mount and no work dir behind (deriveFix.derive).

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify/b3"
)

const deriveVersion = "harvest@v1.4.2"

// upperScript upper-cases the text files of input raw, copies big.bin,
// and writes its parameters, transform and key. It fails when the input
// is not a FUSE mount in a pinfs-derive-* dir of the work dir, is
// writable, the output is not empty or the upper-case input variable is
// missing, and says hello on stdout (which pinfs sends to stderr).
const upperScript = `in="$PINFS_INPUT_raw"
case "$in $PINFS_OUTPUT" in
'@WORK@'/pinfs-derive-*/inputs/raw\ '@WORK@'/pinfs-derive-*/output) ;;
*) echo "input $in, output $PINFS_OUTPUT: not in a pinfs-derive-* dir of the work dir" >&2; exit 5 ;;
esac
grep " $in " /proc/self/mountinfo | grep -q " - fuse" || { echo "$in is not a FUSE mount" >&2; exit 6; }
[ "$PINFS_INPUT_RAW" = "$in" ] || { echo "PINFS_INPUT_RAW differs" >&2; exit 7; }
[ -z "$(ls -A "$PINFS_OUTPUT")" ] || { echo "output not empty" >&2; exit 8; }
if touch "$in/new" 2>/dev/null; then echo "input is writable" >&2; exit 9; fi
echo "transform says hello"
tr a-z A-Z < "$in/a.txt" > "$PINFS_OUTPUT/a.txt"
mkdir "$PINFS_OUTPUT/sub"
tr a-z A-Z < "$in/sub/b.txt" > "$PINFS_OUTPUT/sub/b.txt"
cp "$in/big.bin" "$PINFS_OUTPUT/big.bin"
printf 'lang=%s max=%s\n' "$PINFS_PARAM_LANG" "$PINFS_PARAM_MAX_LEN" > "$PINFS_OUTPUT/params.txt"
printf '%s %s\n' "$PINFS_TRANSFORM" "$PINFS_DERIVATION_KEY" > "$PINFS_OUTPUT/meta.txt"
`

// driftScript is upperScript changed without a new version: two members
// change, one is added.
const driftScript = upperScript + `echo extra >> "$PINFS_OUTPUT/a.txt"
echo extra >> "$PINFS_OUTPUT/sub/b.txt"
echo new > "$PINFS_OUTPUT/new.txt"
`

// upperArgs are the derive arguments of upperScript at path script.
func (f *deriveFix) upperArgs(script string, extra ...string) []string {
	args := append([]string{"--input", "raw=" + f.raw, "--transform", deriveVersion,
		"--param", "lang=en", "--param", "max.len=5"}, extra...)
	return append(args, "--", "sh", script)
}

// TestDeriveDeterministic derives, derives again (cached, not run), and
// checks by record file, and by key and output digest with the command.
func TestDeriveDeterministic(t *testing.T) {
	t.Parallel()
	eachDeriveStore(t, func(t *testing.T, ds *deriveStore) {
		f := newDeriveFix(t, ds)
		script := f.script(t, "upper.sh", upperScript)
		recFile := filepath.Join(f.root, "rec.json")
		r := f.derive(t, 0, []string{"transform says hello"}, f.upperArgs(script, "--record", recFile)...)
		out := r.lastLine()
		if !isDigest(out) || r.stdout != out+"\n" {
			t.Fatalf("derive: want the output digest alone on stdout: %v", r)
		}
		if n := f.runs(t); n != 1 {
			t.Fatalf("the transform ran %d times, want 1", n)
		}
		rec := readRecord(t, recFile)
		if rec.Schema != "pinfs.derivation.v1" || rec.Output != out || rec.Transform != deriveVersion ||
			!slices.Equal(rec.Inputs, []deriveInput{{"raw", f.raw}}) || rec.Split != "dir" ||
			len(rec.Params) != 2 || rec.Params["lang"] != "en" || rec.Params["max.len"] != "5" ||
			!slices.Equal(rec.Command, []string{"sh", script}) {
			t.Errorf("record %+v, want output %s, input raw=%s", rec, out, f.raw)
		}
		if tm, err := time.Parse(time.RFC3339, rec.Time); err != nil || !strings.HasSuffix(rec.Time, "Z") || tm.Nanosecond() != 0 {
			t.Errorf("record time %q: want RFC 3339 UTC seconds (%v)", rec.Time, err)
		}

		want := map[string]string{}
		for p, b := range map[string]string{
			"a.txt": "ALPHA\n", "sub/b.txt": "BRAVO\n", "big.bin": string(f.data["big.bin"]),
			"params.txt": "lang=en max=5\n", "meta.txt": deriveVersion + " " + rec.Key + "\n",
		} {
			want[p] = b3.Of([]byte(b)).String()
		}
		if got := f.members(t, out); !maps.Equal(got, want) {
			t.Errorf("output members %v, want %v", got, want)
		}
		wantExit(t, f.env, 0, []string{"verify: OK"}, "verify", out, "--store", f.store, "--deep")
		if m := f.manifest(t, out); !slices.Equal(m.Parents, []string{f.raw}) || m.Transform != deriveVersion {
			t.Errorf("output manifest: parents %q transform %q, want [%s] %s", m.Parents, m.Transform, f.raw, deriveVersion)
		}

		// Again: cached, not run, the same digest and record.
		rec2 := filepath.Join(f.root, "rec2.json")
		r = f.derive(t, 0, []string{"derivation " + rec.Key + " is cached: output " + out, "(--force reruns it)"},
			f.upperArgs(script, "--record", rec2)...)
		if r.stdout != out+"\n" || f.runs(t) != 1 {
			t.Errorf("cached derive: stdout %q, %d runs; want %s, 1 run", r.stdout, f.runs(t), out)
		}
		if a, b := readFileOr(t, recFile), readFileOr(t, rec2); a != b {
			t.Errorf("--record on a cache hit:\n%s\nwant\n%s", b, a)
		}

		// --check reruns every time and reproduces the output: the record
		// file, or a key or output digest with the command.
		for i, target := range [][]string{{recFile}, {rec.Key, "--", "sh", script}, {out, "--", "sh", script}} {
			r := f.derive(t, 0, nil, append([]string{"--check"}, target...)...)
			if !strings.Contains(r.stdout, "derivation "+rec.Key+" reproduced "+out) {
				t.Errorf("--check %q: %v", target, r)
			}
			if n := f.runs(t); n != 2+i {
				t.Errorf("--check %q: the transform ran %d times in all, want %d", target, n, 2+i)
			}
		}
	})
}

// driftLine matches the drift message of driftScript against upperScript.
var driftLine = regexp.MustCompile(`^pinfs derive: transform ` + regexp.QuoteMeta(deriveVersion) +
	` produced different bytes than recorded \(2 changed: (a\.txt, sub/b\.txt|sub/b\.txt, a\.txt); 1 added: new\.txt\): ` +
	`the derivation changed without a new version \(recorded (sha256:[0-9a-f]{64}), rerun (sha256:[0-9a-f]{64})\)$`)

// TestDeriveCodeChangedWithoutVersion edits the transform but keeps its
// version: --check and --force fail naming the members; the record stays.
func TestDeriveCodeChangedWithoutVersion(t *testing.T) {
	t.Parallel()
	eachDeriveStore(t, func(t *testing.T, ds *deriveStore) {
		f := newDeriveFix(t, ds)
		script := f.script(t, "upper.sh", upperScript)
		recFile := filepath.Join(f.root, "rec.json")
		out := f.derive(t, 0, nil, f.upperArgs(script, "--record", recFile)...).lastLine()
		f.script(t, "upper.sh", driftScript)

		for i, args := range [][]string{{"--check", recFile}, f.upperArgs(script, "--force")} {
			r := f.derive(t, 1, nil, args...)
			m := driftLine.FindStringSubmatch(lastStderrLine(r))
			if m == nil {
				t.Errorf("%q: last stderr line is not the drift message naming a.txt, sub/b.txt and new.txt: %v", args, r)
			} else if m[2] != out || m[3] == out {
				t.Errorf("%q: recorded %s, rerun %s; want recorded %s and another rerun", args, m[2], m[3], out)
			}
			if strings.Contains(r.stdout, "reproduced") || f.runs(t) != 2+i {
				t.Errorf("%q: stdout %q, %d runs", args, r.stdout, f.runs(t))
			}
		}

		// The record was kept: a plain derive is still the first output.
		r := f.derive(t, 0, []string{"is cached: output " + out}, f.upperArgs(script)...)
		if r.lastLine() != out || f.runs(t) != 3 {
			t.Errorf("derive after the drift: %v (%d runs), want cached %s", r, f.runs(t), out)
		}
	})
}

// TestDeriveNondeterministic: a transform that writes the time and random
// bytes derives, and --check fails on it.
func TestDeriveNondeterministic(t *testing.T) {
	t.Parallel()
	eachDeriveStore(t, func(t *testing.T, ds *deriveStore) {
		f := newDeriveFix(t, ds)
		script := f.script(t, "clock.sh", `cp "$PINFS_INPUT_raw/a.txt" "$PINFS_OUTPUT/a.txt"
{ date +%s%N; od -An -N16 -tx1 /dev/urandom; } > "$PINFS_OUTPUT/stamp"
`)
		out := f.derive(t, 0, nil, "--input", "raw="+f.raw, "--transform", "clock@v1", "--", "sh", script).lastLine()
		if !isDigest(out) {
			t.Fatalf("derive printed %q, want a digest", out)
		}
		r := f.derive(t, 1, []string{"transform clock@v1 produced different bytes than recorded (1 changed: stamp)",
			"without a new version", "recorded " + out}, "--check", out, "--", "sh", script)
		if strings.Contains(lastStderrLine(r), "a.txt") || f.runs(t) != 2 {
			t.Errorf("--check of a nondeterministic transform: %v (%d runs)", r, f.runs(t))
		}
	})
}

// TestDeriveRefusesInputsThatAreNotDigests: exit 2 before anything is
// mounted or run.
func TestDeriveRefusesInputsThatAreNotDigests(t *testing.T) {
	t.Parallel()
	eachDeriveStore(t, func(t *testing.T, ds *deriveStore) {
		f := newDeriveFix(t, ds)
		script := f.script(t, "upper.sh", upperScript)
		for _, c := range []struct {
			inputs []string
			want   string
		}{
			{[]string{"raw=latest"}, "latest"},
			{[]string{"raw=customer-support-latest"}, "customer-support-latest"},
			{[]string{"raw=sha256:abcdef012345"}, "sha256:abcdef012345"},
			{[]string{"raw=" + filepath.Join(f.root, "rawdata")}, filepath.Join(f.root, "rawdata")},
			{[]string{"raw=" + strings.ToUpper(f.raw)}, strings.ToUpper(f.raw)},
			{[]string{f.raw}, f.raw},
			{[]string{"raw=" + f.raw, "RAW=" + f.raw}, "RAW"},
		} {
			var args []string
			for _, in := range c.inputs {
				args = append(args, "--input", in)
			}
			args = append(args, "--transform", deriveVersion, "--", "sh", script)
			r := f.derive(t, 2, []string{c.want}, args...)
			if r.stdout != "" {
				t.Errorf("%q: stdout %q", c.inputs, r.stdout)
			}
			if _, err := os.Stat(f.counter); !os.IsNotExist(err) {
				t.Fatalf("%q: the transform ran (%v)", c.inputs, err)
			}
		}
	})
}

// TestDeriveTransformFails: a transform that exits 3 fails the derive
// with exit 1 and records nothing, so the fixed transform runs; one that
// writes nothing fails too.
func TestDeriveTransformFails(t *testing.T) {
	t.Parallel()
	eachDeriveStore(t, func(t *testing.T, ds *deriveStore) {
		f := newDeriveFix(t, ds)
		script := f.script(t, "t.sh", `echo partial > "$PINFS_OUTPUT/x"
echo "transform is failing" >&2
exit 3
`)
		args := []string{"--input", "raw=" + f.raw, "--transform", "fail@v1", "--", "sh", script}
		r := f.derive(t, 1, []string{"transform is failing", "exited with status 3"}, args...)
		if r.stdout != "" || f.runs(t) != 1 {
			t.Errorf("failed transform: %v (%d runs)", r, f.runs(t))
		}

		f.script(t, "t.sh", `echo fixed > "$PINFS_OUTPUT/x"`+"\n")
		recFile := filepath.Join(f.root, "rec.json")
		r = f.derive(t, 0, nil, append([]string{"--record", recFile}, args...)...)
		if strings.Contains(r.stderr, "cached") || f.runs(t) != 2 || readRecord(t, recFile).Output != r.lastLine() {
			t.Errorf("the fixed transform after a failed one: %v (%d runs)", r, f.runs(t))
		}

		empty := f.script(t, "empty.sh", "true\n")
		r = f.derive(t, 1, []string{"wrote no files to PINFS_OUTPUT"},
			"--input", "raw="+f.raw, "--transform", "empty@v1", "--", "sh", empty)
		if r.stdout != "" || f.runs(t) != 3 {
			t.Errorf("empty output: %v (%d runs)", r, f.runs(t))
		}
	})
}

func readFileOr(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeriveLogTwoLevels: raw (pinned) -> A = derive(raw) -> B = derive(A,
// raw). derive log B shows both records and raw, reached twice, once as
// not derived, pinned from its directory.
func TestDeriveLogTwoLevels(t *testing.T) {
	t.Parallel()
	eachDeriveStore(t, func(t *testing.T, ds *deriveStore) {
		f := newDeriveFix(t, ds)
		clean := f.script(t, "clean.sh", `tr a-z A-Z < "$PINFS_INPUT_raw/a.txt" > "$PINFS_OUTPUT/a.txt"`+"\n")
		join := f.script(t, "join.sh", `cat "$PINFS_INPUT_a/a.txt" "$PINFS_INPUT_raw/sub/b.txt" > "$PINFS_OUTPUT/ab.txt"`+"\n")
		recA, recB := filepath.Join(f.root, "a.json"), filepath.Join(f.root, "b.json")
		a := f.derive(t, 0, nil, "--input", "raw="+f.raw, "--transform", "clean@v1", "--record", recA, "--", "sh", clean).lastLine()
		b := f.derive(t, 0, nil, "--input", "a="+a, "--input", "raw="+f.raw, "--transform", "join@v2",
			"--record", recB, "--", "sh", join).lastLine()
		ra, rb := readRecord(t, recA), readRecord(t, recB)
		if m := f.manifest(t, b); !slices.Equal(m.Parents, []string{a, f.raw}) {
			t.Errorf("B's parents %q, want [%s %s]", m.Parents, a, f.raw)
		}

		for _, target := range []string{b, rb.Key} {
			r := mustPinfs(t, f.env, "derive", "log", target, "--store", f.store)
			for _, w := range []string{rb.Key, "join@v2", ra.Key, "clean@v1", a, f.raw, "dir:rawdata"} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("derive log %s lacks %q:\n%s", target, w, r.stdout)
				}
			}
			if n := strings.Count(r.stdout, "not derived"); n != 1 {
				t.Errorf("derive log %s: raw shown as not derived %d times, want once:\n%s", target, n, r.stdout)
			}
			if strings.Index(r.stdout, rb.Key) > strings.Index(r.stdout, ra.Key) {
				t.Errorf("derive log %s: A's record before B's:\n%s", target, r.stdout)
			}
		}
		checkLineageJSON(t, f, b, rb, ra)
		wantExit(t, f.env, 1, []string{"no derivation record for " + f.raw}, "derive", "log", f.raw, "--store", f.store)
	})
}

// lineageNode is a node of pinfs derive log --json (cmd/internal/lineage.Node).
type lineageNode struct {
	Digest      string `json:"digest"`
	Kind        string `json:"kind"`
	Manifest    string `json:"manifest"`
	Derivations []struct {
		Record deriveRecord `json:"record"`
		Inputs []struct {
			Name string       `json:"name"`
			Node *lineageNode `json:"node"`
		} `json:"inputs"`
	} `json:"derivations"`
	Sources []struct {
		ID  string `json:"id"`
		URI string `json:"uri"`
	} `json:"sources"`
}

// checkLineageJSON checks derive log --json of b = join(a, raw), a =
// clean(raw): b's record, then depth first a's record with raw not derived
// (pinned from dir:rawdata), then b's raw input as seen before.
func checkLineageJSON(t *testing.T, f *deriveFix, b string, rb, ra deriveRecord) {
	t.Helper()
	r := mustPinfs(t, f.env, "derive", "log", b, "--store", f.store, "--json")
	var n lineageNode
	if err := json.Unmarshal([]byte(r.stdout), &n); err != nil {
		t.Fatalf("derive log --json: %v: %v", err, r)
	}
	bad := func(what string) { t.Errorf("derive log --json: %s:\n%s", what, r.stdout) }
	if n.Digest != b || n.Kind != "derived" || len(n.Derivations) != 1 {
		bad("top is not B, derived by one record")
		return
	}
	dv := n.Derivations[0]
	if dv.Record.Key != rb.Key || dv.Record.Transform != "join@v2" || len(dv.Inputs) != 2 ||
		dv.Inputs[0].Name != "a" || dv.Inputs[1].Name != "raw" || dv.Inputs[0].Node == nil || dv.Inputs[1].Node == nil {
		bad("B's record or its inputs a, raw")
		return
	}
	an, rawSeen := dv.Inputs[0].Node, dv.Inputs[1].Node
	if an.Digest != rb.Inputs[0].Digest || an.Kind != "derived" || len(an.Derivations) != 1 {
		bad("input a is not A, derived by one record")
		return
	}
	da := an.Derivations[0]
	if da.Record.Key != ra.Key || da.Record.Transform != "clean@v1" || len(da.Inputs) != 1 || da.Inputs[0].Name != "raw" || da.Inputs[0].Node == nil {
		bad("A's record or its input raw")
		return
	}
	raw := da.Inputs[0].Node
	if raw.Digest != f.raw || raw.Kind != "not-derived" || raw.Manifest != "read" || len(raw.Derivations) != 0 ||
		len(raw.Sources) != 1 || raw.Sources[0].URI != "dir:rawdata" {
		bad("raw under A is not shown as not derived, pinned from dir:rawdata")
	}
	if rawSeen.Digest != f.raw || rawSeen.Kind != "seen" || len(rawSeen.Derivations) != 0 || len(rawSeen.Sources) != 0 {
		bad("raw under B is not referred to as seen")
	}
}
