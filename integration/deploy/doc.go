// Package deploy has no code of its own: its tests check what pinfs ships
// for running it, against the code it runs.
//
//   - The Dockerfile: a static binary built in a golang image no older than
//     go.mod asks for, copied into a runtime stage with fuse3 and CA
//     certificates, run as a non-root user with pinfs as the entrypoint.
//     The binary is built with the Dockerfile's own go build line and
//     checked with debug/elf: no program interpreter, no shared libraries.
//   - deploy/systemd/pinfs@.service: mounts /data/%i in the foreground, is
//     ready when pinfs status --wait says so, stops with SIGTERM and time for
//     run_end.
//   - Every pinfs command line under deploy/ (the unit's, and the
//     containers' and probes' of deploy/kubernetes) parses with that binary,
//     so a flag renamed or removed in the CLI fails here.
//
// The container image itself is built by make image, not by the tests.
package deploy
