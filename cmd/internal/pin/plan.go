package pin

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
)

// PlanSchema is the schema of a shard plan.
const PlanSchema = "pinfs.plan.v1"

// MaxShards bounds the number of shards of a plan (--shards).
const MaxShards = 10000

// Plan is one listing of an S3 prefix split into shards of balanced bytes,
// with the manifest fields of the pin it leads to. Its canonical JSON is
// content addressed: plans/sha256/<hex> in the store.
type Plan struct {
	Schema   string       `json:"schema"`
	Source   PlanSource   `json:"source"`
	Manifest PlanManifest `json:"manifest"`
	Shards   []PlanShard  `json:"shards"`
}

// PlanSource is the listing a plan was made from.
type PlanSource struct {
	Bucket  string        `json:"bucket"`
	Prefix  string        `json:"prefix"`  // empty or ending in "/"
	URI     string        `json:"uri"`     // s3://bucket/prefix
	Listing verify.Digest `json:"listing"` // SHA-256 of the canonical JSON of the listing, as in the manifest
}

// PlanManifest holds the manifest fields of the pin a plan leads to.
type PlanManifest struct {
	Parents            []verify.Digest `json:"parents,omitempty"`
	Purpose            string          `json:"purpose,omitempty"`
	Transform          string          `json:"transform,omitempty"`
	RecordSchema       string          `json:"record_schema,omitempty"`
	SelectionPolicy    string          `json:"selection_policy,omitempty"`
	TombstoneWatermark *int64          `json:"tombstone_watermark,omitempty"`
	BenchmarkFence     *int64          `json:"benchmark_fence,omitempty"`
	Split              string          `json:"split"` // canonical split rule
}

// PlanShard is one shard: its objects sorted by key and their total size.
type PlanShard struct {
	Bytes   int64        `json:"bytes"`
	Objects []PlanObject `json:"objects"`
}

// PlanObject is one listed object version.
type PlanObject struct {
	Key       string `json:"key"`
	VersionID string `json:"version_id"`
	Size      int64  `json:"size"`
	ETag      string `json:"etag"`
}

