// Package mountstatus is what `pinfs status MOUNTPOINT` reports about a
// running mount, and how it asks.
//
// The daemon answers getxattr of fs.XattrStatus on the mount's root with
// its Status as JSON (Source.JSON, set as fs.Options.Status). Query reads
// that attribute, bounded by its context so that a hung daemon cannot hang
// the caller, and tells a serving mount from a dead one (its daemon is
// gone: ENOTCONN), a path that is not the root of a pinfs mount, a path
// that does not exist, and a daemon that serves only its cache because the
// store refused its last fetch for access. A readiness probe is exactly
// this query.
package mountstatus

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
	"github.com/pinfs/pinfs/store/blocks"
)

// Status is a running mount's report. The JSON field names are part of the
// interface: scripts and probes read them. Fields are only ever added.
type Status struct {
	Mountpoint      string    `json:"mountpoint"`
	Serving         bool      `json:"serving"`
	Error           string    `json:"error,omitempty"` // why not serving (client side)
	Digest          string    `json:"digest,omitempty"`
	RunID           string    `json:"run_id,omitempty"`
	PID             int       `json:"pid,omitempty"`
	Started         time.Time `json:"started,omitzero"`
	UptimeSeconds   float64   `json:"uptime_seconds"`
	Store           string    `json:"store,omitempty"`
	CacheDir        string    `json:"cache_dir,omitempty"`
	Members         int       `json:"members"` // in the snapshot
	MembersOpened   int64     `json:"members_opened"`
	BytesServed     int64     `json:"bytes_served"`
	CacheHits       Tiers     `json:"cache_hits"`
	NetworkFetches  int64     `json:"network_fetches"`
	BlocksVerified  int64     `json:"blocks_verified,omitempty"` // as run_end's totals count them
	IntegrityEvents Integrity `json:"integrity_events"`
	// StoreError is the failure of the mount's last fetch from the store,
	// until a fetch succeeds; nil when there is none. Query does not
	// count a mount whose last fetch was refused for access as serving.
	StoreError *StoreError `json:"store_error,omitempty"`
	// Passthrough is whether the mount hands cached member files to the
	// kernel (FUSE passthrough) and how much it did; nil when the
	// daemon does not say (not serving, or a pinfs before it).
	Passthrough *Passthrough `json:"passthrough,omitempty"`
	// Pool is the block pool; nil when the daemon does not say.
	Pool    *Pool          `json:"pool,omitempty"`
	Version buildinfo.Info `json:"version,omitzero"` // the daemon's build
}

// Passthrough is a mount's FUSE passthrough: Enabled, or the Reason it is
// off; Opens served from a backing file (the daemon saw none of their
// reads) and Bytes, the sum of the sizes of their members.
type Passthrough struct {
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason,omitempty"`
	Opens   int64  `json:"opens"`
	Bytes   int64  `json:"bytes"`
}

