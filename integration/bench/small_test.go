package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// shuffledProcs is the number of reader processes of the shuffled row.
const shuffledProcs = 4

// rawSmall GETs the small objects in order (indices into b.small) with
// workers parallel GETs of client c, cold server-side state as every S3
// measurement, best of two, and returns the faster run.
func (b *bench) rawSmall(t *testing.T, ctx context.Context, c *s3.Client, name string, order []int, workers int) measure {
	t.Helper()
	var best measure
	for run := range 2 {
		dropCaches(t)
		b.warmServer(t, b.small...)
		s0 := b.sample(0)
		err := parallel(len(order), workers, func(i int, buf []byte) error {
			o := b.small[order[i]]
			_, err := getRange(ctx, c, "data", o.key, o.version, 0, -1, buf)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := b.done(fmt.Sprintf("%s (run %d)", name, run+1), s0, 0, smallCount*smallSize, -1)
		if best.wall == 0 || m.wall < best.wall {
			best = m
		}
	}
	return best
}

// readThreads reads root/member of every small object in order with
// workers goroutines of this process (os.ReadFile), checking sizes.
func (b *bench) readThreads(root string, order []int, workers int) error {
	errc := make(chan error, 1)
	go func() {
		errc <- parallel(len(order), workers, func(i int, _ []byte) error {
			o := b.small[order[i]]
			data, err := os.ReadFile(filepath.Join(root, o.member))
			if err == nil && len(data) != smallSize {
				err = fmt.Errorf("%s: %d bytes, want %d", o.member, len(data), smallSize)
			}
			return err
		})
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("%d readers of %d files did not finish within 5 minutes", workers, len(order))
	}
}

// smallFiles is scenario 2: the 2000 × 256 KiB objects read cold by 16
// readers (threads of one process), then in shuffled order by 4 reader
// processes, through pinfs, the raw client and s3fs.
func (b *bench) smallFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	inOrder := make([]int, smallCount)
	for i := range inOrder {
		inOrder[i] = i
	}
	const total = smallCount * smallSize

	raw := b.rawSmall(t, ctx, b.client, "raw GET 2000 × 256 KiB, 16 at a time", inOrder, smallReaders)
	b.rawSmall16 = raw
	m := b.mount(t, "2000 × 256 KiB cold, 16 readers", b.env, b.smallDigest, storeURL, t.TempDir())
	dropCaches(t)
	b.warmServer(t, b.small...)
	s0 := b.sample(m.pid)
	if err := b.readThreads(m.dir, inOrder, smallReaders); err != nil {
		t.Fatalf("reading the mount: %v", err)
	}
	pm := b.done("pinfs 2000 × 256 KiB cold, 16 readers (os.ReadFile)", s0, m.pid, total, -1)
	b.finish(t, m)
	s3, s3err := b.s3fsSmall(t, b.s3fsLoopback(), "s3fs 2000 × 256 KiB cold, 16 readers (os.ReadFile)", func(dir string) (time.Duration, float64, error) {
		return 0, -1, b.readThreads(dir, inOrder, smallReaders)
	})
	b.judge(row{scenario: "2000 × 256 KiB cold, 16 parallel readers (time)", pinfs: secs(pm.wall),
		raw: secs(raw.wall) + " (16 GETs at a time, best of 2)", s3fs: s3fsCell(secs(s3.wall), s3err),
		target: fmt.Sprintf("≤ %.2f × raw", targetSmallVsRaw), cpu: perGB(pm.daemon, pm.bytes)},
		pm.wall.Seconds()/raw.wall.Seconds(), false, targetSmallVsRaw, "")

	// The same files in a shuffled order, by reader processes.
	shuffled := rand.New(rand.NewPCG(10, 10)).Perm(smallCount)
	members := make([]string, smallCount)
	for i, j := range shuffled {
		members[i] = b.small[j].member
	}
	raw4 := b.rawSmall(t, ctx, b.client, "raw GET 2000 × 256 KiB, shuffled, 4 at a time", shuffled, shuffledProcs)
	m = b.mount(t, "2000 × 256 KiB cold, shuffled, 4 reader processes", b.env, b.smallDigest, storeURL, t.TempDir())
	dropCaches(t)
	b.warmServer(t, b.small...)
	s0 = b.sample(m.pid)
	wall, cpu, err := readProcs(t, m.dir, members, smallSize, shuffledProcs)
	if err != nil {
		t.Fatalf("reading the mount: %v", err)
	}
	sm := b.done("pinfs 2000 × 256 KiB cold, shuffled, 4 reader processes", s0, m.pid, total, cpu)
	sm.wall = wall
	b.cpu[len(b.cpu)-1] = sm
	b.finish(t, m)
	s3s, s3err := b.s3fsSmall(t, b.s3fsLoopback(), "s3fs 2000 × 256 KiB cold, shuffled, 4 reader processes", func(dir string) (time.Duration, float64, error) {
		return readProcs(t, dir, members, smallSize, shuffledProcs)
	})
	b.judge(row{scenario: "2000 × 256 KiB cold, shuffled order, 4 reader processes (time)", pinfs: secs(sm.wall),
		raw: secs(raw4.wall) + " (same order, 4 GETs at a time, best of 2)", s3fs: s3fsCell(secs(s3s.wall), s3err),
		target: fmt.Sprintf("≤ %.2f × raw", targetShuffledVsRaw), cpu: perGB(sm.daemon, sm.bytes)},
		sm.wall.Seconds()/raw4.wall.Seconds(), false, targetShuffledVsRaw, "")
}

// s3fsSmall mounts data:/small with s3fs as conf says (fresh, page cache
// dropped, server warmed) and measures read(dir), which returns its own
// wall time and CPU when it runs other processes (cpu >= 0), or 0 and -1
// when it reads in this process.
func (b *bench) s3fsSmall(t *testing.T, conf s3fsConf, name string, read func(dir string) (time.Duration, float64, error)) (measure, error) {
	sm, err := b.mountS3fsConf(t, conf, "data", "small")
	if err != nil {
		b.note("%s: %v", name, err)
		return measure{}, err
	}
	defer sm.unmount(t)
	dropCaches(t)
	b.warmServer(t, b.small...)
	s0 := b.sample(sm.pid)
	wall, cpu, err := read(sm.dir)
	if err != nil {
		err = fmt.Errorf("s3fs read failed: %v", err)
		b.note("%s: %v", name, err)
		return measure{}, err
	}
	m := b.done(name+" (daemon CPU = s3fs)", s0, sm.pid, smallCount*smallSize, cpu)
	if cpu >= 0 {
		m.wall = wall
		b.cpu[len(b.cpu)-1] = m
	}
	return m, nil
}
