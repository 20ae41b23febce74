// Package runs answers the provenance questions about one training run from
// its run record (cmd/internal/runrecord) and its snapshot's member table:
// what the run read (Consumed, ConsumedDigest), whether anything was wrong
// while it read (Show), whether those exact bytes can be read again
// (Replay), and the same answers as W3C PROV-JSON (ExportPROV) or as an
// in-toto Statement with SLSA provenance (ExportInToto). Of a run still
// going, the record has each mount's reads only as of its last flush:
// AskLive asks the run's mounts that serve on this host for their
// counters and consumed set so far, and ShowSet adds them. It implements
// `pinfs run show`, `pinfs run replay` and `pinfs run export`.
//
// Every function here is given the run as read (runrecord.ReadRun) and the
// member table of the run's snapshot: the record names members by their
// index in that table, so the table must be the one of the run's digest.
package runs
