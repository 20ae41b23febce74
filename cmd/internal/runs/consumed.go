package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// Consumed returns everything run consumed: the union of the compact sets
// (deltas) of all its consumed events and of the member lists of consumed
// events written before the compact form (see consumed.FromLegacy). Old
// records wrote a cumulative list per mount, so one member may be listed
// many times: it counts once, with the largest byte count and full if any
// list says so. Every index is checked against t, so t must be the table of
// the run's snapshot; an event that does not decode or names an unknown
// member is an error, as are events that together decode to more than the
// table bounds (see consumed.Decoder): memory stays bounded by t however
// the record was written.
func Consumed(run *runrecord.Run, t *verify.Table) (*consumed.Set, error) {
	s, dec := consumed.NewSet(), consumed.NewDecoder(t)
	legacy := map[string]consumed.Legacy{}
	var order []string // legacy paths in first-seen order, for a stable error
	for i := range run.Events {
		e := &run.Events[i]
		if e.Event != runrecord.ConsumedSet {
			continue
		}
		if e.Set != "" {
			d, err := dec.Decode(e.Set)
			if err != nil {
				return nil, fmt.Errorf("run %s: consumed event of %s (seq %d): %w", run.RunID, e.Time.Format(timeLayout), e.Seq, err)
			}
			s.Union(d)
		}
		for _, m := range e.Members {
			l, seen := legacy[m.Path]
			if !seen {
				order = append(order, m.Path)
			}
			legacy[m.Path] = consumed.Legacy{Path: m.Path, Bytes: max(l.Bytes, m.Bytes), Full: l.Full || m.Full}
		}
	}
	if len(legacy) > 0 {
		ls := make([]consumed.Legacy, len(order))
		for i, p := range order {
			ls[i] = legacy[p]
		}
		d, err := consumed.FromLegacy(t, ls)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", run.RunID, err)
		}
		s.Union(d)
	}
	if err := s.Check(t.Len()); err != nil {
		return nil, fmt.Errorf("run %s: %w", run.RunID, err)
	}
	return s, nil
}

// timeLayout is how times are written in messages and exports.
const timeLayout = "2006-01-02T15:04:05.999999999Z07:00"

// ConsumedDigest returns "sha256:<hex>", the SHA-256 of the canonical list
// of the members s consumed (every member in s.Opened), given t, the
// table s indexes, or "" if s names a member t does not have (see
// consumed.Set.Check). The list does not depend on how the set was
// recorded (which deltas, how many mounts): the same set and table always
// give the same digest, and another member opened or another granule of
// one read changes it.
//
// The list is JSON Lines: for each member, in ascending index order, one
// line
//
//	{"index":I,"id":ID,"digest":DIGEST,"version":VERSION,"bytes":B,"full":F}
//
// followed by a single "\n" (also after the last line); the empty set is
// the empty list. The keys are in exactly that order with no white
// space. I is the member's index in the table and B its distinct bytes
// read (consumed.Set.Bytes), both decimal integers; F is true when B is
// the member's size (read in full, or every granule of it; an empty member
// once opened), as consumed.Set.Summarize counts it, and false otherwise.
// ID and DIGEST are the member's id and digest ("blake3:<hex>") from the
// table, and VERSION is the pinned S3 VersionId of an S3 member or
// "cas:blake3:<hex>" for a member in the store's CAS (see Version). Strings
// are written as RFC 8785 (JCS) writes them: UTF-8, with only '"', '\\'
// and control characters escaped (\b \t \n \f \r, else \u00XX in lower
// case hex).
//
// The lines are made in chunks on up to GOMAXPROCS goroutines, which read s
// concurrently: s must not change meanwhile.
func ConsumedDigest(s *consumed.Set, t *verify.Table) string {
	if s.Check(t.Len()) != nil {
		return ""
	}
	idx := s.Opened.ToArray()
	chunks := (len(idx) + digestChunk - 1) / digestChunk
	out := make([]chan []byte, chunks)
	for c := range out {
		out[c] = make(chan []byte, 1)
	}
	inflight := make(chan struct{}, 2*runtime.GOMAXPROCS(0))
	go func() {
		for c := range chunks {
			inflight <- struct{}{}
			go func() {
				out[c] <- consumedLines(s, t, idx[c*digestChunk:min(len(idx), (c+1)*digestChunk)])
			}()
		}
	}()
	h := sha256.New()
	for c := range chunks {
		h.Write(<-out[c])
		<-inflight
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// digestChunk is how many members' lines ConsumedDigest makes at a time.
const digestChunk = 1 << 14

// consumedLines returns the lines of the canonical consumed list of the
// members idx of s (see ConsumedDigest).
func consumedLines(s *consumed.Set, t *verify.Table, idx []uint32) []byte {
	b := make([]byte, 0, len(idx)*256)
	for _, i := range idx {
		size := t.Size(int(i))
		n := s.Bytes(i, size)
		b = append(b, `{"index":`...)
		b = strconv.AppendUint(b, uint64(i), 10)
		b = append(b, `,"id":`...)
		b = appendString(b, t.ID(int(i)))
		b = append(b, `,"digest":`...)
		b = appendText(b, func(b []byte) []byte { return t.AppendDigest(b, int(i)) })
		b = append(b, `,"version":`...)
		if v, ok := t.Version(int(i)); ok {
			b = appendString(b, v)
		} else {
			b = appendText(b, func(b []byte) []byte { return t.AppendCAS(append(b, "cas:"...), int(i)) })
		}
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, `,"full":`...)
		b = strconv.AppendBool(b, n == size)
		b = append(b, "}\n"...)
	}
	return b
}

// appendText appends the text that add appends, as appendString would
// append it, without making a string of it first: digests are plain hex
// and need no escaping.
func appendText(b []byte, add func([]byte) []byte) []byte {
	k := len(b) + 1
	b = add(append(b, '"'))
	for _, c := range b[k:] {
		if c < 0x20 || c == '"' || c == '\\' {
			return jcs.AppendString(b[:k-1], string(b[k:]))
		}
	}
	return append(b, '"')
}

// appendString appends s as RFC 8785 writes a string (jcs.AppendString),
// copying it whole when it holds nothing to escape, as nearly all do.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return jcs.AppendString(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Version returns the exact version of m's bytes that a run read: the
// pinned S3 VersionId of an S3 member, or "cas:blake3:<hex>" for a member
// in the store's content-addressed area (its digest is its version).
func Version(m *verify.Member) string {
	if m.S3 != nil {
		return m.S3.VersionID
	}
	return "cas:" + m.CAS
}
