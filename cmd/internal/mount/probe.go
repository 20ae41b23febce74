package mount

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/mountstatus"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/health"
	"github.com/pinfs/pinfs/verify"
)

// probeTimeout is how long the check of the store at mount waits for an
// answer, unless Config.ProbeTimeout says otherwise.
const probeTimeout = 10 * time.Second

// checkStore makes sure the store takes the mount's credentials before
// the mount serves, also when everything it has loaded so far came from
// the cache dir: unless loading the snapshot already had an answer from
// the store (st.Answered), it GETs the snapshot's manifest once, bounded
// by timeout. A refusal for access fails the mount with the message a
// mount with a fresh cache dir gives. Any other failure (the store is
// unreachable, slow, or no longer has the manifest) is logged as a
// warning and the mount serves from its cache: a remount without the
// store is a promise. pinfs status reports it (store_error) either way.
func checkStore(ctx context.Context, st *health.Store, d verify.Digest, timeout time.Duration, log *slog.Logger) error {
	if st.Answered() > 0 {
		return nil
	}
	if timeout <= 0 {
		timeout = probeTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := store.GetAtMost(pctx, st, verify.ManifestKey(d), store.MaxManifest)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case store.Classify(err) == store.KindAccess:
		return fmt.Errorf("manifest %s: %w", d, err) // as verify.Fetch says it
	}
	log.Warn("the store did not answer the check at mount: serving from the cache dir; "+
		"reads of bytes not cached fail until the store answers (pinfs status reports it)",
		"store", st.String(), "kind", string(store.Classify(err)), "within", timeout, "err", store.Detail(err))
	return nil
}

// storeError returns st's last failure for pinfs status, or nil.
func storeError(st *health.Store) func() *mountstatus.StoreError {
	return func() *mountstatus.StoreError {
		f := st.Last()
		if f == nil {
			return nil
		}
		return &mountstatus.StoreError{Kind: string(f.Kind), Message: f.Message, Time: f.Time}
	}
}
