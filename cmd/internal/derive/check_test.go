package derive

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// checkFixture derives f's record and writes it to a record file, as
// derive --record does; it returns the record and the file.
func checkFixture(t *testing.T, f *fixture) (*record.Record, string) {
	t.Helper()
	res, err := Derive(context.Background(), f.rn, f.record(t), false, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := res.Record.Encode()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "slice.json")
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return res.Record, file
}

// plant saves, as a store writer could, a valid record of output out
// whose command is command, and returns it.
func plant(t *testing.T, f *fixture, out verify.Digest, command ...string) *record.Record {
	t.Helper()
	r, err := record.New([]record.Input{{Name: "raw", Digest: f.input}}, "harvest@v1.4.2", nil, command, "dir")
	if err != nil {
		t.Fatal(err)
	}
	r.Output, r.Time = out, "2026-12-01T00:00:00Z"
	if _, err := derivations.Save(context.Background(), f.st, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// keys are the keys of rs.
func keys(rs []*record.Record) []verify.Digest {
	var ks []verify.Digest
	for _, r := range rs {
		ks = append(ks, r.Key)
	}
	return ks
}

// TestCheckTarget: a record file runs its own command, or the same one
// given after --; a key or output digest runs only the command given
// after --, and is refused without one; a command that is not the
// record's is refused; a planted record of the same output is skipped.
func TestCheckTarget(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	rec, file := checkFixture(t, f)
	cmd := rec.Command
	evil := plant(t, f, rec.Output, "sh", "-c", `printf %s "$AWS_SECRET_ACCESS_KEY" > /tmp/stolen`)
	one := []verify.Digest{rec.Key}

	for _, c := range []struct {
		target  string
		command []string
		want    []verify.Digest // the records to run
		skipped []verify.Digest
	}{
		{file, nil, one, nil},
		{file, cmd, one, nil},
		{string(rec.Key), cmd, one, nil},
		{string(rec.Output), cmd, one, []verify.Digest{evil.Key}},
		{string(rec.Output), evil.Command, []verify.Digest{evil.Key}, one}, // the caller's choice
	} {
		tg, err := ParseTarget(c.target, c.command)
		if err != nil {
			t.Errorf("ParseTarget(%s, %q): %v", c.target, c.command, err)
			continue
		}
		rs, skipped, err := tg.Records(ctx, f.st)
		if err != nil || !slices.Equal(keys(rs), c.want) || !slices.Equal(keys(skipped), c.skipped) {
			t.Errorf("Records(%s, %q) = %v, skipped %v, %v; want %v, skipped %v", c.target, c.command, keys(rs), keys(skipped), err, c.want, c.skipped)
		}
	}

	// Refused before the store is opened.
	for _, target := range []string{string(rec.Key), string(rec.Output), string(evil.Key)} {
		_, err := ParseTarget(target, nil)
		if !errors.Is(err, ErrNoCommand) || strings.Contains(err.Error(), "\n") ||
			!strings.Contains(err.Error(), "pass the record file from your checkout (--check slice.json") {
			t.Errorf("ParseTarget(%s, no command) = %v, want ErrNoCommand saying how to pass the record file", target, err)
		}
	}
	var ce *CommandError
	if _, err := ParseTarget(file, []string{"sh", "-c", "true"}); !errors.As(err, &ce) ||
		!strings.Contains(err.Error(), `the command after -- ["sh" "-c" "true"] is not the command of record file `+file) {
		t.Errorf("ParseTarget(file, another command) = %v, want a CommandError", err)
	}
	if _, err := ParseTarget(string(rec.Key)[:20], cmd); !errors.Is(err, verify.ErrNotDigest) {
		t.Errorf("ParseTarget(prefix) = %v, want ErrNotDigest", err)
	}

	// Refused once the store's records are read: no record has the command.
	for _, c := range []struct {
		target  verify.Digest
		command []string
	}{{evil.Key, cmd}, {rec.Key, evil.Command}, {rec.Output, []string{"sh", "other.sh"}}} {
		tg, err := ParseTarget(string(c.target), c.command)
		if err != nil {
			t.Fatal(err)
		}
		if rs, _, err := tg.Records(ctx, f.st); !errors.As(err, &ce) || rs != nil {
			t.Errorf("Records(%s, %q) = %v, %v; want a CommandError", c.target, c.command, keys(rs), err)
		}
	}
	tg, err := ParseTarget(string(f.input), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tg.Records(ctx, f.st); !errors.Is(err, derivations.ErrNoRecord) ||
		err.Error() != "no derivation record for "+string(f.input)+" in store "+f.st.String() {
		t.Errorf("Records(input) = %v, want no derivation record", err)
	}

	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(b), "harvest@v1.4.2", "harvest@v1.4.3", 1)
	if err := os.WriteFile(file, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTarget(file, nil); !errors.Is(err, record.ErrInvalid) {
		t.Errorf("ParseTarget(tampered file) = %v, want ErrInvalid", err)
	}
}

// TestQuoteCommand: a long command from a record is cut in an error.
func TestQuoteCommand(t *testing.T) {
	if got := quoteCommand([]string{"sh", "a\nb"}); got != `["sh" "a\nb"]` {
		t.Errorf("quoteCommand = %s", got)
	}
	if got := quoteCommand([]string{strings.Repeat("é", 300)}); len(got) > maxQuoted+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("quoteCommand(long) = %s (%d bytes)", got, len(got))
	}
}

// TestDescribe: a store's record is shown with the inputs and params it
// makes the caller's command run on, quoted, on one line, long values
// cut.
func TestDescribe(t *testing.T) {
	in := verify.SHA256([]byte("raw"))
	r, err := record.New([]record.Input{{Name: "raw", Digest: in}}, "harvest@v1.4.2",
		map[string]string{"min": "5", "note": `say "hi"`}, []string{"sh", "x.sh"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	got := Describe(r)
	for _, want := range []string{string(r.Key), `"harvest@v1.4.2"`, `"raw"=` + string(in), `"note"="say \"hi\""`, `"min"="5"`} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe = %s\nwant it to contain %s", got, want)
		}
	}
	if strings.ContainsAny(got, "\n") {
		t.Errorf("Describe = %q: not one line", got)
	}
	r.Params = map[string]string{"long": strings.Repeat("x", 10*maxQuoted)}
	if got := Describe(r); len(got) > 4*maxQuoted+len("…") {
		t.Errorf("Describe(long) is %d bytes", len(got))
	}
}

// TestRunDropsCredentials: the command of a derivation and of a check
// sees no AWS_* variable unless the runner passes it.
func TestRunDropsCredentials(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AWS_SECRET_ACCESS_KEY", "job-secret")
	t.Setenv("AWS_PROFILE", "prod")
	f := newFixture(t)
	seen := filepath.Join(t.TempDir(), "seen")
	f.setCode(t, `echo "${AWS_SECRET_ACCESS_KEY-unset} ${AWS_PROFILE-unset}" > `+seen+`; cp -r "$PINFS_INPUT_raw"/. "$PINFS_OUTPUT"/`)
	rec, _ := checkFixture(t, f)
	for _, c := range []struct {
		pass []string
		want string
	}{{nil, "unset unset\n"}, {[]string{"AWS_PROFILE"}, "unset prod\n"}} {
		f.rn.PassEnv = c.pass
		if err := Check(ctx, f.rn, rec); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(seen); err != nil || string(b) != c.want {
			t.Errorf("pass %q: the command saw %q (%v), want %q", c.pass, b, err, c.want)
		}
	}
}
