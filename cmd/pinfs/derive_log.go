package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/pflag"
)

// deriveLogCmd is a stub until helper L lands `pinfs derive log`.
var deriveLogCmd = &command{
	name:  "log",
	args:  "DIGEST|KEY --store STORE [--json]",
	short: "show the derivation records that produced a snapshot, and those of its inputs",
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
	},
}
