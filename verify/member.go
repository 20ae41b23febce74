package verify

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/jcs"
)

// Member is one line of the member table: a file of the snapshot and the
// exact object its bytes come from. Exactly one of S3 and CAS is set.
type Member struct {
	ID     string    `json:"id"`              // stable sample id, unique in the table
	Path   string    `json:"path"`            // path in the mount, see CheckPath
	Split  string    `json:"split,omitempty"` // train, val, ... or empty
	Size   int64     `json:"size"`
	Digest string    `json:"digest"`        // "blake3:<hex>" of the bytes
	S3     *S3Source `json:"s3,omitempty"`  // an S3 object at an exact version
	CAS    string    `json:"cas,omitempty"` // "blake3:<hex>" in the store's CAS; equals Digest
}

// S3Source pins a member to one S3 object version.
type S3Source struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"versionId"`
	ETag      string `json:"etag,omitempty"`
}

// Source returns a short description of where m's bytes come from:
// s3://bucket/key or cas:blake3:<hex>.
func (m *Member) Source() string {
	if m.S3 != nil {
		return "s3://" + m.S3.Bucket + "/" + m.S3.Key
	}
	return "cas:" + m.CAS
}

// Object returns the store object m's bytes come from: the S3 object at
// its pinned version, or the CAS blob. It fails for a member that names
// neither (or a version that is not immutable, see store.NewVersion).
func (m *Member) Object() (store.Object, error) {
	if m.S3 != nil {
		return store.NewVersion(m.S3.Bucket, m.S3.Key, m.S3.VersionID)
	}
	return store.NewCAS(m.CAS)
}

// VersionID returns the pinned S3 version id, or "" for a CAS member.
func (m *Member) VersionID() string {
	if m.S3 != nil {
		return m.S3.VersionID
	}
	return ""
}

// AppendCanonical appends the RFC 8785 form of m (one member-table line,
// without the newline) to b. Members sort their keys as JCS does:
// cas, digest, id, path, s3 {bucket, etag, key, versionId}, size, split.
func (m *Member) AppendCanonical(b []byte) []byte {
	field := func(name string, first bool) {
		if !first {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	b = append(b, '{')
	first := true
	if m.CAS != "" {
		field("cas", true)
		b = jcs.AppendString(b, m.CAS)
		first = false
	}
	field("digest", first)
	b = jcs.AppendString(b, m.Digest)
	field("id", false)
	b = jcs.AppendString(b, m.ID)
	field("path", false)
	b = jcs.AppendString(b, m.Path)
	if s := m.S3; s != nil {
		field("s3", false)
		b = append(b, `{"bucket":`...)
		b = jcs.AppendString(b, s.Bucket)
		if s.ETag != "" {
			b = append(b, `,"etag":`...)
			b = jcs.AppendString(b, s.ETag)
		}
		b = append(b, `,"key":`...)
		b = jcs.AppendString(b, s.Key)
		b = append(b, `,"versionId":`...)
		b = jcs.AppendString(b, s.VersionID)
		b = append(b, '}')
	}
	field("size", false)
	b = strconv.AppendInt(b, m.Size, 10)
	if m.Split != "" {
		field("split", false)
		b = jcs.AppendString(b, m.Split)
	}
	return append(b, '}')
}

// maxSafeInt is the largest integer that JSON numbers (IEEE doubles) carry exactly.
const maxSafeInt = 1<<53 - 1

// EncodeMembers returns the member table for ms: one canonical line per
// member, sorted by path in byte order. It checks every string is valid
// UTF-8 (canonical JSON cannot carry anything else) but not the rest of the
// structure; CheckMembers does that.
func EncodeMembers(ms []Member) ([]byte, error) {
	var b []byte
	for i := range ms {
		m := &ms[i]
		if i > 0 && ms[i-1].Path >= m.Path {
			return nil, fmt.Errorf("member table: paths not strictly sorted at %q", m.Path)
		}
		if err := validStrings(m); err != nil {
			return nil, err
		}
		b = m.AppendCanonical(b)
		b = append(b, '\n')
	}
	return b, nil
}

func validStrings(m *Member) error {
	ss := []string{m.ID, m.Path, m.Split, m.Digest, m.CAS}
	if m.S3 != nil {
		ss = append(ss, m.S3.Bucket, m.S3.Key, m.S3.VersionID, m.S3.ETag)
	}
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return fmt.Errorf("member %q: string %q is not valid UTF-8", m.Path, s)
		}
	}
	if m.Size < 0 || m.Size > maxSafeInt {
		return fmt.Errorf("member %q: size %d out of range", m.Path, m.Size)
	}
	return nil
}

// ParseMembers parses a member table into members: ParseTable, then
// every member with all its fields.
func ParseMembers(table []byte) ([]Member, error) {
	t, err := ParseTable(table)
	if err != nil {
		return nil, err
	}
	return t.Members(), nil
}
