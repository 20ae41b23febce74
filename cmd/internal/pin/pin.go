// Package pin builds snapshots: it lists a source, reads every object once
// at its exact version, computes its BLAKE3 digest and Bao outboard, and
// writes the outboards, the member table and the manifest to a store.
package pin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/versions"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// Options are the manifest fields and knobs of one pin.
type Options struct {
	Parents            []verify.Digest
	Purpose            string
	Transform          string
	RecordSchema       string
	SelectionPolicy    string
	TombstoneWatermark *int64
	BenchmarkFence     *int64
	Split              SplitRule
	Jobs               int       // objects hashed in parallel; <= 0 means 8
	Progress           *Progress // nil for quiet
	// Rehash reads every member even when a parent or the digest cache
	// knows its version; the cache is then only audited.
	Rehash bool
}

// Pinner writes pins into Store. Lister lists S3 sources; it may be nil
// for directory pins.
type Pinner struct {
	Store  store.Store
	Lister store.Lister
	Options

	stats Stats // counts of the last S3, Shard or Merge

	// openCache opens the digest cache of a source; nil means
	// versions.Open on Store. Tests wrap it to watch the checkpoints.
	openCache func(bucket, prefix string) (cacheIndex, error)

	// Test hooks, nil outside tests: afterWalk runs once a directory has
	// been listed, afterHash after a directory file has been hashed and
	// before its bytes are stored.
	afterWalk func()
	afterHash func(file string)
}

// item is one object to pin before it is hashed.
type item struct {
	path string
	size int64
	obj  store.Object // S3 items: the exact version
	// Directory items: the file to copy into the store (its path, for
	// messages and hooks), the directory it is opened beneath (at path)
	// and the identity the walk saw.
	file string
	dir  *dirRoot
	id   fileID
	m    verify.Member
}

// S3 pins the current version of every object under s3://bucket/prefix.
// Mount paths are the keys relative to prefix.
//
// A listing pages through the prefix, so keys written or deleted while it
// runs could give a set of versions the prefix never held at once. S3
// therefore lists the prefix again once every object is hashed and writes
// the manifest only when both listings name the same keys at the same
// current versions; otherwise it fails with an error wrapping ErrChanged
// that names the keys added, deleted or given a new version.
func (p *Pinner) S3(ctx context.Context, bucket, prefix string) (verify.Digest, error) {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	vs, err := p.Lister.ListCurrent(ctx, bucket, prefix)
	if err != nil {
		return "", err
	}
	if len(vs) == 0 {
		return "", fmt.Errorf("s3://%s/%s: no objects to pin", bucket, prefix)
	}
	items, err := s3Items(bucket, prefix, vs)
	if err != nil {
		return "", err
	}
	src, err := s3Source(bucket, prefix, vs)
	if err != nil {
		return "", err
	}
	run, err := p.hashVersions(ctx, src, bucket, prefix, items)
	if err != nil {
		return "", err
	}
	if err := p.relist(ctx, bucket, prefix, vs); err != nil {
		run.finish(ctx, nil) // the digests read are right whatever the listing
		return "", err
	}
	d, err := p.write(ctx, src, items)
	if err != nil {
		run.finish(ctx, nil)
		return "", err
	}
	live := make([]versions.Entry, len(items))
	for i, it := range items {
		live[i] = entryOf(it)
	}
	run.finish(ctx, live)
	return d, nil
}

// s3Items returns the items to hash for the listing vs of bucket/prefix
// (prefix ends in "/" or is empty). A key that gives no safe mount path or
// a version that is not pinnable fails, naming up to ten of them.
func s3Items(bucket, prefix string, vs []store.ObjectVersion) ([]*item, error) {
	var items []*item
	var bad []string
	for _, v := range vs {
		path := strings.TrimPrefix(v.Key, prefix)
		obj, err := store.NewVersion(bucket, v.Key, v.VersionID)
		if err == nil {
			err = verify.CheckPath(path)
		}
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		items = append(items, &item{path: path, size: v.Size, obj: obj, m: verify.Member{
			S3: &verify.S3Source{Bucket: bucket, Key: v.Key, VersionID: v.VersionID, ETag: v.ETag},
		}})
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("s3://%s/%s: %s", bucket, prefix, summarize(bad))
	}
	return items, nil
}

// s3Source is the manifest source of a pin of bucket/prefix from the
// listing vs (sorted by key): its URI and the SHA-256 of the canonical
// JSON of the listing.
func s3Source(bucket, prefix string, vs []store.ObjectVersion) (verify.Source, error) {
	listing, err := listingJSON(vs)
	if err != nil {
		return verify.Source{}, err
	}
	return verify.Source{ID: "s3", URI: "s3://" + bucket + "/" + prefix, Listing: verify.SHA256(listing)}, nil
}

// pin hashes items and writes the member table and the manifest.
func (p *Pinner) pin(ctx context.Context, src verify.Source, items []*item) (verify.Digest, error) {
	if err := p.hashAll(ctx, src, items); err != nil {
		return "", err
	}
	return p.write(ctx, src, items)
}

