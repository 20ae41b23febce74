package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// Schema is the schema of a gate record.
const Schema = "pinfs.gate.v1"

// The operations a record can be committed by.
const (
	OpSet      = "set"      // an activation: Digest becomes the alias's snapshot
	OpRollback = "rollback" // an activation of an older digest, at a higher generation
	OpFence    = "fence"    // a tombstone watermark or benchmark fence moved forward
)

// maxInt is the largest integer a record may hold: canonical JSON numbers
// are IEEE-754 doubles, exact up to 2^53-1.
const maxInt = 1<<53 - 1

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CheckName reports whether name is a valid gate (alias) name: 1 to 63
// characters of a-z, 0-9, '.', '_' and '-', starting with a letter or a
// digit. Such a name is also safe as a store key component.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("gate name %q: want 1 to 63 of a-z 0-9 . _ -, starting with a letter or digit", name)
	}
	return nil
}

// Fenced is one revocation or benchmark list that a fence advance added.
type Fenced struct {
	At    int64         `json:"at"`    // the watermark or fence value it was added at
	List  verify.Digest `json:"list"`  // the list, at lists/sha256/<hex> (see PutList)
	Count int           `json:"count"` // its number of entries
}

// Record is one gate record: the state of an alias after one commit. The
// head key holds the current record; records/sha256/<hex> holds every
// record ever committed, under the SHA-256 of its canonical JSON. Prev
// links each record to its predecessor, so the history is a hash chain.
type Record struct {
	Schema             string        `json:"schema"`
	Name               string        `json:"name"`
	Generation         int64         `json:"generation"`       // 1 for the first record; +1 for every commit
	Digest             verify.Digest `json:"digest,omitempty"` // the active snapshot; "" until the first activation
	TombstoneWatermark int64         `json:"tombstoneWatermark"`
	BenchmarkFence     int64         `json:"benchmarkFence"`
	Revocations        []Fenced      `json:"revocations,omitempty"`
	Benchmarks         []Fenced      `json:"benchmarks,omitempty"`
	Op                 string        `json:"op"`             // OpSet, OpRollback or OpFence
	Prev               verify.Digest `json:"prev,omitempty"` // the previous record's digest; "" for generation 1
	Time               string        `json:"time"`           // RFC 3339 UTC, when committed
	By                 string        `json:"by,omitempty"`   // user@host
	Reason             string        `json:"reason,omitempty"`
	// Policy names the trust policy kept with the gate (policies/sha256/<hex>):
	// the one the last activation checked approvals under, and the default
	// for the next.
	Policy verify.Digest `json:"policy,omitempty"`
}

// encode returns the canonical JSON of r: the bytes that are stored and
// digested.
func (r *Record) encode() ([]byte, error) {
	return jcs.Marshal(r)
}

// RecordDigest returns the SHA-256 of r's canonical JSON: the name of the
// record under records/ and the Prev of its successor. It is "" for a
// record that cannot be encoded (which check refuses).
func (r *Record) RecordDigest() verify.Digest {
	b, err := r.encode()
	if err != nil {
		return ""
	}
	return verify.SHA256(b)
}

// clone returns a copy of r that shares no slice with it.
func (r *Record) clone() *Record {
	c := *r
	c.Revocations = slices.Clone(r.Revocations)
	c.Benchmarks = slices.Clone(r.Benchmarks)
	return &c
}

// parseRecord decodes the stored bytes of a record of gate name and checks
// them: canonical JSON in exactly the form encode writes (no unknown or
// empty optional fields), and a record that check accepts.
func parseRecord(name string, data []byte) (*Record, error) {
	canon, err := jcs.Canonicalize(data)
	if err != nil {
		return nil, fmt.Errorf("not a gate record: %w", err)
	}
	if !bytes.Equal(canon, data) {
		return nil, fmt.Errorf("not canonical JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not a %s record: %w", Schema, err)
	}
	if err := r.check(name); err != nil {
		return nil, err
	}
	if again, err := r.encode(); err != nil || !bytes.Equal(again, data) {
		return nil, fmt.Errorf("not in the form pinfs writes (a field that should be left out is empty)")
	}
	return &r, nil
}

