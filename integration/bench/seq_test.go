package bench

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dd reads path with `dd bs=1M` to /dev/null and returns the measurement;
// the byte count is dd's, the time is the wall time of the dd process.
func (b *bench) dd(t *testing.T, name, path string, daemonPid int, want int64) measure {
	t.Helper()
	m, err := b.ddTry(t, name, path, daemonPid, want)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ddTry is dd that returns a failed read as an error.
func (b *bench) ddTry(t *testing.T, name, path string, daemonPid int, want int64) (measure, error) {
	t.Helper()
	s0 := b.sample(daemonPid)
	r := run(10*time.Minute, nil, "dd", "if="+path, "of=/dev/null", "bs=1M")
	if r.err != nil {
		return measure{}, fmt.Errorf("dd %s: %v: %s", path, r.err, firstLine(r.stderr))
	}
	n := ddBytes(r.stderr)
	m := b.done(name, s0, daemonPid, n, r.cpu)
	m.wall = r.wall // the process's own wall time, not the sampling's
	b.cpu[len(b.cpu)-1] = m
	if n != want {
		return m, fmt.Errorf("dd %s: read %d bytes, want %d: %s", path, n, want, r.stderr)
	}
	t.Logf("%s: %d bytes in %.2f s = %.3f GB/s (daemon CPU %.2f s, dd %.2f s, versitygw %.2f s)",
		name, n, m.wall.Seconds(), m.gbps(), m.daemon, m.reader, m.server)
	return m, nil
}

// ddBytes parses "N bytes (...) copied, ..." from dd's stderr.
func ddBytes(stderr string) int64 {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, " bytes") && strings.Contains(line, "copied") {
			f := strings.Fields(line)
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
