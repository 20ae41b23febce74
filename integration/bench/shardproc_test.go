package bench

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Environment of a shard loader process (TestShardLoaderProcess).
const (
	shardListEnv    = "PINFS_BENCH_SHARD_LIST"    // file of "path\tsize\tentries" lines
	shardWorkersEnv = "PINFS_BENCH_SHARD_WORKERS" // workers of the process
)

// TestShardLoaderProcess is not a test: it is one loader process of the
// shaped shard loader (a training job's data loader with its workers),
// started by shardProcsRun. Its workers take the shards of
// $PINFS_BENCH_SHARD_LIST in order, one at a time, and read each front to
// back in 1 MiB reads, walking its tar entries; a shard of another size
// or entry count fails it.
func TestShardLoaderProcess(t *testing.T) {
	list := os.Getenv(shardListEnv)
	if list == "" {
		t.Skip("a helper process of make bench")
	}
	workers, err := strconv.Atoi(os.Getenv(shardWorkersEnv))
	if err != nil || workers < 1 {
		t.Fatalf("%s=%q: want a count of workers", shardWorkersEnv, os.Getenv(shardWorkersEnv))
	}
	b, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(lines); i = int(next.Add(1) - 1) {
				path, size, entries, err := shardLine(lines[i])
				if err == nil {
					err = readShard(path, size, entries)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// readShard reads the tar shard at path front to back through a 1 MiB
// buffer (so the file sees 1 MiB reads), reading every entry whole, and
// fails unless it holds entries entries and size bytes.
func readShard(path string, size int64, entries int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := &countReader{r: f}
	tr := tar.NewReader(bufio.NewReaderSize(cr, 1<<20))
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: entry %d: %v", path, n, err)
		}
		if k, err := io.Copy(io.Discard, tr); err != nil || k != h.Size {
			return fmt.Errorf("%s: %s: read %d of %d bytes: %v", path, h.Name, k, h.Size, err)
		}
		n++
	}
	if _, err := io.Copy(io.Discard, cr); err != nil { // the end of archive's padding
		return fmt.Errorf("%s: %v", path, err)
	}
	if n != entries || cr.n != size {
		return fmt.Errorf("%s: %d entries in %d bytes, want %d in %d", path, n, cr.n, entries, size)
	}
	return nil
}

// helperProcs runs this test binary once per envs entry with
// -test.run=^name$ and that environment added, all at once, bounded by 10
// minutes; it returns the wall time from the first start to the last
// exit, the processes' CPU seconds and the first failure.
func helperProcs(name string, envs [][]string) (time.Duration, float64, error) {
	cmds := make([]*exec.Cmd, len(envs))
	outs := make([]strings.Builder, len(envs))
	for k, env := range envs {
		cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = &outs[k], &outs[k]
		cmds[k] = cmd
	}
	start := time.Now()
	for k, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:k] {
				c.Process.Kill()
				c.Wait()
			}
			return 0, 0, err
		}
	}
	timer := time.AfterFunc(10*time.Minute, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer timer.Stop()
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for k, cmd := range cmds {
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				errs[k] = fmt.Errorf("%s process %d: %v: %s", name, k, err, strings.TrimSpace(outs[k].String()))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	var cpu float64
	for _, cmd := range cmds {
		if ps := cmd.ProcessState; ps != nil {
			cpu += ps.UserTime().Seconds() + ps.SystemTime().Seconds()
		}
	}
	return wall, cpu, errors.Join(errs...)
}
