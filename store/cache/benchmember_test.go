package cache

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkDiskMember chooses how a member of many blocks becomes one
// file (issue 25): "part" is the tier's way, each block written once at its
// offset into the member's partial file, renamed when the last lands;
// "assemble" is the other design, each block written to a file of its own
// (as the earlier layout did) and, when the last is there, copied into one
// member file and the block files removed. One op is one member of 32
// blocks, Put block by block and flushed every 4 blocks (a reader's pace).
// It reports the files created and the bytes written (wchar of
// /proc/self/io: bytes passed to write calls) per member:
//
//	go test -run '^$' -bench DiskMember -count 3 ./store/cache/
func BenchmarkDiskMember(b *testing.B) {
	const nb = 32
	size := int64(nb*BlockSize - 1000)
	data := memberData(key(0, 0), size)
	for _, mode := range []string{"part", "assemble"} {
		b.Run("layout="+mode, func(b *testing.B) {
			d := openDisk(b, b.TempDir(), 1<<40)
			b.SetBytes(size)
			var files int64
			w0 := wchar(b)
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				k := key(i, 0)
				switch mode {
				case "part":
					for j := range int64(nb) {
						if err := d.Put(Key{k.Digest, j}, size, blockOf(data, j)); err != nil {
							b.Fatal(err)
						}
						if j%4 == 3 {
							d.Flush()
						}
					}
					d.Flush()
					files++
				case "assemble":
					files += assemble(b, d, k, data)
				}
				if _, err := os.Lstat(d.MemberPath(k.Digest)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				d.RemoveMember(k.Digest) // the disk's space, not part of the cost
				b.StartTimer()
			}
			b.ReportMetric(float64(files)/float64(b.N), "files/op")
			b.ReportMetric(float64(wchar(b)-w0)/float64(b.N)/float64(size), "written/byte")
		})
	}
}

// assemble writes data, k's member, as the other design would: one block
// file per block, named <hex>-<index> as the earlier layout named them,
// staged as the tier stages a file (O_TMPFILE, linkat), then copied into
// one member file, staged the same way, and the block files removed. It
// returns the files it created.
func assemble(b *testing.B, d *Disk, k Key, data []byte) int64 {
	size := int64(len(data))
	dir := filepath.Dir(d.MemberPath(k.Digest))
	var names []string
	for j := range numBlocks(size) {
		name := d.MemberPath(k.Digest) + "-" + strconv.FormatInt(j, 10)
		s, err := d.stage(dir, blockOf(data, j))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.place(s, name, blockOf(data, j)); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	buf := make([]byte, 0, size)
	for _, n := range names {
		blk, err := os.ReadFile(n)
		if err != nil {
			b.Fatal(err)
		}
		buf = append(buf, blk...)
	}
	s, err := d.stage(dir, buf)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.place(s, d.MemberPath(k.Digest), buf); err != nil {
		b.Fatal(err)
	}
	for _, n := range names {
		os.Remove(n)
	}
	return int64(len(names)) + 1
}

// wchar returns the bytes this process has passed to write calls.
func wchar(b *testing.B) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Skip(fmt.Sprint("no wchar in /proc/self/io: ", sc.Err()))
	return 0
}
