package bench

import (
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"100MB/s": 1e8, "1e8": 1e8, "1GB/s": 1e9, "64MiB/s": 64 << 20, "0": 0, "250 kB/s": 250e3, "12B/s": 12} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "-1MB/s", "MB/s"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) succeeded", bad)
		}
	}
}

func TestShapeFromEnv(t *testing.T) {
	t.Setenv(latencyEnv, "")
	t.Setenv(rateEnv, "")
	if s, err := shapeFromEnv(); err != nil || s.Latency != 20*time.Millisecond || s.Rate != 1e8 {
		t.Errorf("defaults: %+v, %v; want 20ms and 1e8 B/s", s, err)
	}
	t.Setenv(latencyEnv, "5ms")
	t.Setenv(rateEnv, "1GB/s")
	if s, err := shapeFromEnv(); err != nil || s.Latency != 5*time.Millisecond || s.Rate != 1e9 {
		t.Errorf("from the environment: %+v, %v", s, err)
	}
	t.Setenv(latencyEnv, "soon")
	if _, err := shapeFromEnv(); err == nil {
		t.Errorf("%s=soon accepted", latencyEnv)
	}
}

// TestReadaheadDefault: the default of a size flag is read from pflag's
// help line, quoted or not.
func TestReadaheadDefault(t *testing.T) {
	for line, want := range map[string]int64{
		`      --readahead-budget size   in-flight readahead of the mount (default 512MiB)`:  512 << 20,
		`      --readahead-budget size   in-flight readahead of the mount (default "1GiB")`:  1 << 30,
		`      --readahead-budget size   in-flight readahead (e.g. 2G) (default 64M)`:        64 << 20,
		`      --readahead-budget size   in-flight readahead of the mount (default 1048576)`: 1 << 20,
	} {
		m := defaultRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("no default found in %q", line)
			continue
		}
		if n, err := parseSize(m[1]); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", line, n, err, want)
		}
	}
}
