package runrecord

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
	"github.com/pinfs/pinfs/verify"
)

// Event names. Open appends RunStart or Resume; the mount layer emits the
// others. Admit writes PermitEvent (see permit.go).
const (
	RunStart       = "run_start"
	Resume         = "resume"
	Mismatch       = "mismatch"
	VersionMissing = "version_missing"
	FetchFailed    = "fetch_failed"
	ConsumedSet    = "consumed"
	RunEnd         = "run_end"
)

// Where a mismatching block came from (Event.From).
const (
	FromNetwork = "network"
	FromDisk    = "disk"
	FromTier    = "tier" // a shared HTTP cache tier in front of a pinfs origin
)

// Event is one line of a run record. Time, RunID, Digest, Host, PID and
// Seq are filled by Emit; Event names the kind, and the other fields are
// set as the kind needs them and omitted otherwise.
type Event struct {
	Time   time.Time     `json:"time"` // UTC, RFC 3339 with nanoseconds
	RunID  string        `json:"run_id"`
	Digest verify.Digest `json:"digest"`
	Event  string        `json:"event"`
	// Seq numbers the events of one process of the run from 1; with Time
	// it names the event's object in a store.
	Seq int64 `json:"seq"`

	// Host and PID identify the process that wrote the event: a Record
	// stamps them on every event, so every event names its mount.
	// Records written before issue 9 have them on run_start and resume only.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`

	// Store is the mount's --store URL and FlushInterval how often it
	// writes its consumed delta (a Go duration), on run_start and resume.
	Store         string `json:"store,omitempty"`
	FlushInterval string `json:"flush_interval,omitempty"`
	// Proc names the mount's process on its host for as long as the host
	// runs, on run_start and resume: the kernel's boot id, "/", and the
	// process's start time in clock ticks since boot (field 22 of
	// /proc/self/stat), so that a pid reused by another process is not
	// taken for the mount (see LocalLiveness).
	Proc string `json:"proc,omitempty"`
	// Pinfs is the build of the pinfs that wrote run_start or resume
	// (buildinfo.Get: module version, VCS revision, toolchain), so that the
	// record says which pinfs served each mount. Records written before
	// issue 24 have none.
	Pinfs *buildinfo.Info `json:"pinfs,omitempty"`

	// The member concerned, on mismatch, version_missing and fetch_failed.
	Path      string `json:"path,omitempty"`
	MemberID  string `json:"member_id,omitempty"`
	Source    string `json:"source,omitempty"`     // s3://bucket/key or cas:blake3:<hex>
	VersionID string `json:"version_id,omitempty"` // the pinned S3 version
	Expected  string `json:"expected,omitempty"`   // the member's digest, blake3:<hex>
	Range     *Range `json:"range,omitempty"`      // the bytes that failed
	From      string `json:"from,omitempty"`       // FromNetwork, FromTier or FromDisk
	Error     string `json:"error,omitempty"`

	Totals *Totals `json:"totals,omitempty"` // on run_end
	Permit *Permit `json:"permit,omitempty"` // on permit, written by Admit

	// Members is the cumulative consumed set of records written before
	// issue 9; mounts no longer write it, readers still decode it.
	Members []Consumed `json:"members,omitempty"`
	// Set is a consumed delta (consumed.Set.Encode), on consumed.
	Set string `json:"set,omitempty"`
	// Passthrough is the members of a consumed delta that the kernel
	// served through FUSE passthrough (consumed.EncodeMembers), so
	// opened and counted as read in full without a read reaching the
	// mount; omitted when there are none, as with --passthrough=false.
	// Readers before issue 25 ignore it: to them the members are opened
	// and read in full, which they are in Set too.
	//
	// Members, Set and Passthrough are the last fields, so that the
	// payload starts at the first `,"members":`, `,"set":` or
	// `,"passthrough":` of a line (a JSON string cannot hold those bytes
	// unescaped) and a reader that needs only the other fields cuts the
	// line there (see List). Keep them last.
	Passthrough string `json:"passthrough,omitempty"`
}

// Range is a byte range of a member.
type Range struct {
	Off int64 `json:"off"`
	Len int64 `json:"len"`
}

// Totals are a run's counters, reported on run_end.
type Totals struct {
	MembersOpened  int64 `json:"members_opened"`
	BytesServed    int64 `json:"bytes_served"`
	BlocksVerified int64 `json:"blocks_verified"`
	MemHits        int64 `json:"mem_hits"`
	DiskHits       int64 `json:"disk_hits"`
	NetworkFetches int64 `json:"network_fetches"`
	Mismatches     int64 `json:"mismatches"`
	VersionMissing int64 `json:"version_missing"`
	FetchFailed    int64 `json:"fetch_failed"`
	// PassthroughOpens counts the opens the kernel served from a cache
	// file (FUSE passthrough); omitted when none did.
	PassthroughOpens int64 `json:"passthrough_opens,omitempty"`
}

// Consumed is one member that a run read, fully or in part.
type Consumed struct {
	Path   string `json:"path"`
	ID     string `json:"id"`
	Digest string `json:"digest"` // blake3:<hex>
	Size   int64  `json:"size"`
	Bytes  int64  `json:"bytes"` // distinct bytes read, see Tracker
	Full   bool   `json:"full"`
}

// emittable reports whether callers may Emit an event of kind name.
// run_start and resume are Open's to write.
func emittable(name string) bool {
	switch name {
	case Mismatch, VersionMissing, FetchFailed, ConsumedSet, RunEnd:
		return true
	}
	return false
}

// known reports whether name is an event kind at all; it guards the kind
// as it is read back from a spool or a record file and used in a key.
func known(name string) bool {
	return name == RunStart || name == Resume || name == PermitEvent || emittable(name)
}

// line returns e as one JSON line, newline included. These are exactly
// the bytes of the local file's line, the spool's line and the event's
// object in a store.
func (e *Event) line() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("runrecord: encode %s event: %w", e.Event, err)
	}
	return append(b, '\n'), nil
}

// keyTime is the layout of the time in an event key: fixed width, so keys
// sort by time.
const keyTime = "20060102T150405.000000000Z"

// eventKey is the store key of e, whose line is line:
// runs/<run-id>/events/<time>-<seq>-<event>-<hash>.json, where hash is the
// first 8 hex digits of the line's SHA-256. It is a function of the line
// alone, so a spooled line maps back to the same key, and a key holds
// exactly one line: two events that happen to share time, seq and kind
// (two hosts of one run, or a Time set by the caller) get keys of their
// own instead of a create-only conflict that would block the spool.
func eventKey(e *Event, line []byte) string {
	h := sha256.Sum256(line)
	return fmt.Sprintf("runs/%s/events/%s-%06d-%s-%x.json", e.RunID, e.Time.UTC().Format(keyTime), e.Seq, e.Event, h[:4])
}

// bindingKey is the store key of run id's binding.
func bindingKey(runID string) string { return "runs/" + runID + "/run.json" }

// startKey is the store key that the first mount of an admitted run
// creates, claiming run_start (the binding exists already: Admit made it).
func startKey(runID string) string { return "runs/" + runID + "/start.json" }