// hashAll hashes items in parallel and stores their outboards (and, for
// directory items, their bytes).
func (p *Pinner) hashAll(ctx context.Context, src verify.Source, items []*item) error {
	return p.forEach(ctx, src, items, p.hash)
}

// forEach runs do on every item, Jobs at a time, counting progress, and
// fails naming the items that failed.
func (p *Pinner) forEach(ctx context.Context, src verify.Source, items []*item, do func(context.Context, *item) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := cmp.Or(max(p.Jobs, 0), 8)
	var total int64
	for _, it := range items {
		total += it.size
	}
	p.Progress.Start(len(items), total)
	defer p.Progress.Done()

	var (
		mu   sync.Mutex
		errs []string
		wg   sync.WaitGroup
		next = make(chan *item)
	)
	for range jobs {
		wg.Go(func() {
			for it := range next {
				if err := do(ctx, it); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
				p.Progress.Add(1, it.size)
			}
		})
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("pin %s: %s", src.URI, summarize(errs))
	}
	return ctx.Err()
}

// hash reads one item, fills in its member and stores its outboard (and,
// for a directory item, its bytes).
func (p *Pinner) hash(ctx context.Context, it *item) error {
	var (
		sum      b3.Sum
		outboard []byte
		err      error
	)
	if it.dir != nil {
		sum, outboard, err = p.pinFile(ctx, it)
	} else {
		sum, outboard, err = p.hashObject(ctx, it)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", it.path, err)
	}
	if it.size > b3.GroupSize {
		if err := p.storeOutboard(ctx, sum, it.size, outboard); err != nil {
			return fmt.Errorf("%s: storing outboard: %w", it.path, err)
		}
	}
	p.fill(it, sum)
	return nil
}

// fill sets the member fields of an item with digest sum, the same
// whether its bytes were read or its digest reused.
func (p *Pinner) fill(it *item, sum b3.Sum) {
	it.m.ID = it.path
	it.m.Path = it.path
	it.m.Split = p.Split.Split(it.path)
	it.m.Size = it.size
	it.m.Digest = sum.String()
}

// hashObject reads an S3 item once at its exact version and returns its
// digest and outboard.
func (p *Pinner) hashObject(ctx context.Context, it *item) (b3.Sum, []byte, error) {
	rc, err := p.Store.ReadRange(ctx, it.obj, 0, -1)
	if err != nil {
		return b3.Sum{}, nil, err
	}
	defer rc.Close()
	return b3.Encode(rc, it.size)
}

// write stores the member table and the manifest and returns its digest.
func (p *Pinner) write(ctx context.Context, src verify.Source, items []*item) (verify.Digest, error) {
	ms := make([]verify.Member, len(items))
	var bytes int64
	for i, it := range items {
		ms[i] = it.m
		bytes += it.size
	}
	slices.SortFunc(ms, func(a, b verify.Member) int { return strings.Compare(a.Path, b.Path) })
	if ps := verify.CheckMembers(ms); len(ps) > 0 {
		var s []string
		for _, pr := range ps {
			s = append(s, pr.String())
		}
		return "", fmt.Errorf("pin %s: %s", src.URI, summarize(s))
	}
	table, err := verify.EncodeMembers(ms)
	if err != nil {
		return "", err
	}
	td := verify.SHA256(table)
	if err := p.Store.Put(ctx, verify.MembersKey(td), table); err != nil {
		return "", fmt.Errorf("storing member table: %w", err)
	}
	for _, parent := range p.Parents {
		if _, err := fetchManifest(ctx, p.Store, parent); err != nil {
			return "", fmt.Errorf("parent: %w", err)
		}
	}
	m := &verify.Manifest{
		Parents:            p.Parents,
		Sources:            []verify.Source{src},
		TombstoneWatermark: p.TombstoneWatermark,
		BenchmarkFence:     p.BenchmarkFence,
		RecordSchema:       p.RecordSchema,
		SelectionPolicy:    p.SelectionPolicy,
		Transform:          p.Transform,
		SplitPolicy:        p.Split.String(),
		Purpose:            p.Purpose,
		Members:            verify.MembersRef{URI: verify.MembersURI(td), Count: int64(len(ms)), Bytes: bytes},
	}
	doc, err := verify.Build(m)
	if err != nil {
		return "", err
	}
	if err := p.Store.Put(ctx, verify.ManifestKey(m.SnapshotID), doc); err != nil {
		return "", fmt.Errorf("storing manifest: %w", err)
	}
	return m.SnapshotID, nil
}

// fetchManifest reads and checks the manifest with digest d.
func fetchManifest(ctx context.Context, g verify.Getter, d verify.Digest) (*verify.Manifest, error) {
	b, err := g.Get(ctx, verify.ManifestKey(d))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	return verify.ParseManifest(d, b)
}

// summarize joins up to ten messages and counts the rest.
func summarize(msgs []string) string {
	slices.Sort(msgs)
	const most = 10
	if len(msgs) <= most {
		return strings.Join(msgs, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(msgs[:most], "; "), len(msgs)-most)
}
