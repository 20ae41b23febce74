package mountstatus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinfs/pinfs/fs"
)

// The consumed set of a live mount is read through extended attributes
// of its root, apart from the status so that a readiness probe stays
// small. An attribute value is at most 64 KiB (XATTR_SIZE_MAX), and a
// set can be megabytes, so it comes in parts of one snapshot:
//
//   - fs.XattrConsumed is a header, JSON: the snapshot's "id", its
//     "time", "size" (bytes of the set's text), "parts", "sha256" of the
//     text, and the text itself as "set" when it fits in one part;
//   - fs.XattrConsumed + ".<id>.<k>" is part k (from 0) of snapshot id:
//     bytes [k×ConsumedPart, (k+1)×ConsumedPart) of the text.
//
// The daemon keeps its last few snapshots, and answers the header from
// the newest while it is younger than snapshotReuse, so that the size
// probe of getxattr and the read after it see the same value. A part of
// a snapshot no longer kept is ENODATA: the reader starts again.

// ConsumedPart is the size of one part of a consumed set's text.
const ConsumedPart = 48 << 10

// snapshotsKept is how many snapshots a Consumed keeps for their parts.
const snapshotsKept = 4

// snapshotReuse is how long the newest snapshot answers the header.
const snapshotReuse = time.Second

// consumedHeader is the value of fs.XattrConsumed.
type consumedHeader struct {
	ID     uint64    `json:"id"`
	Time   time.Time `json:"time"`
	Size   int       `json:"size"`
	Parts  int       `json:"parts"`
	SHA256 string    `json:"sha256"`
	Set    *string   `json:"set,omitempty"` // the whole text, when Parts <= 1
}

// Consumed answers the consumed attributes of a serving mount
// (fs.Options.Consumed). Encode returns the mount's consumed set so far
// as consumed.Set.Encode text; it must be safe for concurrent use. Attr
// may be called concurrently.
type Consumed struct {
	Encode func() string
	now    func() time.Time // time.Now; tests set it

	mu    sync.Mutex
	next  uint64
	snaps []consumedSnap // oldest first, at most snapshotsKept
}

type consumedSnap struct {
	id   uint64
	time time.Time
	text string
}

// Attr returns the value of consumed attribute attr (see the protocol
// above), or false when there is none.
func (c *Consumed) Attr(attr string) ([]byte, bool) {
	if attr == fs.XattrConsumed {
		return c.header(), true
	}
	rest, ok := strings.CutPrefix(attr, fs.XattrConsumed+".")
	if !ok {
		return nil, false
	}
	ids, ks, ok := strings.Cut(rest, ".")
	id, err1 := strconv.ParseUint(ids, 10, 64)
	k, err2 := strconv.Atoi(ks)
	if !ok || err1 != nil || err2 != nil || k < 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.snaps {
		if s.id == id {
			if k*ConsumedPart >= len(s.text) {
				return nil, false
			}
			return []byte(s.text[k*ConsumedPart : min(len(s.text), (k+1)*ConsumedPart)]), true
		}
	}
	return nil, false
}

// header returns the header of the newest snapshot, made now unless the
// newest is younger than snapshotReuse.
func (c *Consumed) header() []byte {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	c.mu.Lock()
	var s consumedSnap
	if n := len(c.snaps); n > 0 && now().Sub(c.snaps[n-1].time) < snapshotReuse {
		s = c.snaps[n-1]
		c.mu.Unlock()
	} else {
		c.mu.Unlock()
		text := c.Encode() // outside the lock: it walks the whole set
		c.mu.Lock()
		c.next++
		s = consumedSnap{id: c.next, time: now().UTC(), text: text}
		c.snaps = append(c.snaps, s)
		if len(c.snaps) > snapshotsKept {
			c.snaps = c.snaps[len(c.snaps)-snapshotsKept:]
		}
		c.mu.Unlock()
	}
	sum := sha256.Sum256([]byte(s.text))
	h := consumedHeader{ID: s.id, Time: s.time, Size: len(s.text), Parts: (len(s.text) + ConsumedPart - 1) / ConsumedPart, SHA256: hex.EncodeToString(sum[:])}
	if h.Parts <= 1 {
		h.Set = &s.text
	}
	b, _ := json.Marshal(h) // a header always marshals
	return b
}

