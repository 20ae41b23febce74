package derive_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/derive"
)

var (
	dA = verify.SHA256([]byte("a"))
	dB = verify.SHA256([]byte("b"))
	dC = verify.SHA256([]byte("c"))
)

// complete returns a checked record with its output and time set.
func complete(t testing.TB) *derive.Record {
	t.Helper()
	r, err := derive.New([]derive.Input{{"exports", dA}, {"base", dB}}, "harvest@v1.4.2",
		map[string]string{"min_agreement": "5", "boundary.weight": "0.5"}, []string{"python3", "harvest.py", "--fast"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	r.Output, r.Time = dC, "2026-12-01T13:40:00Z"
	return r
}

func TestRoundTrip(t *testing.T) {
	r := complete(t)
	if r.Inputs[0].Name != "base" {
		t.Fatalf("inputs not sorted by name: %+v", r.Inputs)
	}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1024 {
		t.Errorf("record is %d bytes, want about 1 KB at most for a small derivation", len(b))
	}
	got, err := derive.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("re-encoding changed the record:\n%s\n%s", b, b2)
	}
	if !strings.HasPrefix(string(b), `{"command":["python3","harvest.py","--fast"],"inputs":[{"digest":"`) {
		t.Errorf("not canonical (sorted keys, no spaces): %s", b)
	}
}

// TestKeyRule: the key covers every field but key, output and time, and
// does not depend on the order inputs and params were given in.
func TestKeyRule(t *testing.T) {
	base := complete(t)
	same, err := derive.New([]derive.Input{{"base", dB}, {"exports", dA}}, "harvest@v1.4.2",
		map[string]string{"boundary.weight": "0.5", "min_agreement": "5"}, []string{"python3", "harvest.py", "--fast"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	if same.Key != base.Key {
		t.Errorf("same derivation given in another order: key %s, want %s", same.Key, base.Key)
	}
	other := *base
	other.Output, other.Time = dA, "2027-01-01T00:00:00Z"
	if b, err := other.Encode(); err != nil {
		t.Errorf("output and time are outside the key, but changing them broke the record: %v (%s)", err, b)
	}
	changes := map[string]func(*derive.Record){
		"input digest": func(r *derive.Record) { r.Inputs[0].Digest = dC },
		"input name":   func(r *derive.Record) { r.Inputs[0].Name = "aaa" },
		"transform":    func(r *derive.Record) { r.Transform = "harvest@v1.4.3" },
		"param value":  func(r *derive.Record) { r.Params["min_agreement"] = "6" },
		"param added":  func(r *derive.Record) { r.Params["x"] = "" },
		"command":      func(r *derive.Record) { r.Command[2] = "--slow" },
		"split":        func(r *derive.Record) { r.Split = "none" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			r := complete(t)
			change(r)
			_, err := r.Encode()
			if !errors.Is(err, derive.ErrInvalid) || !strings.Contains(err.Error(), "not the key of its fields") {
				t.Fatalf("a record changed after its key was set: Encode err = %v, want a key mismatch", err)
			}
			n, err := derive.New(r.Inputs, r.Transform, r.Params, r.Command, r.Split)
			if err != nil {
				t.Fatal(err)
			}
			if n.Key == base.Key {
				t.Fatalf("changing the %s kept the key %s", name, n.Key)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	good, err := complete(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	s := string(good)
	cases := map[string]string{
		"tampered transform": strings.Replace(s, "v1.4.2", "v1.4.3", 1),
		"unknown field":      strings.Replace(s, `{"command"`, `{"extra":1,"command"`, 1),
		"duplicate field":    strings.Replace(s, `{"command"`, `{"split":"none","command"`, 1),
		"other schema":       strings.Replace(s, derive.Schema, "pinfs.derivation.v2", 1),
		"bad time":           strings.Replace(s, "2026-12-01T13:40:00Z", "2026-12-01 13:40", 1),
		"local time":         strings.Replace(s, "2026-12-01T13:40:00Z", "2026-12-01T13:40:00+01:00", 1),
		"no params":          strings.Replace(s, `"params":{"boundary.weight":"0.5","min_agreement":"5"}`, `"params":null`, 1),
		"output not digest":  strings.Replace(s, string(dC), "latest", 1),
		"trailing data":      s + "{}",
		"not json":           s[:len(s)-1],
		"too big":            strings.Replace(s, `"--fast"`, `"`+strings.Repeat("x", derive.MaxSize)+`"`, 1),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if in == s {
				t.Fatal("the case changes nothing")
			}
			if _, err := derive.Parse([]byte(in)); !errors.Is(err, derive.ErrInvalid) {
				t.Fatalf("Parse = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	in := []derive.Input{{"raw", dA}}
	cmd := []string{"sh", "x.sh"}
	cases := map[string]func() (*derive.Record, error){
		"no inputs": func() (*derive.Record, error) { return derive.New(nil, "h@1", nil, cmd, "dir") },
		"alias input": func() (*derive.Record, error) {
			return derive.New([]derive.Input{{"raw", "latest"}}, "h@1", nil, cmd, "dir")
		},
		"prefix input": func() (*derive.Record, error) {
			return derive.New([]derive.Input{{"raw", "sha256:abcdef"}}, "h@1", nil, cmd, "dir")
		},
		"bad name": func() (*derive.Record, error) {
			return derive.New([]derive.Input{{"1raw", dA}}, "h@1", nil, cmd, "dir")
		},
		"name with dash": func() (*derive.Record, error) {
			return derive.New([]derive.Input{{"raw-x", dA}}, "h@1", nil, cmd, "dir")
		},
		"names collide": func() (*derive.Record, error) {
			return derive.New([]derive.Input{{"raw", dA}, {"RAW", dB}}, "h@1", nil, cmd, "dir")
		},
		"params collide": func() (*derive.Record, error) {
			return derive.New(in, "h@1", map[string]string{"a.b": "1", "a-b": "2"}, cmd, "dir")
		},
		"bad param key": func() (*derive.Record, error) {
			return derive.New(in, "h@1", map[string]string{"a b": "1"}, cmd, "dir")
		},
		"control in value": func() (*derive.Record, error) {
			return derive.New(in, "h@1", map[string]string{"a": "1\n2"}, cmd, "dir")
		},
		"no command":       func() (*derive.Record, error) { return derive.New(in, "h@1", nil, nil, "dir") },
		"empty command":    func() (*derive.Record, error) { return derive.New(in, "h@1", nil, []string{""}, "dir") },
		"NUL in argument":  func() (*derive.Record, error) { return derive.New(in, "h@1", nil, []string{"sh", "a\x00"}, "dir") },
		"no split":         func() (*derive.Record, error) { return derive.New(in, "h@1", nil, cmd, "") },
		"bare transform":   func() (*derive.Record, error) { return derive.New(in, "harvest", nil, cmd, "dir") },
		"tag transform":    func() (*derive.Record, error) { return derive.New(in, "harvest:v1", nil, cmd, "dir") },
		"no version":       func() (*derive.Record, error) { return derive.New(in, "harvest@", nil, cmd, "dir") },
		"no name":          func() (*derive.Record, error) { return derive.New(in, "@v1", nil, cmd, "dir") },
		"space in version": func() (*derive.Record, error) { return derive.New(in, "harvest@v1 2", nil, cmd, "dir") },
		"huge version":     func() (*derive.Record, error) { return derive.New(in, "h@"+strings.Repeat("1", 300), nil, cmd, "dir") },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if r, err := f(); err == nil {
				t.Fatalf("New accepted it: %+v", r)
			}
		})
	}
	for _, v := range []string{"harvest@v1.4.2", "registry.example/team/harvest@sha256:" + dA.Hex(), "git@github.com:x/y@0123abc", "h@1"} {
		if err := derive.CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q) = %v, want nil", v, err)
		}
	}
}

func TestEnvNames(t *testing.T) {
	if got := derive.InputEnv("raw"); len(got) != 2 || got[0] != "PINFS_INPUT_raw" || got[1] != "PINFS_INPUT_RAW" {
		t.Errorf("InputEnv(raw) = %v", got)
	}
	if got := derive.InputEnv("RAW"); len(got) != 1 || got[0] != "PINFS_INPUT_RAW" {
		t.Errorf("InputEnv(RAW) = %v", got)
	}
	if got := derive.ParamEnv("boundary.weight-x"); got != "PINFS_PARAM_BOUNDARY_WEIGHT_X" {
		t.Errorf("ParamEnv = %q", got)
	}
}

// FuzzParse: Parse never panics, and what it accepts re-encodes to the
// same canonical bytes with the same key.
func FuzzParse(f *testing.F) {
	good, err := complete(f).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := derive.Parse(b)
		if err != nil {
			return
		}
		out, err := r.Encode()
		if err != nil {
			t.Fatalf("Parse accepted what Encode refuses: %v", err)
		}
		r2, err := derive.Parse(out)
		if err != nil || r2.Key != r.Key {
			t.Fatalf("re-encoded record does not parse to the same key: %v", err)
		}
	})
}
