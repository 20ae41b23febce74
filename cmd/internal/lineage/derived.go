package lineage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/derivations"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/derive"
)

// MaxDepth is how many levels of derivations Derived follows below the
// digest it is given; an input deeper than that is not looked up.
const MaxDepth = 32

// The kinds of Node.
const (
	KindDerived    = "derived"     // Derivations holds the records that produced Digest
	KindNotDerived = "not-derived" // no record produced Digest; Manifest says where it was pinned from
	KindSeen       = "seen"        // Digest was shown earlier in the walk (depth first, inputs in record order)
	KindDepth      = "depth-limit" // Digest is MaxDepth levels down and was not looked up
)

// The states of Node.Manifest for a digest that was not derived.
const (
	ManifestRead       = "read"       // the manifest was read and verified; Sources are its sources
	ManifestMissing    = "missing"    // the store does not hold the manifest
	ManifestUnreadable = "unreadable" // the manifest could not be read or failed its digest; Error says why
)

// Node is the lineage of one snapshot digest.
type Node struct {
	Digest      verify.Digest   `json:"digest"`
	Kind        string          `json:"kind"` // a Kind* constant
	Derivations []*Derivation   `json:"derivations,omitempty"`
	Manifest    string          `json:"manifest,omitempty"` // not derived: a Manifest* constant
	Sources     []verify.Source `json:"sources,omitempty"`  // not derived, manifest read: where it was pinned from
	Error       string          `json:"error,omitempty"`    // ManifestUnreadable: why
}

// Derivation is one record that produced a node's digest, with the
// lineage of each of its inputs in the record's order.
type Derivation struct {
	Record *derive.Record `json:"record"`
	Inputs []Input        `json:"inputs"`
}

// Input is one input of a derivation and its lineage.
type Input struct {
	Name string `json:"name"`
	Node *Node  `json:"node"`
}

// Unreadable reports whether the walk met a manifest it could not read
// (other than a missing one) anywhere under n.
func (n *Node) Unreadable() bool {
	if n.Manifest == ManifestUnreadable {
		return true
	}
	for _, dv := range n.Derivations {
		for _, in := range dv.Inputs {
			if in.Node.Unreadable() {
				return true
			}
		}
	}
	return false
}

// Records is what Derived reads: derivation records and manifests.
type Records interface {
	// Find returns the record of key d, or else the records whose output
	// is d; none is an error wrapping derivations.ErrNoRecord.
	Find(ctx context.Context, d verify.Digest) ([]*derive.Record, error)
	// ByOutput returns the records whose output is d; empty when none.
	ByOutput(ctx context.Context, d verify.Digest) ([]*derive.Record, error)
	// Manifest returns manifest d, verified against d; an error wrapping
	// store.ErrNotFound when the store does not hold it.
	Manifest(ctx context.Context, d verify.Digest) (*verify.Manifest, error)
}

// StoreRecords returns the Records of st: records through
// store/derivations, manifests through verify.ParseManifest.
func StoreRecords(st store.Blobs) Records { return storeRecords{st} }

type storeRecords struct{ st store.Blobs }

func (s storeRecords) Find(ctx context.Context, d verify.Digest) ([]*derive.Record, error) {
	return derivations.Find(ctx, s.st, d)
}

func (s storeRecords) ByOutput(ctx context.Context, d verify.Digest) ([]*derive.Record, error) {
	return derivations.ByOutput(ctx, s.st, d)
}

func (s storeRecords) Manifest(ctx context.Context, d verify.Digest) (*verify.Manifest, error) {
	b, err := s.st.Get(ctx, verify.ManifestKey(d))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	return verify.ParseManifest(d, b)
}

// Derived returns the lineage of d, which is a derivation key or the
// output digest of one or more derivations: the records that produced it
// and, depth first, the lineage of each of their inputs, as far as rs
// knows. A digest met a second time is a KindSeen node; one MaxDepth
// levels down is a KindDepth node. An input no record produced is a
// KindNotDerived node with its manifest's sources; a manifest the store
// lacks or cannot give is noted in the node, not an error.
//
// No record for d itself is an error wrapping derivations.ErrNoRecord. A record that
// fails to parse (the error of rs names its key) or a store failure ends
// the walk with an error.
func Derived(ctx context.Context, rs Records, d verify.Digest) (*Node, error) {
	recs, err := rs.Find(ctx, d)
	if err != nil {
		return nil, err
	}
	w := &walker{rs: rs, seen: map[verify.Digest]bool{}}
	out := recs[0].Output
	w.seen[out] = true
	return w.derived(ctx, out, recs, 0)
}

// walker walks one lineage; seen holds every digest already shown.
type walker struct {
	rs   Records
	seen map[verify.Digest]bool
}

