// Package consumed keeps what a run consumed: which members of a snapshot
// a mount opened, which it read in full, and which bytes of the others,
// keyed by the member's index in the snapshot's (immutable,
// digest-addressed) member table.
//
// # The set
//
// A Set holds three things: Opened, the members opened or read; Full,
// those read in full (an empty member counts once it is opened); and
// Parts, for each member read in part, the granules (4 KiB) that were
// read. Sets are unioned in place, so the consumed set of a run is the
// union of the deltas its mounts wrote, in any order, repeats included.
//
// # The text form
//
// Encode writes a Set as "c1." followed by base64 (URL alphabet, no
// padding) of the deflated binary form: a sequence of bitmaps of uint32
// values, each as runs of consecutive values (see appendRuns: the count
// of runs, the gap before each, then the length of each, all uvarints).
// The bitmaps are, in order: the members only opened (Opened minus Full
// and the Parts' members), Full, the Parts' members, then the granules of
// each of those in ascending member order. Runs code a set read in order
// in a few bytes, and gaps deflate to about 8 bits a member in a set read
// in random order, half the size of roaring's portable format deflated.
// A Decoder, made for the run's member table, checks every byte of it (it
// never panics), refuses a member or granule beyond the table before it
// allocates for it, and caps what a run's sets cost together, so a damaged
// or hostile record yields an error, not a wrong set nor a heap that grows
// beyond the table's worth.
//
// # The tracker
//
// A Tracker records what one mount reads. Opened and Read take no lock;
// Delta returns what changed since the last Delta, for a periodic
// consumed event, and Seed starts a resumed mount from what earlier
// mounts of the run consumed.
package consumed
