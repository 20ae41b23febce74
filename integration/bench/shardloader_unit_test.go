package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadShard checks the shard loader's reader on a small shard: it
// accepts the shard as made and fails one with fewer bytes or another
// entry count.
func TestReadShard(t *testing.T) {
	data, entries := makeShard(3, 4<<20)
	if len(data) > 4<<20 || len(data) < 2<<20 || entries < 4 || entries%2 != 0 {
		t.Fatalf("makeShard(3, 4 MiB): %d bytes, %d entries", len(data), entries)
	}
	again, _ := makeShard(3, 4<<20)
	if string(again) != string(data) {
		t.Fatal("makeShard is not deterministic")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "shard.tar")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := readShard(p, int64(len(data)), entries); err != nil {
		t.Fatalf("readShard of the shard as made: %v", err)
	}
	if err := readShard(p, int64(len(data)), entries+2); err == nil {
		t.Error("readShard accepted another entry count")
	}
	cut := filepath.Join(dir, "cut.tar")
	if err := os.WriteFile(cut, data[:len(data)-2048-512], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := readShard(cut, int64(len(data)), entries); err == nil {
		t.Error("readShard accepted a shard cut short")
	}
}

func TestShardLine(t *testing.T) {
	p, size, n, err := shardLine("/m/shard-000001.tar\t134217216\t248")
	if err != nil || p != "/m/shard-000001.tar" || size != 134217216 || n != 248 {
		t.Errorf("shardLine = %q %d %d %v", p, size, n, err)
	}
	for _, bad := range []string{"/m/a.tar\t12", "/m/a.tar\tx\t3", "/m/a.tar\t12\ty", strings.Repeat("\t", 3)} {
		if _, _, _, err := shardLine(bad); err == nil {
			t.Errorf("shardLine(%q) accepted it", bad)
		}
	}
}
