package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pinfs/pinfs/verify/jcs"
)

// Schema is the schema name and version of manifest format v1.
const Schema = "pinfs.manifest.v1"

// Excluded are the top-level manifest fields the digest rule leaves out:
// the digest itself, and the envelope that carries signatures and transport
// metadata (build times, host names: anything that must not change the digest).
var Excluded = []string{"snapshotId", "envelope"}

// ErrInvalid is wrapped by every error about a manifest or member table
// that is malformed, tampered with, or does not match its digest.
var ErrInvalid = errors.New("invalid snapshot")

// Manifest is the typed view of a manifest v1 document. Fields that the
// format does not know are kept in Extra and covered by the digest.
type Manifest struct {
	Schema             string     `json:"schema"`
	SnapshotID         Digest     `json:"snapshotId"`
	Parents            []Digest   `json:"parents,omitempty"`
	Sources            []Source   `json:"sources,omitempty"`
	TombstoneWatermark *int64     `json:"tombstoneWatermark,omitempty"`
	BenchmarkFence     *int64     `json:"benchmarkFence,omitempty"`
	RecordSchema       string     `json:"recordSchema,omitempty"`
	SelectionPolicy    string     `json:"selectionPolicy,omitempty"`
	Transform          string     `json:"transform,omitempty"`
	SplitPolicy        string     `json:"splitPolicy,omitempty"`
	Purpose            string     `json:"purpose,omitempty"`
	Members            MembersRef `json:"members"`
	// Envelope carries signatures and transport metadata; the digest rule
	// excludes it. pinfs pin writes none.
	Envelope json.RawMessage `json:"envelope,omitempty"`

	// Extra holds the top-level fields this version does not know, as
	// canonical JSON. Build sets them into the document unchanged.
	Extra map[string]json.RawMessage `json:"-"`
}

// Source records one input of the snapshot and the immutable boundary it
// was pinned at.
type Source struct {
	ID      string `json:"id"`
	URI     string `json:"uri"`               // s3://bucket/prefix/ or dir:<base name>
	Listing Digest `json:"listing,omitempty"` // sha256 of the listing the members came from
}

// MembersRef points at the member table by content address.
type MembersRef struct {
	URI   string `json:"uri"` // cas://sha256/<hex>
	Count int64  `json:"count"`
	Bytes int64  `json:"bytes"` // sum of member sizes
}

// Digest returns the member table digest named by r.URI.
func (r MembersRef) Digest() (Digest, error) {
	h, ok := strings.CutPrefix(r.URI, "cas://sha256/")
	if !ok {
		return "", fmt.Errorf("members.uri %q: not cas://sha256/<hex>: %w", r.URI, ErrInvalid)
	}
	d, err := ParseDigest("sha256:" + h)
	if err != nil {
		return "", fmt.Errorf("members.uri %q: %w", r.URI, ErrInvalid)
	}
	return d, nil
}

var known = map[string]bool{
	"schema": true, "snapshotId": true, "parents": true, "sources": true,
	"tombstoneWatermark": true, "benchmarkFence": true, "recordSchema": true,
	"selectionPolicy": true, "transform": true, "splitPolicy": true,
	"purpose": true, "members": true, "envelope": true,
}

// shadows reports whether k is not a known field but encoding/json would
// still decode it into one: its field matching ignores case and also folds
// "ſ" to "s" and the Kelvin sign to "k". Such a key would be read as the
// known field by pinfs and as an unknown one by a strict reader.
func shadows(k string) bool {
	if known[k] {
		return false
	}
	for n := range known {
		if strings.EqualFold(k, n) {
			return true
		}
	}
	return false
}

// Build sets m.Schema and m.SnapshotID by the digest rule and returns the
// canonical bytes of the manifest.
func Build(m *Manifest) ([]byte, error) {
	m.Schema = Schema
	m.SnapshotID = ""
	doc, err := document(m)
	if err != nil {
		return nil, err
	}
	d, err := digestOf(doc)
	if err != nil {
		return nil, err
	}
	m.SnapshotID = d
	doc["snapshotId"], _ = json.Marshal(d)
	return marshalCanonical(doc)
}

// document returns the top-level fields of m: the typed ones that are set,
// and Extra.
func document(m *Manifest) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	doc := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if m.SnapshotID == "" {
		delete(doc, "snapshotId")
	}
	for k, v := range m.Extra {
		if known[k] || shadows(k) {
			return nil, fmt.Errorf("manifest: extra field %q is a known field", k)
		}
		doc[k] = v
	}
	return doc, nil
}

// digestOf applies the digest rule to a parsed manifest document.
func digestOf(doc map[string]json.RawMessage) (Digest, error) {
	payload := make(map[string]json.RawMessage, len(doc))
	for k, v := range doc {
		payload[k] = v
	}
	for _, k := range Excluded {
		delete(payload, k)
	}
	b, err := marshalCanonical(payload)
	if err != nil {
		return "", err
	}
	return SHA256(b), nil
}

func marshalCanonical(doc map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return jcs.Canonicalize(b)
}

// ParseManifest parses manifest bytes fetched under digest want and checks
// the digest rule: the bytes are canonical JSON, schema is v1, snapshotId
// equals want, and the payload hashes to want.
func ParseManifest(want Digest, b []byte) (*Manifest, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("manifest %s: %s: %w", want, fmt.Sprintf(format, a...), ErrInvalid)
	}
	canon, err := jcs.Canonicalize(b)
	if err != nil {
		return nil, bad("%v", err)
	}
	if !bytes.Equal(canon, b) {
		return nil, bad("not in canonical (RFC 8785) form")
	}
	doc := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, bad("%v", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, bad("%v", err)
	}
	if m.Schema != Schema {
		return nil, bad("schema %q, want %q", m.Schema, Schema)
	}
	got, err := digestOf(doc)
	if err != nil {
		return nil, bad("%v", err)
	}
	if m.SnapshotID != want || got != want {
		return nil, bad("content hashes to %s and names itself %s", got, m.SnapshotID)
	}
	for _, p := range m.Parents {
		if _, err := ParseDigest(string(p)); err != nil {
			return nil, bad("parent: %v", err)
		}
	}
	if _, err := m.Members.Digest(); err != nil {
		return nil, err
	}
	if m.Members.Count < 0 || m.Members.Bytes < 0 {
		return nil, bad("negative members count or bytes")
	}
	for k, v := range doc {
		if shadows(k) {
			return nil, bad("field %q is a known field spelled differently", k)
		}
		if !known[k] {
			if m.Extra == nil {
				m.Extra = map[string]json.RawMessage{}
			}
			m.Extra[k] = v
		}
	}
	// The typed view must say exactly what the bytes say: no unknown or
	// differently spelled field inside a known object, no null or empty
	// optional field, nothing a strict reader would read otherwise.
	doc2, err := document(&m)
	if err == nil {
		canon, err = marshalCanonical(doc2)
	}
	if err != nil || !bytes.Equal(canon, b) {
		return nil, bad("fields are not exactly those of %s (unknown nested field, null or empty optional field?)", Schema)
	}
	for _, s := range m.Sources {
		if s.Listing != "" {
			if _, err := ParseDigest(string(s.Listing)); err != nil {
				return nil, bad("source %q listing: %v", s.ID, err)
			}
		}
	}
	return &m, nil
}
