package pin

import (
	"context"
	"errors"

	"github.com/pinfs/pinfs/store"
)

// replaceTries bounds how often replace loses a race before it gives up.
const replaceTries = 5

// replace makes key hold data unless what it holds already passes keep:
// it loads key, keeps it when keep says so, and otherwise swaps data in
// conditionally (creating an absent key), trying again when another
// writer got there first. A shard's partial table (keep: the same bytes)
// and an outboard that does not check against its digest (keep: it
// checks) are replaced this way; Put refuses both, since it never
// overwrites a key with other bytes.
func replace(ctx context.Context, sw store.Swapper, key string, data []byte, keep func(cur []byte) bool) error {
	var err error
	for range replaceTries {
		cur, rev, lerr := sw.Load(ctx, key)
		switch {
		case errors.Is(lerr, store.ErrNotFound):
			rev = ""
		case lerr != nil:
			return lerr
		case keep(cur):
			return nil
		}
		if err = sw.Swap(ctx, key, data, rev); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return err
}
