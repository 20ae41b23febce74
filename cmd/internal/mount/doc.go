// Package mount runs a pinfs mount from start to end: it loads and
// verifies the snapshot (from the local metadata cache when it can),
// binds the run record, builds the verified read path and the FUSE tree,
// serves until it is unmounted or signalled, and then writes the consumed
// set and run_end.
//
// The order matters: nothing is mounted before the manifest and the member
// table have passed every check and the run record has accepted the
// digest, so a refused manifest or a run id bound to other data never
// serves a byte.
//
// With Config.Passthrough the tree may hand the kernel a member's verified
// cache file at open (FUSE passthrough, passthrough.go): a probe right
// after mounting decides whether the kernel takes such files, and logs
// once why not. Such an open is recorded as the member opened and read in
// full, and as served by passthrough.
package mount
