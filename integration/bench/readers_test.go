package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment of a reader process (TestReaderProcess).
const (
	readerListEnv = "PINFS_BENCH_READER_LIST" // file of paths, one a line
	readerSizeEnv = "PINFS_BENCH_READER_SIZE" // the size every file must have
)

// TestReaderProcess is not a test: it is one reader process of the
// shuffled small-files scenario (a data loader worker), started by
// readProcs. It reads the files listed in $PINFS_BENCH_READER_LIST in
// order, each whole with os.ReadFile, and fails on a short one.
func TestReaderProcess(t *testing.T) {
	list := os.Getenv(readerListEnv)
	if list == "" {
		t.Skip("a helper process of make bench")
	}
	size, err := strconv.Atoi(os.Getenv(readerSizeEnv))
	if err != nil {
		t.Fatalf("%s: %v", readerSizeEnv, err)
	}
	f, err := os.Open(list)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		data, err := os.ReadFile(s.Text())
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != size {
			t.Fatalf("%s: %d bytes, want %d", s.Text(), len(data), size)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// readProcs reads root/members[i] with procs reader processes, as a data
// loader's workers do: process k reads members k, k+procs, k+2·procs, …
// in that order. It returns the wall time from the first start to the
// last exit, the processes' CPU seconds, and the first failure.
func readProcs(t *testing.T, root string, members []string, size int, procs int) (time.Duration, float64, error) {
	t.Helper()
	dir := t.TempDir()
	envs := make([][]string, procs)
	for k := range procs {
		var sb strings.Builder
		for i := k; i < len(members); i += procs {
			sb.WriteString(filepath.Join(root, members[i]) + "\n")
		}
		list := filepath.Join(dir, fmt.Sprintf("list-%d", k))
		if err := os.WriteFile(list, []byte(sb.String()), 0o644); err != nil {
			return 0, 0, err
		}
		envs[k] = []string{readerListEnv + "=" + list, readerSizeEnv + "=" + strconv.Itoa(size)}
	}
	return helperProcs("TestReaderProcess", envs)
}