// check reports whether r is a well-formed record of gate name.
func (r *Record) check(name string) error {
	switch {
	case r.Schema != Schema:
		return fmt.Errorf("schema %q, not %q", r.Schema, Schema)
	case r.Name != name:
		return fmt.Errorf("names gate %q, not %q", r.Name, name)
	case r.Generation < 1 || r.Generation > maxInt:
		return fmt.Errorf("generation %d out of range", r.Generation)
	case r.Generation == 1 && r.Prev != "":
		return fmt.Errorf("generation 1 has a previous record")
	case r.Generation > 1 && r.Prev == "":
		return fmt.Errorf("generation %d has no previous record", r.Generation)
	case r.TombstoneWatermark < 0 || r.TombstoneWatermark > maxInt:
		return fmt.Errorf("tombstone watermark %d out of range", r.TombstoneWatermark)
	case r.BenchmarkFence < 0 || r.BenchmarkFence > maxInt:
		return fmt.Errorf("benchmark fence %d out of range", r.BenchmarkFence)
	case r.Op != OpSet && r.Op != OpRollback && r.Op != OpFence:
		return fmt.Errorf("op %q is none of %s, %s, %s", r.Op, OpSet, OpRollback, OpFence)
	case (r.Op == OpSet || r.Op == OpRollback) && r.Digest == "":
		return fmt.Errorf("op %s without a digest", r.Op)
	}
	if _, err := time.Parse(time.RFC3339, r.Time); err != nil {
		return fmt.Errorf("time %q: not RFC 3339", r.Time)
	}
	for _, d := range []verify.Digest{r.Digest, r.Prev, r.Policy} {
		if d == "" {
			continue
		}
		if _, err := verify.ParseDigest(string(d)); err != nil {
			return err
		}
	}
	if err := checkFenced("revocation", r.Revocations, r.TombstoneWatermark); err != nil {
		return err
	}
	return checkFenced("benchmark", r.Benchmarks, r.BenchmarkFence)
}

// checkFenced checks the lists added to a fence that now stands at upTo.
func checkFenced(kind string, fs []Fenced, upTo int64) error {
	for _, f := range fs {
		if _, err := verify.ParseDigest(string(f.List)); err != nil {
			return fmt.Errorf("%s list: %w", kind, err)
		}
		if f.At < 0 || f.At > upTo || f.Count < 0 || f.Count > maxInt {
			return fmt.Errorf("%s list %s at %d with %d entries: out of range (the fence is at %d)", kind, f.List, f.At, f.Count, upTo)
		}
	}
	return nil
}

// checkSuccessor reports whether next may follow prev, whose digest is
// prevDigest: the same gate, the next generation, linked by Prev, fences
// that never move back, revocation and benchmark lists that are only ever
// added to, and an active digest that, once set, stays set.
func checkSuccessor(prev *Record, prevDigest verify.Digest, next *Record) error {
	switch {
	case next.Name != prev.Name:
		return fmt.Errorf("generation %d names gate %q, its predecessor %q", next.Generation, next.Name, prev.Name)
	case next.Generation != prev.Generation+1:
		return fmt.Errorf("generation %d follows generation %d (a gap or a fork)", next.Generation, prev.Generation)
	case next.Prev != prevDigest:
		return fmt.Errorf("generation %d links to %s, not to generation %d (%s)", next.Generation, next.Prev, prev.Generation, prevDigest)
	case next.TombstoneWatermark < prev.TombstoneWatermark:
		return fmt.Errorf("generation %d moves the tombstone watermark back from %d to %d", next.Generation, prev.TombstoneWatermark, next.TombstoneWatermark)
	case next.BenchmarkFence < prev.BenchmarkFence:
		return fmt.Errorf("generation %d moves the benchmark fence back from %d to %d", next.Generation, prev.BenchmarkFence, next.BenchmarkFence)
	case !hasPrefix(next.Revocations, prev.Revocations):
		return fmt.Errorf("generation %d drops or changes revocation lists of generation %d", next.Generation, prev.Generation)
	case !hasPrefix(next.Benchmarks, prev.Benchmarks):
		return fmt.Errorf("generation %d drops or changes benchmark lists of generation %d", next.Generation, prev.Generation)
	case next.Digest == "" && prev.Digest != "":
		return fmt.Errorf("generation %d drops the active digest %s", next.Generation, prev.Digest)
	}
	return nil
}

func hasPrefix(s, prefix []Fenced) bool {
	return len(s) >= len(prefix) && slices.Equal(s[:len(prefix)], prefix)
}
