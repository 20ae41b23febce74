package pin

import (
	"strconv"
	"unicode/utf8"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/jcs"
)

// listingJSON returns jcs.Marshal(vs), the canonical JSON of a listing
// whose SHA-256 a manifest records. jcs decodes and re-encodes every
// token, which takes seconds for 100,000 versions and is paid by every
// pin, plan, shard and merge; so when every string is valid UTF-8 it
// writes the bytes directly with jcs.AppendString, as the member table
// does, and otherwise it asks jcs.
func listingJSON(vs []store.ObjectVersion) ([]byte, error) {
	n := 2
	for _, v := range vs {
		if !plainJSON(v.Key) || !plainJSON(v.VersionID) || !plainJSON(v.ETag) || v.Size < 0 || v.Size > 1<<53 {
			return jcs.Marshal(vs)
		}
		n += len(v.Key) + len(v.VersionID) + len(v.ETag) + 64
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		// Members in the order of their names: ETag, Key, Size, VersionID.
		b = jcs.AppendString(append(b, `{"ETag":`...), v.ETag)
		b = jcs.AppendString(append(b, `,"Key":`...), v.Key)
		b = strconv.AppendInt(append(b, `,"Size":`...), v.Size, 10)
		b = jcs.AppendString(append(b, `,"VersionID":`...), v.VersionID)
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// plainJSON reports whether s can be written with jcs.AppendString:
// valid UTF-8 (json.Marshal would replace anything else).
func plainJSON(s string) bool { return utf8.ValidString(s) }

// encode returns jcs.Marshal(pl). The objects of the shards are nearly all
// of a plan's bytes, so they are written as listingJSON writes versions;
// the small parts, and an object with an unusual string, go through jcs.
func (pl *Plan) encode() ([]byte, error) {
	manifest, err := jcs.Marshal(pl.Manifest)
	if err != nil {
		return nil, err
	}
	schema, err := jcs.Marshal(pl.Schema)
	if err != nil {
		return nil, err
	}
	source, err := jcs.Marshal(pl.Source)
	if err != nil {
		return nil, err
	}
	// Members in the order of their names: manifest, schema, shards, source.
	b := append([]byte(`{"manifest":`), manifest...)
	b = append(append(b, `,"schema":`...), schema...)
	b = append(b, `,"shards":`...)
	b = append(b, openArray(pl.Shards == nil)...)
	for i, s := range pl.Shards {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"bytes":`...), s.Bytes, 10)
		b = append(b, `,"objects":`...)
		b = append(b, openArray(s.Objects == nil)...)
		for j, o := range s.Objects {
			if j > 0 {
				b = append(b, ',')
			}
			if !plainJSON(o.Key) || !plainJSON(o.VersionID) || !plainJSON(o.ETag) || o.Size < 0 || o.Size > 1<<53 {
				ob, err := jcs.Marshal(o)
				if err != nil {
					return nil, err
				}
				b = append(b, ob...)
				continue
			}
			// etag, key, size, version_id
			b = jcs.AppendString(append(b, `{"etag":`...), o.ETag)
			b = jcs.AppendString(append(b, `,"key":`...), o.Key)
			b = strconv.AppendInt(append(b, `,"size":`...), o.Size, 10)
			b = jcs.AppendString(append(b, `,"version_id":`...), o.VersionID)
			b = append(b, '}')
		}
		b = append(b, closeArray(s.Objects == nil)+"}"...)
	}
	b = append(b, closeArray(pl.Shards == nil)...)
	b = append(append(b, `,"source":`...), source...)
	return append(b, '}'), nil
}

// openArray and closeArray write a JSON array around its elements, or
// null for a nil slice, as encoding/json does.
func openArray(isNil bool) string {
	if isNil {
		return "null"
	}
	return "["
}

func closeArray(isNil bool) string {
	if isNil {
		return ""
	}
	return "]"
}
