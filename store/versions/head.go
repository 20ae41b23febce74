package versions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// headSchema names the format of a head.
const headSchema = "pinfs.versions.head.v1"

// headDoc is a head as stored: canonical JSON (verify/jcs).
type headDoc struct {
	Schema   string   `json:"schema"`
	Source   string   `json:"source"`
	Segments []string `json:"segments"`
}

// head is a head as loaded: its segments and the revision to swap it from
// ("" when there is none).
type head struct {
	segs []verify.Digest
	rev  string
}

// head loads x's head, counting the bytes read in t. A head that is not
// one encodeHead writes reads as one without segments, with the revision
// that lets Record replace it, and is counted in t.Skipped.
func (x *Index) head(ctx context.Context, t *Table) (head, error) {
	b, rev, err := x.st.Load(ctx, HeadKey(x.source))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return head{}, nil
	case err != nil:
		return head{}, fmt.Errorf("versions: head of %s: %w", x.source, err)
	}
	t.Bytes += int64(len(b))
	segs, err := parseHead(x.source, b)
	if err != nil {
		t.Skipped++
		return head{rev: rev}, nil
	}
	return head{segs: segs, rev: rev}, nil
}

// encodeHead returns the head of source that names segs.
func encodeHead(source string, segs []verify.Digest) ([]byte, error) {
	doc := headDoc{Schema: headSchema, Source: source, Segments: make([]string, len(segs))}
	for i, d := range segs {
		doc.Segments[i] = d.String()
	}
	b, err := jcs.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("versions: head of %s: %w", source, err)
	}
	return b, nil
}

// parseHead decodes the head of source from b and checks that it is
// exactly what encodeHead writes: canonical JSON with the schema, the
// source, and distinct sha256 digests.
func parseHead(source string, b []byte) ([]verify.Digest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc headDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("versions: head of %s: %w", source, err)
	}
	switch {
	case doc.Schema != headSchema:
		return nil, fmt.Errorf("versions: head of %s: schema %q, not %q", source, doc.Schema, headSchema)
	case doc.Source != source:
		return nil, fmt.Errorf("versions: head of %s: names source %q", source, doc.Source)
	}
	segs := make([]verify.Digest, len(doc.Segments))
	seen := make(map[verify.Digest]bool, len(segs))
	for i, s := range doc.Segments {
		d, err := verify.ParseDigest(s)
		if err != nil {
			return nil, fmt.Errorf("versions: head of %s: segment %d: %w", source, i, err)
		}
		if seen[d] {
			return nil, fmt.Errorf("versions: head of %s: segment %s twice", source, d)
		}
		seen[d] = true
		segs[i] = d
	}
	if again, err := encodeHead(source, segs); err != nil || !bytes.Equal(again, b) {
		return nil, fmt.Errorf("versions: head of %s: not in the canonical form pinfs writes", source)
	}
	return segs, nil
}
