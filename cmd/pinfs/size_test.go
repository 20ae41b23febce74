package main

import "testing"

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
