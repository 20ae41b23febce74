package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a pflag.Value for sizes such as 512MiB, 2G, 10GiB or 0.
// K, M, G and T are binary multiples, with or without "iB".
type byteSize int64

func (s *byteSize) String() string {
	v := int64(*s)
	for i := 3; i >= 0 && v != 0; i-- {
		if shift := 10 * uint(i+1); v%(1<<shift) == 0 {
			return fmt.Sprintf("%d%ciB", v>>shift, "KMGT"[i])
		}
	}
	return strconv.FormatInt(v, 10)
}

func (s *byteSize) Set(text string) error {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(text), "B"), "i")
	shift := uint(0)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]&^0x20); i >= 0 {
			shift = 10 * uint(i+1)
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)>>shift {
		return fmt.Errorf("%q is not a size like 512MiB, 2G or 0", text)
	}
	*s = byteSize(v << shift)
	return nil
}

func (s *byteSize) Type() string { return "size" }
