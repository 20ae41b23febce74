package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/pflag"
)

// deriveCmd is a stub until helper D lands `pinfs derive`.
var deriveCmd = &command{
	name:  "derive",
	args:  "--input NAME=DIGEST… --transform VERSION [--param K=V…] --store STORE -- CMD [ARGS…]",
	short: "run a versioned transform over pinned inputs and pin its output, with a record",
	subs:  []*command{deriveLogCmd},
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
	},
}
