package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/cmd/internal/buildinfo"
)

var versionCmd = &command{
	name:  "version",
	args:  "[--json]",
	short: "print which pinfs build this is: module version and VCS revision",
	long: `Print the build of this pinfs binary: its module version (v1.2.3, or
(devel) for a build from a checkout), the VCS revision it was built from
(+dirty when the work tree had uncommitted changes) and the Go toolchain,
as the Go toolchain stamped them into the binary. pinfs --version prints
the same. --json prints them as the object that run records and pinfs
status carry.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		asJSON := fs.Bool("json", false, "print the build as JSON: version, revision, modified, go")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usagef("want no arguments, got %d", len(args))
			}
			if *asJSON {
				return printJSON(out, buildinfo.Get())
			}
			_, err := fmt.Fprintf(out, "pinfs %s\n", buildinfo.Get())
			return err
		}
	},
}
