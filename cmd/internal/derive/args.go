package derive

import (
	"fmt"
	"strings"

	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// ParseInputs parses --input values, NAME=DIGEST each. DIGEST must be a
// full sha256:<64 hex> snapshot digest: an alias, "latest", a prefix or a
// path is refused (the error wraps verify.ErrNotDigest), so a derivation
// never depends on what a moving name pointed at that day. Names must be
// distinct. The inputs keep the order given; record.New sorts them.
func ParseInputs(vals []string) ([]record.Input, error) {
	var ins []record.Input
	seen := map[string]bool{}
	for _, v := range vals {
		name, digest, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("--input %s: want NAME=sha256:<64 hex>", verify.Printable(v))
		}
		if err := record.CheckName(name); err != nil {
			return nil, err
		}
		d, err := verify.ParseDigest(digest)
		if err != nil {
			return nil, fmt.Errorf("--input %s: %w", name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("--input %s: the name is given twice", name)
		}
		seen[name] = true
		ins = append(ins, record.Input{Name: name, Digest: d})
	}
	if len(ins) == 0 {
		return nil, fmt.Errorf("no --input: a derivation reads at least one snapshot (--input NAME=sha256:<64 hex>)")
	}
	return ins, nil
}

// ParseParams parses --param values, KEY=VALUE each, into the record's
// parameters; a key given twice is refused. The value may be empty and may
// hold "=".
func ParseParams(vals []string) (map[string]string, error) {
	ps := map[string]string{}
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("--param %s: want KEY=VALUE", verify.Printable(v))
		}
		if err := record.CheckParam(k, val); err != nil {
			return nil, err
		}
		if _, dup := ps[k]; dup {
			return nil, fmt.Errorf("--param %s: the key is given twice", k)
		}
		ps[k] = val
	}
	return ps, nil
}

// Parents returns the parents of r's output manifest: the distinct input
// digests in the record's input order (sorted by name), so that the
// output's digest depends on the record alone and not on the order the
// inputs were given in.
func Parents(r *record.Record) []verify.Digest {
	var ps []verify.Digest
	seen := map[verify.Digest]bool{}
	for _, in := range r.Inputs {
		if !seen[in.Digest] {
			seen[in.Digest] = true
			ps = append(ps, in.Digest)
		}
	}
	return ps
}