// StoreError is how the mount's last failed fetch from the store failed
// (store/health): Kind is "access" (the store refused the credentials),
// "unreachable", "missing" or "other" (store.Classify); Message its
// one-line error; Time when it failed.
type StoreError struct {
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

// Tiers counts blocks served from each cache tier.
type Tiers struct {
	Memory int64 `json:"memory"`
	Disk   int64 `json:"disk"`
}

// Integrity counts the mount's integrity problems so far: copies of block
// bytes that failed verification (from the disk cache or the network),
// reads of a pinned version the store no longer has, and fetches that
// failed for good. Each is also an event in the run record.
type Integrity struct {
	Mismatch       int64 `json:"mismatch"`
	VersionMissing int64 `json:"version_missing"`
	FetchFailed    int64 `json:"fetch_failed"`
	Total          int64 `json:"total"`
}

// Source is what a serving mount reports its Status from. Its fields are
// set before the mount serves and not changed after; Stats and
// MembersOpened must be safe for concurrent use (blocks.Reader.Stats and
// consumed.Tracker.MembersOpened are), and so must StoreError, which may
// be nil.
type Source struct {
	Mountpoint, Digest, RunID, Store, CacheDir string
	Members                                    int // in the snapshot
	Started                                    time.Time
	Stats                                      func() blocks.Stats
	MembersOpened                              func() int64
	StoreError                                 func() *StoreError // the last failed fetch, nil for none
	Passthrough                                func() Passthrough // nil: the status has none
	Pool                                       func() Pool        // nil: the status has none
}

// Status returns the mount's status now.
func (s *Source) Status() *Status {
	st := s.Stats()
	in := Integrity{Mismatch: st.Mismatches, VersionMissing: st.VersionMissing, FetchFailed: st.FetchFailed}
	in.Total = in.Mismatch + in.VersionMissing + in.FetchFailed
	return &Status{
		Mountpoint: s.Mountpoint, Serving: true, Digest: s.Digest, RunID: s.RunID, PID: os.Getpid(),
		Started: s.Started, UptimeSeconds: time.Since(s.Started).Seconds(), Store: s.Store, CacheDir: s.CacheDir,
		Members: s.Members, MembersOpened: s.MembersOpened(), BytesServed: st.BytesServed, BlocksVerified: st.BlocksVerified,
		CacheHits: Tiers{Memory: st.MemHits, Disk: st.DiskHits}, NetworkFetches: st.NetworkFetches,
		IntegrityEvents: in, StoreError: s.storeError(), Passthrough: s.passthrough(), Pool: s.pool(), Version: buildinfo.Get(),
	}
}

func (s *Source) passthrough() *Passthrough {
	if s.Passthrough == nil {
		return nil
	}
	p := s.Passthrough()
	return &p
}

func (s *Source) pool() *Pool {
	if s.Pool == nil {
		return nil
	}
	p := s.Pool()
	return &p
}

func (s *Source) storeError() *StoreError {
	if s.StoreError == nil {
		return nil
	}
	return s.StoreError()
}

// JSON returns Status() as JSON: the value of the status attribute
// (fs.Options.Status). It is called for every getxattr of it.
func (s *Source) JSON() []byte {
	b, err := json.Marshal(s.Status())
	if err != nil { // a Status always marshals; say so rather than panic
		return fmt.Appendf(nil, `{"serving":false,"error":%q}`, "status: "+err.Error())
	}
	return b
}

// WriteText writes s for a person: a serving mount in five lines (six
// with the store's last error, one more with passthrough, one more with
// the block pool), any other in one line with the reason.
func (s *Status) WriteText(w io.Writer) error {
	if !s.Serving {
		_, err := fmt.Fprintf(w, "%s not serving: %s\n", s.Mountpoint, s.Error)
		return err
	}
	up := time.Duration(s.UptimeSeconds * float64(time.Second)).Round(time.Second)
	in := s.IntegrityEvents
	_, err := fmt.Fprintf(w, "%s serving %s run %s pid %d up %v\n"+
		"  members %d/%d opened, %d bytes served\n"+
		"  cache hits: memory %d, disk %d; network fetches %d\n"+
		"  integrity events: %d (mismatch %d, version_missing %d, fetch_failed %d)\n",
		s.Mountpoint, s.Digest, s.RunID, s.PID, up,
		s.MembersOpened, s.Members, s.BytesServed,
		s.CacheHits.Memory, s.CacheHits.Disk, s.NetworkFetches,
		in.Total, in.Mismatch, in.VersionMissing, in.FetchFailed)
	if err == nil && s.StoreError != nil {
		se := s.StoreError
		_, err = fmt.Fprintf(w, "  store error: %s at %s: %s\n", se.Kind, se.Time.UTC().Format(time.RFC3339), se.Message)
	}
	if err == nil && s.Passthrough != nil {
		err = s.Passthrough.writeText(w)
	}
	if err == nil && s.Pool != nil {
		err = s.Pool.writeText(w)
	}
	if err == nil {
		_, err = fmt.Fprintf(w, "  pinfs %s\n", s.Version)
	}
	return err
}

// writeText writes p's line of the text status.
func (p *Passthrough) writeText(w io.Writer) error {
	var err error
	switch {
	case p.Enabled:
		_, err = fmt.Fprintf(w, "  passthrough on: %d opens, %d bytes\n", p.Opens, p.Bytes)
	case p.Reason != "":
		_, err = fmt.Fprintf(w, "  passthrough off: %s\n", p.Reason)
	default:
		_, err = fmt.Fprintf(w, "  passthrough off\n")
	}
	return err
}
