package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pinfs/pinfs/verify/sign"
)

var keyCmd = &command{
	name:  "key",
	short: "make keys for approving snapshots",
	long:  `Keys that sign approvals (pinfs approve) and that a trust policy lists.`,
	subs:  []*command{keyGenerateCmd},
}

var keyGenerateCmd = &command{
	name:  "generate",
	args:  "PREFIX",
	short: "make an ed25519 key pair: PREFIX.key (0600) and PREFIX.pub",
	long: `Make a new ed25519 key pair and write PREFIX.key, the private key
(PKCS#8 PEM, mode 0600), and PREFIX.pub, the public key (PKIX PEM) to list
in a trust policy. Print both paths and the key id (sha256 of the public
key's DER encoding), the name under which approvals and policy errors
refer to the key.

An existing PREFIX.key or PREFIX.pub is never overwritten: the command
fails (exit 1) and writes nothing. pinfs approve refuses a key file that
group or others can read.`,
	setup: func(fs *pflag.FlagSet, out io.Writer) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usagef("want exactly one PREFIX, got %d arguments", len(args))
			}
			prefix := args[0]
			if prefix == "" || strings.HasSuffix(prefix, string(filepath.Separator)) {
				return usagef("PREFIX %q names the files to write, e.g. keys/alice", prefix)
			}
			if fi, err := os.Stat(prefix); err == nil && fi.IsDir() {
				return usagef("PREFIX %s is a directory; give a file name prefix, e.g. %s", prefix, filepath.Join(prefix, "alice"))
			}
			pubPath, keyPath, err := sign.Generate(prefix)
			if err != nil {
				return err
			}
			pub, err := sign.LoadPublicKey(pubPath)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "private key %s (keep it secret)\npublic key  %s\nkey id      %s\n", keyPath, pubPath, sign.KeyID(pub))
			return nil
		}
	},
}
