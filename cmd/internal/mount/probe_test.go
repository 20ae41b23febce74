package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/health"
	"github.com/pinfs/pinfs/verify"
)

// probeStore answers every Get with err, or blocks until the request's
// context ends when hang is set, and counts the Gets.
type probeStore struct {
	store.Store // nil: Get and String are all checkStore calls
	err         error
	hang        bool
	gets        atomic.Int64
	keys        []string
}

func (p *probeStore) Get(ctx context.Context, key string) ([]byte, error) {
	p.gets.Add(1)
	p.keys = append(p.keys, key)
	if p.hang {
		<-ctx.Done()
		return nil, fmt.Errorf("get %s: %w", key, ctx.Err())
	}
	return []byte("{}"), p.err
}

func (p *probeStore) String() string { return "s3://st/p" }

func TestCheckStore(t *testing.T) {
	d := verify.Digest("sha256:" + strings.Repeat("ab", 32))
	refused := fmt.Errorf("s3://st: the secret key is wrong (the signature does not match; check AWS_SECRET_ACCESS_KEY or the profile): %w",
		store.ErrAccessDenied)
	unreachable := fmt.Errorf("cannot reach S3 at http://127.0.0.1:1: connection refused: %w", store.ErrUnreachable)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		p        *probeStore
		want     string // the mount's error; "" mounts
		warn     string // in the log
		wantKind store.Kind
	}{
		{"answered", &probeStore{}, "", "", ""},
		{"refused", &probeStore{err: refused}, "manifest " + string(d) + ": " + refused.Error(), "", store.KindAccess},
		{"unreachable", &probeStore{err: unreachable}, "", "the store did not answer the check at mount", store.KindUnreachable},
		{"missing", &probeStore{err: fmt.Errorf("get k: not found: %w", store.ErrNotFound)}, "",
			"the store did not answer the check at mount", store.KindMissing},
		{"no answer in time", &probeStore{hang: true}, "", "the store did not answer the check at mount", store.KindUnreachable},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			st := health.New(c.p)
			start := time.Now()
			err := checkStore(ctx, st, d, 200*time.Millisecond, slog.New(slog.NewTextHandler(&log, nil)))
			took := time.Since(start)
			if c.want == "" && err != nil || c.want != "" && (err == nil || err.Error() != c.want) {
				t.Errorf("checkStore: %v, want %q", err, c.want)
			}
			if c.p.gets.Load() != 1 || c.p.keys[0] != verify.ManifestKey(d) {
				t.Errorf("asked %v, want one Get of %s", c.p.keys, verify.ManifestKey(d))
			}
			if c.warn != "" && !strings.Contains(log.String(), c.warn) || c.warn == "" && log.Len() > 0 {
				t.Errorf("log %q, want %q", log.String(), c.warn)
			}
			if l := st.Last(); c.wantKind == "" && l != nil || c.wantKind != "" && (l == nil || l.Kind != c.wantKind) {
				t.Errorf("last failure %+v, want kind %q", l, c.wantKind)
			}
			if took > 5*time.Second {
				t.Errorf("checkStore took %v; its bound is 200ms", took)
			}
		})
	}

	// Loading the snapshot had an answer from the store: nothing more to ask.
	p := &probeStore{}
	st := health.New(p)
	st.Get(ctx, "tables/x")
	if err := checkStore(ctx, st, d, time.Second, slog.New(slog.DiscardHandler)); err != nil || p.gets.Load() != 1 {
		t.Errorf("after an answer: %v, %d Gets; want no more", err, p.gets.Load())
	}

	// The mount is stopped while it waits: that is its error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := checkStore(cctx, health.New(&probeStore{hang: true}), d, time.Second, slog.New(slog.DiscardHandler))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("stopped mount: %v, want context.Canceled", err)
	}
}
