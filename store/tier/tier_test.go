package tier

import (
	"net/url"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/store/blocks"
)

func TestBlockSizeIsTheReadersBlock(t *testing.T) {
	if BlockSize != blocks.BlockSize {
		t.Fatalf("tier.BlockSize %d, blocks.BlockSize %d", BlockSize, blocks.BlockSize)
	}
}

func TestBlockRoundTrip(t *testing.T) {
	b := Block{Hex: strings.Repeat("ab", 32), Index: 7, Snapshot: "sha256:" + strings.Repeat("cd", 32), Member: 42}
	q, err := url.ParseQuery(b.Query())
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBlock(b.Path(), q)
	if err != nil || got != b {
		t.Fatalf("ParseBlock(%q, %q) = %+v, %v; want %+v", b.Path(), b.Query(), got, err, b)
	}
}

func TestParseBlockRefuses(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	snap := "sha256:" + strings.Repeat("cd", 32)
	for _, c := range []struct{ path, query string }{
		{"blocks/blake3/" + hex + "/01", "snapshot=" + snap + "&member=0"},
		{"blocks/blake3/" + hex + "/-1", "snapshot=" + snap + "&member=0"},
		{"blocks/blake3/" + hex[:62] + "/0", "snapshot=" + snap + "&member=0"},
		{"blocks/blake3/" + strings.ToUpper(hex) + "/0", "snapshot=" + snap + "&member=0"},
		{"blocks/sha256/" + hex + "/0", "snapshot=" + snap + "&member=0"},
		{"blocks/blake3/" + hex + "/0", "member=0"},
		{"blocks/blake3/" + hex + "/0", "snapshot=latest&member=0"},
		{"blocks/blake3/" + hex + "/0", "snapshot=" + snap},
		{"blocks/blake3/" + hex + "/0", "snapshot=" + snap + "&member=-1"},
		{"blocks/blake3/" + hex + "/0", "snapshot=" + snap + "&member=+1"},
		{"blocks/blake3/" + hex + "/0/", "snapshot=" + snap + "&member=0"},
	} {
		q, _ := url.ParseQuery(c.query)
		if b, err := ParseBlock(c.path, q); err == nil {
			t.Errorf("ParseBlock(%q, %q) = %+v, want an error", c.path, c.query, b)
		}
	}
}

func TestMeta(t *testing.T) {
	hex := strings.Repeat("0f", 32)
	for _, kind := range []string{"manifests/sha256", "members/sha256", "bao/blake3"} {
		k, h, ok := Meta(kind + "/" + hex)
		if !ok || k != kind || h != hex {
			t.Errorf("Meta(%s/<hex>) = %q, %q, %v", kind, k, h, ok)
		}
	}
	for _, p := range []string{"gates/x/head", "runs/r/run.json", "cas/blake3/" + hex, "manifests/sha256/" + hex + "/", "/manifests/sha256/" + hex, "manifests/sha256/" + hex[:63], "plans/sha256/" + hex} {
		if _, _, ok := Meta(p); ok {
			t.Errorf("Meta(%q) accepted a path that names no served content", p)
		}
	}
	if got := MetaETag("bao/blake3", hex); got != `"blake3:`+hex+`"` {
		t.Errorf("MetaETag = %s", got)
	}
}