// ErrSnapshotGone is wrapped when the mount no longer kept the snapshot
// whose parts were being read, three times over.
var ErrSnapshotGone = errors.New("the mount's consumed set changed faster than it could be read")

// QueryConsumed asks the pinfs mount whose root is dir for its consumed
// set so far: the consumed.Set.Encode text and the time the mount took
// it. Like Query it is bounded by ctx, the file system calls going on in
// a goroutine when ctx ends first. A mount that does not answer the
// attribute (a pinfs older than issue 24) is an error wrapping
// ErrNotMount.
func QueryConsumed(ctx context.Context, dir string) (string, time.Time, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", time.Time{}, err
	}
	type answer struct {
		text string
		at   time.Time
		err  error
	}
	ch := make(chan answer, 1)
	get := xattrFunc
	go func() {
		text, at, err := readConsumed(ctx, abs, get)
		ch <- answer{text, at, err}
	}()
	select {
	case a := <-ch:
		return a.text, a.at, a.err
	case <-ctx.Done():
		return "", time.Time{}, fmt.Errorf("%s: %w: %w", abs, ErrNoAnswer, ctx.Err())
	}
}

// xattrFunc reads an attribute of up to 64 KiB; tests replace it.
var xattrFunc = func(path, name string) ([]byte, error) {
	buf := make([]byte, 64<<10) // XATTR_SIZE_MAX: no size probe needed
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// readConsumed reads the consumed set of the mount at dir through get,
// starting again (three times at most) when the snapshot it reads goes.
// It reads no more parts than the header's size takes, and none once ctx
// ends: the caller has stopped waiting, and a daemon that answers every
// part name is not read for ever.
func readConsumed(ctx context.Context, dir string, get func(path, name string) ([]byte, error)) (string, time.Time, error) {
	for range 3 {
		b, err := get(dir, fs.XattrConsumed)
		if err != nil {
			return "", time.Time{}, classify(dir, err)
		}
		var h consumedHeader
		if err := json.Unmarshal(b, &h); err != nil {
			return "", time.Time{}, fmt.Errorf("%s: the pinfs daemon's consumed set header is not valid JSON: %v", dir, err)
		}
		if h.Size < 0 || h.Parts != (h.Size+ConsumedPart-1)/ConsumedPart {
			return "", time.Time{}, fmt.Errorf("%s: the pinfs daemon's consumed set header gives %d parts for %d bytes", dir, h.Parts, h.Size)
		}
		var text string
		if h.Set != nil {
			text = *h.Set
		} else {
			var sb strings.Builder
			gone := false
			for k := range h.Parts {
				if err := ctx.Err(); err != nil {
					return "", time.Time{}, fmt.Errorf("%s: %w: %w", dir, ErrNoAnswer, err)
				}
				p, err := get(dir, fs.XattrConsumed+"."+strconv.FormatUint(h.ID, 10)+"."+strconv.Itoa(k))
				if errors.Is(err, unix.ENODATA) {
					gone = true
					break
				}
				if err != nil {
					return "", time.Time{}, classify(dir, err)
				}
				if sb.Len()+len(p) > h.Size {
					return "", time.Time{}, fmt.Errorf("%s: the pinfs daemon's consumed set is longer than its header's %d bytes", dir, h.Size)
				}
				sb.Write(p)
			}
			if gone {
				continue
			}
			text = sb.String()
		}
		sum := sha256.Sum256([]byte(text))
		if len(text) != h.Size || hex.EncodeToString(sum[:]) != h.SHA256 {
			return "", time.Time{}, fmt.Errorf("%s: the pinfs daemon's consumed set (%d bytes) does not match its header (%d bytes, sha256 %s)", dir, len(text), h.Size, h.SHA256)
		}
		return text, h.Time, nil
	}
	return "", time.Time{}, fmt.Errorf("%s: %w", dir, ErrSnapshotGone)
}
