package runs

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

// PassthroughReport is which members of the run the kernel served through
// FUSE passthrough at least once: their reads never reached a mount, so
// the consumed set counts them as read in full (it may say more than was
// read, never less). Set is their indices in the member table, in the
// consumed set's text form (consumed.EncodeMembers: a set in which each of
// them is read in full); pinfs run show --members marks them too.
type PassthroughReport struct {
	Members int64  `json:"members"`
	Set     string `json:"set"`
	Error   string `json:"error,omitempty"` // the record's passthrough sets could not be read
}

// PassedThrough returns the members the consumed events of run say were
// served by passthrough: the union of their Passthrough sets, each checked
// against t, the table of the run's snapshot, as Consumed checks sets.
func PassedThrough(run *runrecord.Run, t *verify.Table) (*roaring.Bitmap, error) {
	all, dec := roaring.New(), consumed.NewDecoder(t)
	for i := range run.Events {
		e := &run.Events[i]
		if e.Event != runrecord.ConsumedSet || e.Passthrough == "" {
			continue
		}
		b, err := dec.DecodeMembers(e.Passthrough)
		if err != nil {
			return nil, fmt.Errorf("run %s: passthrough members of the consumed event of %s (seq %d): %w", run.RunID, e.Time.Format(timeLayout), e.Seq, err)
		}
		all.Or(b)
	}
	return all, nil
}

// passthroughReport is the report of run's passthrough members, nil when
// it has none (a run with --passthrough=false reports as before).
func passthroughReport(run *runrecord.Run, t *verify.Table) (*PassthroughReport, *roaring.Bitmap) {
	b, err := PassedThrough(run, t)
	if err != nil {
		return &PassthroughReport{Error: err.Error()}, nil
	}
	if b.IsEmpty() {
		return nil, nil
	}
	return &PassthroughReport{Members: int64(b.GetCardinality()), Set: consumed.EncodeMembers(b)}, b
}
