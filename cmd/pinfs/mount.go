package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/pflag"
)

var mountCmd = &command{
	name:  "mount",
	args:  "DIGEST MOUNTPOINT --store STORE [flags]",
	short: "serve a snapshot read-only through FUSE (digests only)",
	long: `Mount the snapshot DIGEST read-only at MOUNTPOINT. pinfs mounts digests
only: an alias, "latest", a short prefix or a path is refused with exit
status 2, so a worker can never resolve a moving name.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		storeFlag(fs)
		return func(ctx context.Context, args []string) error {
			if len(args) != 2 {
				return usagef("want DIGEST MOUNTPOINT, got %d arguments", len(args))
			}
			if _, err := parseDigest(args[0]); err != nil {
				return err
			}
			return errors.New("mount is not implemented yet")
		}
	},
}
