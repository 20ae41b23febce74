// Package derive defines the derivation record: how a snapshot was made
// from other snapshots (its inputs, by digest), the version of the code
// that made it (the transform), that code's parameters and command line,
// and the output it gave. The record's key names the derivation without
// its result, so that running the same derivation again can be looked up,
// skipped, or checked for the same bytes.
//
// A record is about 1 KB of canonical JSON (RFC 8785, verify/jcs):
//
//	{"command":["python3","harvest.py"],"inputs":[{"digest":"sha256:…","name":"exports"}],
//	 "key":"sha256:…","output":"sha256:…","params":{"min_agreement":"5"},
//	 "schema":"pinfs.derivation.v1","split":"dir","time":"2026-12-01T13:40:00Z",
//	 "transform":"harvest@v1.4.2"}
//
// The key is the SHA-256 of the canonical record without "key", "output"
// and "time". Nothing else is left out: the same inputs, transform,
// parameters, command and split rule give the same key on any machine.
package derive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/jcs"
)

// Schema is the schema name and version of derivation records.
const Schema = "pinfs.derivation.v1"

// MaxSize is the largest record Parse accepts.
const MaxSize = 64 << 10

// TimeFormat is the layout of Record.Time: RFC 3339 in UTC, to the second.
const TimeFormat = "2006-01-02T15:04:05Z"

// ErrInvalid is wrapped by the errors of Parse and Encode: a record that
// is malformed, tampered with, or whose key is not the key of its fields.
var ErrInvalid = errors.New("invalid derivation record")

// Input is one input of a derivation: a snapshot, by digest, under the
// name the command finds it by.
type Input struct {
	Name   string        `json:"name"`
	Digest verify.Digest `json:"digest"`
}

// Record is one derivation and its output.
type Record struct {
	Schema    string            `json:"schema"`
	Key       verify.Digest     `json:"key"`
	Inputs    []Input           `json:"inputs"`    // sorted by name
	Transform string            `json:"transform"` // NAME@VERSION
	Params    map[string]string `json:"params"`
	Command   []string          `json:"command"`
	Split     string            `json:"split"` // the split rule the output was pinned with
	Output    verify.Digest     `json:"output"`
	Time      string            `json:"time"` // TimeFormat
}

// New checks the parts of a derivation, sorts the inputs by name, and
// returns its record with Schema and Key set; the caller sets Output and
// Time once the output is pinned. Its errors are about the caller's input.
func New(inputs []Input, transform string, params map[string]string, command []string, split string) (*Record, error) {
	r := &Record{
		Schema: Schema, Inputs: slices.Clone(inputs), Transform: transform,
		Params: maps.Clone(params), Command: slices.Clone(command), Split: split,
	}
	if r.Params == nil {
		r.Params = map[string]string{}
	}
	slices.SortFunc(r.Inputs, func(a, b Input) int { return strings.Compare(a.Name, b.Name) })
	if err := r.checkParts(); err != nil {
		return nil, err
	}
	k, err := r.key()
	if err != nil {
		return nil, err
	}
	r.Key = k
	return r, nil
}

// Encode returns the canonical JSON of a complete record, after checking
// every field again, the key included. It has no trailing newline.
func (r *Record) Encode() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	return jcs.Marshal(r)
}

// Parse decodes and checks a record: at most MaxSize bytes, no unknown or
// duplicate fields, the schema, every field, and a key that is the key of
// the rest. A tampered record fails with an error wrapping ErrInvalid.
func Parse(b []byte) (*Record, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, len(b), MaxSize)
	}
	if _, err := jcs.Canonicalize(b); err != nil { // duplicate names, bad UTF-8, trailing data
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// check checks a complete record: its parts, the output, the time and
// the key. Its errors wrap ErrInvalid.
func (r *Record) check() error {
	if r.Schema != Schema {
		return fmt.Errorf("%w: schema %q, want %q", ErrInvalid, verify.Printable(r.Schema), Schema)
	}
	if err := r.checkParts(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if r.Params == nil {
		return fmt.Errorf("%w: params: want an object, {} when there are none", ErrInvalid)
	}
	if !slices.IsSortedFunc(r.Inputs, func(a, b Input) int { return strings.Compare(a.Name, b.Name) }) {
		return fmt.Errorf("%w: inputs not sorted by name", ErrInvalid)
	}
	if _, err := verify.ParseDigest(string(r.Output)); err != nil {
		return fmt.Errorf("%w: output: %v", ErrInvalid, err)
	}
	if t, err := time.Parse(TimeFormat, r.Time); err != nil || t.Format(TimeFormat) != r.Time {
		return fmt.Errorf("%w: time %q: not %s", ErrInvalid, verify.Printable(r.Time), TimeFormat)
	}
	k, err := r.key()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if r.Key != k {
		return fmt.Errorf("%w: key %s is not the key of its fields (%s): the record was changed", ErrInvalid, verify.Printable(string(r.Key)), k)
	}
	return nil
}

// key returns the SHA-256 of the canonical record without key, output and
// time.
func (r *Record) key() (verify.Digest, error) {
	c := *r
	c.Key, c.Output, c.Time = "", "", ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", err
	}
	delete(doc, "key")
	delete(doc, "output")
	delete(doc, "time")
	b, err = jcs.Marshal(doc)
	if err != nil {
		return "", err
	}
	return verify.SHA256(b), nil
}