// node returns the lineage of input digest d, depth levels below the top.
func (w *walker) node(ctx context.Context, d verify.Digest, depth int) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case w.seen[d]:
		return &Node{Digest: d, Kind: KindSeen}, nil
	case depth >= MaxDepth:
		return &Node{Digest: d, Kind: KindDepth}, nil
	}
	w.seen[d] = true
	recs, err := w.rs.ByOutput(ctx, d)
	if err != nil {
		return nil, err
	}
	if len(recs) > 0 {
		return w.derived(ctx, d, recs, depth)
	}
	n := &Node{Digest: d, Kind: KindNotDerived, Manifest: ManifestRead}
	m, err := w.rs.Manifest(ctx, d)
	switch {
	case err == nil:
		n.Sources = m.Sources
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, store.ErrNotFound):
		n.Manifest = ManifestMissing
	default:
		n.Manifest, n.Error = ManifestUnreadable, strings.Join(strings.Fields(err.Error()), " ")
	}
	return n, nil
}

// derived returns the node of d, produced by recs, with the lineage of their inputs.
func (w *walker) derived(ctx context.Context, d verify.Digest, recs []*derive.Record, depth int) (*Node, error) {
	n := &Node{Digest: d, Kind: KindDerived}
	for _, r := range recs {
		if r.Output != d {
			return nil, fmt.Errorf("derivation record %s: output %s, found for %s", r.Key, r.Output, d)
		}
		dv := &Derivation{Record: r, Inputs: make([]Input, 0, len(r.Inputs))}
		for _, in := range r.Inputs {
			c, err := w.node(ctx, in.Digest, depth+1)
			if err != nil {
				return nil, err
			}
			dv.Inputs = append(dv.Inputs, Input{Name: in.Name, Node: c})
		}
		n.Derivations = append(n.Derivations, dv)
	}
	return n, nil
}

// WriteDerived prints the lineage n as an indented tree, two spaces per
// level: the output digest, then per record its key, transform, time,
// command (shell-quoted), params and split, and per input
// "input NAME: DIGEST" followed by that input's lineage.
func WriteDerived(w io.Writer, n *Node) error {
	p := &printer{w: w}
	p.line(0, "output %s", n.Digest)
	p.node(1, n)
	return p.err
}

// printer writes lines and keeps the first write error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(indent int, format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, strings.Repeat("  ", indent)+format+"\n", a...)
	}
}

func (p *printer) node(indent int, n *Node) {
	switch n.Kind {
	case KindSeen:
		p.line(indent, "shown above")
	case KindDepth:
		p.line(indent, "not followed: %d levels of derivations shown", MaxDepth)
	case KindNotDerived:
		p.line(indent, "not derived; %s", notDerived(n))
	}
	for _, dv := range n.Derivations {
		r := dv.Record
		p.line(indent, "derivation %s", r.Key)
		p.line(indent+1, "transform %s", r.Transform)
		p.line(indent+1, "time      %s", r.Time)
		p.line(indent+1, "command   %s", shellJoin(r.Command))
		p.line(indent+1, "params    %s", params(r.Params))
		p.line(indent+1, "split     %s", r.Split)
		for _, in := range dv.Inputs {
			p.line(indent+1, "input %s: %s", in.Name, in.Node.Digest)
			p.node(indent+2, in.Node)
		}
	}
}

// notDerived says where a digest that no record produced came from.
func notDerived(n *Node) string {
	switch {
	case n.Manifest == ManifestMissing:
		return "its manifest is not in the store"
	case n.Manifest == ManifestUnreadable:
		return "its manifest cannot be read: " + n.Error
	case len(n.Sources) == 0:
		return "its manifest names no sources"
	}
	uris := make([]string, len(n.Sources))
	for i, s := range n.Sources {
		uris[i] = verify.Printable(s.URI)
	}
	return "pinned from " + strings.Join(uris, ", ")
}

// params renders a record's parameters as k=v, sorted by key, values shell-quoted.
func params(ps map[string]string) string {
	if len(ps) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(ps)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + shellQuote(ps[k]))
	}
	return b.String()
}

// shellJoin renders argv as one shell command line.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it: 'single quotes',
// or bash's $'…' (Go escapes, which bash reads the same) when s holds
// control characters or invalid UTF-8, so that a value stays on one line
// and sends nothing to the terminal.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !safeRune(r) }) < 0 {
		return s
	}
	if !strings.ContainsFunc(s, unicode.IsControl) && utf8.ValidString(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	q := strconv.Quote(s)
	return "$'" + strings.ReplaceAll(q[1:len(q)-1], "'", `\'`) + "'"
}

func safeRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)
}
