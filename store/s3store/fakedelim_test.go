package s3store

import (
	"encoding/xml"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// delimLister answers ListObjectVersions for a fakeS3 as S3 does, with
// Delimiter: keys with the delimiter after the prefix roll up into one
// CommonPrefixes entry (up to and including the first delimiter), which
// counts as one entry of a page and can be a page's NextKeyMarker.
// repeat makes every page after the first start again with the last entry
// of the previous one, as versitygw v1.8.0 does.
type delimLister struct {
	f      *fakeS3
	repeat bool
}

// serveDelimited makes f answer version listings with a delimLister (as a
// hook, so it replaces any other hook) and returns it.
func serveDelimited(f *fakeS3, repeat bool) *delimLister {
	d := &delimLister{f: f, repeat: repeat}
	f.setHook(d.hook)
	return d
}

// delimItem is one entry of a delimited listing: a version, a delete
// marker or a common prefix (cp != "").
type delimItem struct {
	key, id, cp string
	latest, del bool
	size        int64
	etag        string
}

// sortKey is what a marker compares against.
func (it delimItem) sortKey() string {
	if it.cp != "" {
		return it.cp
	}
	return it.key
}

func (d *delimLister) hook(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	if r.Method != http.MethodGet || !q.Has("versions") {
		return false
	}
	bucket, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	d.f.mu.Lock()
	b := d.f.buckets[bucket]
	var items []delimItem
	if b != nil {
		for _, key := range slices.Sorted(maps.Keys(b.objects)) {
			rest, ok := strings.CutPrefix(key, prefix)
			if !ok {
				continue
			}
			if i := strings.Index(rest, delim); delim != "" && i >= 0 {
				cp := prefix + rest[:i+len(delim)]
				if n := len(items); n == 0 || items[n-1].cp != cp {
					items = append(items, delimItem{cp: cp})
				}
				continue
			}
			for i, v := range b.objects[key] {
				it := delimItem{key: key, id: v.id, latest: i == 0, del: v.deleteMarker}
				if !v.deleteMarker {
					it.size, it.etag = int64(len(v.data)), v.etag()
				}
				items = append(items, it)
			}
		}
	}
	pageSize := d.f.pageSize
	d.f.mu.Unlock()
	if b == nil {
		writeErr(w, r, http.StatusNotFound, "NoSuchBucket")
		return true
	}

	if km := q.Get("key-marker"); km != "" {
		vm := q.Get("version-id-marker")
		i := slices.IndexFunc(items, func(it delimItem) bool {
			return it.sortKey() > km || it.cp == "" && it.key == km && vm != "" && it.id == vm
		})
		if i < 0 {
			i = len(items)
		} else if items[i].cp == "" && items[i].key == km {
			i++ // after the marker version
		}
		if d.repeat && i > 0 {
			i--
		}
		items = items[i:]
	}
	d.write(w, bucket, prefix, delim, pageSize, items)
	return true
}

// write answers one page of items.
func (d *delimLister) write(w http.ResponseWriter, bucket, prefix, delim string, pageSize int, items []delimItem) {
	type version struct {
		XMLName      xml.Name
		Key          string
		VersionId    string
		IsLatest     bool
		LastModified string
		ETag         string `xml:",omitempty"`
		Size         *int64 `xml:",omitempty"`
	}
	type commonPrefix struct {
		XMLName xml.Name `xml:"CommonPrefixes"`
		Prefix  string
	}
	type result struct {
		XMLName             xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListVersionsResult"`
		Name                string
		Prefix              string
		Delimiter           string `xml:",omitempty"`
		MaxKeys             int
		IsTruncated         bool
		NextKeyMarker       string `xml:",omitempty"`
		NextVersionIdMarker string `xml:",omitempty"`
		Entries             []any
	}
	res := result{Name: bucket, Prefix: prefix, Delimiter: delim, MaxKeys: pageSize}
	if len(items) > pageSize {
		last := items[pageSize-1]
		res.IsTruncated, res.NextKeyMarker = true, last.sortKey()
		if last.cp == "" {
			res.NextVersionIdMarker = last.id
		}
		items = items[:pageSize]
	}
	for _, it := range items {
		if it.cp != "" {
			res.Entries = append(res.Entries, commonPrefix{Prefix: it.cp})
			continue
		}
		v := version{XMLName: xml.Name{Local: "Version"}, Key: it.key, VersionId: it.id, IsLatest: it.latest,
			LastModified: "2026-11-30T12:00:00.000Z"}
		if it.del {
			v.XMLName.Local = "DeleteMarker"
		} else {
			size := it.size
			v.ETag, v.Size = it.etag, &size
		}
		res.Entries = append(res.Entries, v)
	}
	writeXML(w, res)
}
