package pin

import (
	"context"
	"sync"
	"time"

	"github.com/pinfs/pinfs/store/versions"
)

// checkpointEvery and checkpointPeriod bound what a crashed pin loses:
// entries are recorded in the digest cache every checkpointEvery freshly
// read members or checkpointPeriod, whichever comes first.
const checkpointEvery = 1024

var checkpointPeriod = 10 * time.Second

// failedFlushTimeout bounds the last checkpoint of a pin that failed (or
// was cancelled), so that a rerun reuses what it read.
const failedFlushTimeout = 10 * time.Second

// checkpointer collects fresh digest-cache entries while a pin hashes and
// records them in batches. After one Record fails the cache is left alone
// for the rest of the run.
type checkpointer struct {
	idx   cacheIndex
	onErr func(error)

	mu      sync.Mutex
	pending []versions.Entry

	recMu  sync.Mutex // one Record at a time
	broken bool       // a Record failed
	wrote  bool       // a checkpoint was recorded

	quit chan struct{}
	done chan struct{}
}

// newCheckpointer starts the periodic checkpoints of idx; stop ends them.
func newCheckpointer(ctx context.Context, idx cacheIndex, onErr func(error)) *checkpointer {
	k := &checkpointer{idx: idx, onErr: onErr, quit: make(chan struct{}), done: make(chan struct{})}
	go k.tick(ctx)
	return k
}

// tick records the pending entries every checkpointPeriod until stop.
func (k *checkpointer) tick(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(checkpointPeriod)
	defer t.Stop()
	for {
		select {
		case <-k.quit:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			k.flush(ctx)
		}
	}
}

// stop ends the periodic checkpoints and waits for one in flight.
func (k *checkpointer) stop() {
	close(k.quit)
	<-k.done
}

// add notes a fresh entry; the add that fills a batch records it.
func (k *checkpointer) add(ctx context.Context, e versions.Entry) {
	k.mu.Lock()
	k.pending = append(k.pending, e)
	var batch []versions.Entry
	if len(k.pending) >= checkpointEvery {
		batch, k.pending = k.pending, nil
	}
	k.mu.Unlock()
	if batch != nil {
		k.record(ctx, batch, nil)
	}
}

// take returns the pending entries and forgets them.
func (k *checkpointer) take() []versions.Entry {
	k.mu.Lock()
	defer k.mu.Unlock()
	batch := k.pending
	k.pending = nil
	return batch
}

// flush records the pending entries, if any.
func (k *checkpointer) flush(ctx context.Context) {
	if batch := k.take(); len(batch) > 0 {
		k.record(ctx, batch, nil)
	}
}

// final records the pending entries with live (which may compact the
// cache). With nothing pending and no checkpoint recorded, the cache is
// as it was loaded and nothing is written.
func (k *checkpointer) final(ctx context.Context, live []versions.Entry) error {
	batch := k.take()
	k.recMu.Lock()
	wrote := k.wrote
	k.recMu.Unlock()
	if len(batch) == 0 && !wrote {
		return nil
	}
	return k.record(ctx, batch, live)
}

// record writes batch (and live) to the cache. A Record cut short by the
// context puts batch back, for the last checkpoint of a failed pin; any
// other error is reported once and stops the checkpoints.
func (k *checkpointer) record(ctx context.Context, batch, live []versions.Entry) error {
	k.recMu.Lock()
	defer k.recMu.Unlock()
	if k.broken {
		return nil
	}
	err := k.idx.Record(ctx, batch, live)
	switch {
	case err == nil:
		k.wrote = true
	case ctx.Err() != nil:
		k.mu.Lock()
		k.pending = append(batch, k.pending...)
		k.mu.Unlock()
	default:
		k.broken = true
		k.onErr(err)
	}
	return err
}