// Plan lists s3://bucket/prefix once and splits its objects into n shards
// of balanced bytes: the largest object first, each to the shard with the
// fewest bytes so far (ties: the lower key, the lower shard). It stores
// the plan's canonical JSON at plans/sha256/<hex> and returns the plan,
// its bytes and its digest. The manifest fields are p.Options'.
func (p *Pinner) Plan(ctx context.Context, bucket, prefix string, n int) (*Plan, []byte, verify.Digest, error) {
	if n < 1 || n > MaxShards {
		return nil, nil, "", fmt.Errorf("plan of %d shards: want 1 to %d", n, MaxShards)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	for _, parent := range p.Parents {
		if _, err := fetchManifest(ctx, p.Store, parent); err != nil {
			return nil, nil, "", fmt.Errorf("parent: %w", err)
		}
	}
	vs, err := p.Lister.ListCurrent(ctx, bucket, prefix)
	if err != nil {
		return nil, nil, "", err
	}
	if len(vs) == 0 {
		return nil, nil, "", fmt.Errorf("s3://%s/%s: no objects to pin", bucket, prefix)
	}
	vs = slices.Clone(vs)
	slices.SortStableFunc(vs, func(a, b store.ObjectVersion) int { return strings.Compare(a.Key, b.Key) })
	if _, err := s3Items(bucket, prefix, vs); err != nil {
		return nil, nil, "", err
	}
	src, err := s3Source(bucket, prefix, vs)
	if err != nil {
		return nil, nil, "", err
	}
	pl := &Plan{
		Schema: PlanSchema,
		Source: PlanSource{Bucket: bucket, Prefix: prefix, URI: src.URI, Listing: src.Listing},
		Manifest: PlanManifest{
			Parents: p.Parents, Purpose: p.Purpose, Transform: p.Transform, RecordSchema: p.RecordSchema,
			SelectionPolicy: p.SelectionPolicy, TombstoneWatermark: p.TombstoneWatermark,
			BenchmarkFence: p.BenchmarkFence, Split: p.Split.String(),
		},
		Shards: balance(vs, n),
	}
	b, err := pl.encode()
	if err != nil {
		return nil, nil, "", err
	}
	// The plan is checked as every shard will check it, before it is stored.
	parsed, err := ParsePlan(b)
	if err != nil {
		return nil, nil, "", fmt.Errorf("plan of s3://%s/%s: %w", bucket, prefix, err)
	}
	d := verify.SHA256(b)
	if err := p.Store.Put(ctx, planKey(d), b); err != nil {
		return nil, nil, "", fmt.Errorf("storing plan %s: %w", d, err)
	}
	return parsed, b, d, nil
}

// planKey is the store key of the plan with digest d.
func planKey(d verify.Digest) string { return "plans/sha256/" + d.Hex() }

// balance splits vs into n shards of balanced bytes, each sorted by key.
func balance(vs []store.ObjectVersion, n int) []PlanShard {
	order := slices.Clone(vs)
	slices.SortFunc(order, func(a, b store.ObjectVersion) int {
		return cmp.Or(cmp.Compare(b.Size, a.Size), strings.Compare(a.Key, b.Key))
	})
	shards := make([]PlanShard, n)
	h := make(lightest, n)
	for i := range h {
		h[i] = lightShard{i: i}
	}
	for _, v := range order {
		s := &h[0]
		shards[s.i].Objects = append(shards[s.i].Objects, PlanObject{Key: v.Key, VersionID: v.VersionID, Size: v.Size, ETag: v.ETag})
		shards[s.i].Bytes += v.Size
		s.bytes += v.Size
		heap.Fix(&h, 0)
	}
	for i := range shards {
		slices.SortFunc(shards[i].Objects, func(a, b PlanObject) int { return strings.Compare(a.Key, b.Key) })
		if shards[i].Objects == nil {
			shards[i].Objects = []PlanObject{}
		}
	}
	return shards
}

// lightShard is a shard's index and bytes so far; lightest is a min-heap
// of them by bytes, then index.
type lightShard struct {
	i     int
	bytes int64
}

type lightest []lightShard

func (h lightest) Len() int { return len(h) }
func (h lightest) Less(a, b int) bool {
	return h[a].bytes < h[b].bytes || h[a].bytes == h[b].bytes && h[a].i < h[b].i
}
func (h lightest) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *lightest) Push(x any)   { *h = append(*h, x.(lightShard)) }
func (h *lightest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// LoadPlan reads and parses a plan. arg "sha256:<64 hex>" is fetched from
// the store (plans/sha256/<hex>) and must hash to that digest; anything
// else is a file, whose SHA-256 is the plan's digest. Either is read at
// most store.MaxTable bytes.
func LoadPlan(ctx context.Context, st store.Blobs, arg string) (*Plan, verify.Digest, error) {
	var b []byte
	d, err := verify.ParseDigest(arg)
	if err == nil {
		if b, err = st.Get(ctx, planKey(d)); err != nil {
			return nil, "", fmt.Errorf("plan %s: %w", d, err)
		}
		if got := verify.SHA256(b); got != d {
			return nil, "", fmt.Errorf("plan %s: the store holds bytes of %s", d, got)
		}
	} else {
		// The user's file (store.ReadUserFile): through a symbolic link,
		// but regular, and bounded as a plan in the store is.
		if b, err = store.ReadUserFile(arg, store.MaxTable); err != nil {
			return nil, "", fmt.Errorf("plan: %w", err) // it names arg
		}
		d = verify.SHA256(b)
	}
	pl, err := ParsePlan(b)
	if err != nil {
		return nil, "", fmt.Errorf("plan %s (%s): %w", arg, d, err)
	}
	return pl, d, nil
}

// ParsePlan parses a plan strictly: canonical JSON of the known fields
// only, the schema, a normalised source, 1 to 10000 shards whose objects
// are sorted by key and whose byte counts add up, every key under the
// prefix and in one shard only, and a listing digest equal to that of the
// union of the shards. A plan edited by hand is therefore refused.
func ParsePlan(b []byte) (*Plan, error) {
	pl := new(Plan)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(pl); err != nil {
		return nil, fmt.Errorf("not a pinfs plan: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not a pinfs plan: data after the plan")
	}
	if pl.Schema != PlanSchema {
		return nil, fmt.Errorf("plan schema %q, want %q", pl.Schema, PlanSchema)
	}
	if c, err := pl.encode(); err != nil || !bytes.Equal(c, b) {
		return nil, fmt.Errorf("plan is not in canonical JSON (edited?)")
	}
	if err := pl.check(); err != nil {
		return nil, err
	}
	return pl, nil
}

// check checks a decoded plan (see ParsePlan).
func (pl *Plan) check() error {
	s := pl.Source
	switch {
	case s.Bucket == "" || strings.Contains(s.Bucket, "/"):
		return fmt.Errorf("plan bucket %q: not a bucket name", s.Bucket)
	case s.Prefix != "" && !strings.HasSuffix(s.Prefix, "/"):
		return fmt.Errorf("plan prefix %q: does not end in /", s.Prefix)
	case s.URI != "s3://"+s.Bucket+"/"+s.Prefix:
		return fmt.Errorf("plan uri %q: not s3://%s/%s", s.URI, s.Bucket, s.Prefix)
	case len(pl.Shards) < 1 || len(pl.Shards) > MaxShards:
		return fmt.Errorf("plan of %d shards: want 1 to %d", len(pl.Shards), MaxShards)
	}
	if _, err := verify.ParseDigest(string(s.Listing)); err != nil {
		return fmt.Errorf("plan listing: %w", err)
	}
	for _, d := range pl.Manifest.Parents {
		if _, err := verify.ParseDigest(string(d)); err != nil {
			return fmt.Errorf("plan parent: %w", err)
		}
	}
	if split, err := ParseSplitRule(pl.Manifest.Split); err != nil || split.String() != pl.Manifest.Split {
		return fmt.Errorf("plan split %q: not a canonical split rule", pl.Manifest.Split)
	}
	if err := CheckTransform(pl.Manifest.Transform); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	type owned struct {
		key   string
		shard int
	}
	var all []owned
	for i, sh := range pl.Shards {
		var sum int64
		for j, o := range sh.Objects {
			switch {
			case !strings.HasPrefix(o.Key, s.Prefix) || o.Key == s.Prefix:
				return fmt.Errorf("plan shard %d: key %q is not under %s", i, o.Key, s.URI)
			case j > 0 && sh.Objects[j-1].Key >= o.Key:
				return fmt.Errorf("plan shard %d: key %q after %q: keys not sorted and unique", i, o.Key, sh.Objects[j-1].Key)
			case o.Size < 0 || o.Size > maxObjectSize:
				return fmt.Errorf("plan shard %d: %q has size %d", i, o.Key, o.Size)
			}
			sum += o.Size
			all = append(all, owned{o.Key, i})
		}
		if sum != sh.Bytes {
			return fmt.Errorf("plan shard %d: %d bytes, but its objects add up to %d", i, sh.Bytes, sum)
		}
	}
	slices.SortFunc(all, func(a, b owned) int { return cmp.Or(strings.Compare(a.key, b.key), a.shard-b.shard) })
	for j := 1; j < len(all); j++ {
		if all[j].key == all[j-1].key {
			return fmt.Errorf("plan: key %q in shards %d and %d", all[j].key, all[j-1].shard, all[j].shard)
		}
	}
	if len(all) == 0 {
		return fmt.Errorf("plan of %s: no objects", s.URI)
	}
	vs := pl.listing()
	if _, err := s3Items(s.Bucket, s.Prefix, vs); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	src, err := s3Source(s.Bucket, s.Prefix, vs)
	if err != nil {
		return err
	}
	if src.Listing != s.Listing {
		return fmt.Errorf("plan listing %s: its objects give %s (edited?)", s.Listing, src.Listing)
	}
	return nil
}

// maxObjectSize bounds an object's size in a plan (that of the digest cache).
const maxObjectSize = 1 << 50

// Options returns base with the manifest fields of the plan filled in.
func (pl *Plan) Options(base Options) (Options, error) {
	m := pl.Manifest
	split, err := ParseSplitRule(m.Split)
	if err != nil {
		return base, err
	}
	if err := CheckTransform(m.Transform); err != nil {
		return base, err
	}
	base.Parents = slices.Clone(m.Parents)
	base.Purpose, base.Transform, base.RecordSchema, base.SelectionPolicy = m.Purpose, m.Transform, m.RecordSchema, m.SelectionPolicy
	base.TombstoneWatermark, base.BenchmarkFence = m.TombstoneWatermark, m.BenchmarkFence
	base.Split = split
	return base, nil
}

// Len is the number of shards.
func (pl *Plan) Len() int { return len(pl.Shards) }

// Summary is "O objects, B bytes in N shards (largest X, smallest Y bytes)".
func (pl *Plan) Summary() string {
	var objects int
	var total, largest int64
	smallest := int64(-1)
	for _, s := range pl.Shards {
		objects += len(s.Objects)
		total += s.Bytes
		largest = max(largest, s.Bytes)
		if smallest < 0 || s.Bytes < smallest {
			smallest = s.Bytes
		}
	}
	return fmt.Sprintf("%d objects, %d bytes in %d shards (largest %d, smallest %d bytes)",
		objects, total, len(pl.Shards), largest, max(smallest, 0))
}

// source is the manifest source of the plan's listing: ParsePlan checked
// that its listing digest is that of the plan's objects.
func (pl *Plan) source() verify.Source {
	return verify.Source{ID: "s3", URI: pl.Source.URI, Listing: pl.Source.Listing}
}

// listing returns the plan's objects as one listing sorted by key.
func (pl *Plan) listing() []store.ObjectVersion {
	var vs []store.ObjectVersion
	for _, s := range pl.Shards {
		vs = append(vs, s.versions()...)
	}
	slices.SortFunc(vs, func(a, b store.ObjectVersion) int { return strings.Compare(a.Key, b.Key) })
	return vs
}

// versions returns the shard's objects as listed versions.
func (s PlanShard) versions() []store.ObjectVersion {
	vs := make([]store.ObjectVersion, len(s.Objects))
	for i, o := range s.Objects {
		vs[i] = store.ObjectVersion{Key: o.Key, VersionID: o.VersionID, Size: o.Size, ETag: o.ETag}
	}
	return vs
}
