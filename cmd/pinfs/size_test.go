package main

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "4096": 4096, "512MiB": 512 << 20, "2G": 2 << 30, "10GiB": 10 << 30, "3k": 3 << 10, "1TB": 1 << 40, "7M": 7 << 20,
	} {
		var s byteSize
		if err := s.Set(in); err != nil || int64(s) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, s, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1X", "MiB", "1.5G", "99999999999T"} {
		var s byteSize
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted as %d", bad, s)
		}
	}
	s := byteSize(256 << 20)
	if s.String() != "256MiB" {
		t.Errorf("String() = %q", s.String())
	}
}

func TestMemoryTargetFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    int64
		bad     bool
		memSet  bool
		raGiven bool
	}{
		{nil, 0, false, false, false},
		{[]string{"--memory-target", "2GiB"}, 2 << 30, false, false, false},
		{[]string{"--memory-target", "0"}, 0, true, false, false},
		{[]string{"--memory-target", "1GiB", "--cache-mem", "64MiB", "--readahead-budget", "32MiB"}, 1 << 30, false, true, true},
	} {
		fs := pflag.NewFlagSet("mount", pflag.ContinueOnError)
		cacheMem := byteSize(256 << 20)
		fs.Var(&cacheMem, "cache-mem", "")
		readaheadFlags(fs)
		m := memoryTargetFlag(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		got, err := m.value()
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%q: value %d, %v; want %d, error %v", tc.args, got, err, tc.want, tc.bad)
		}
		if m.given("cache-mem") != tc.memSet || m.given("readahead-budget") != tc.raGiven {
			t.Errorf("%q: given cache-mem %v readahead-budget %v; want %v %v", tc.args, m.given("cache-mem"), m.given("readahead-budget"), tc.memSet, tc.raGiven)
		}
	}
}
