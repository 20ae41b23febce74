package s3store

import (
	"context"
	"crypto/md5"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeS3 is a small in-memory S3 (path-style) for unit tests: buckets with
// versioning, GET/HEAD with versionId and Range, PUT with If-None-Match and
// If-Match, GetBucketVersioning, a paginated ListObjectVersions and a
// paginated ListObjectsV2. It records every
// request, and a test can intercept requests with hook.
type fakeS3 struct {
	mu       sync.Mutex
	buckets  map[string]*fakeBucket
	reqs     []*http.Request // clones, bodies not kept
	pageSize int             // ListObjectVersions and ListObjectsV2 page size
	// markerExists makes If-None-Match: * fail on a key whose current
	// version is a delete marker, as versitygw v1.8.0 does (AWS S3 lets
	// the write through).
	markerExists bool
	// hook, if set, sees each request first; returning true means it wrote
	// the response.
	hook func(w http.ResponseWriter, r *http.Request) bool
	srv  *httptest.Server
}

type fakeBucket struct {
	versioning string                    // "", "Enabled" or "Suspended"
	objects    map[string][]*fakeVersion // newest first
	seq        int
}

type fakeVersion struct {
	id           string
	data         []byte
	deleteMarker bool
}

func (v *fakeVersion) etag() string { return fmt.Sprintf("%q", fmt.Sprintf("%x", md5.Sum(v.data))) }

// newFake starts a fake S3 and returns it with a Client configured, the way
// pinfs is, from the environment: only AWS_ENDPOINT_URL_S3 and static keys,
// no region (so the default applies) and no shared config files.
func newFake(t testing.TB) (*fakeS3, *Client) {
	t.Helper()
	f := &fakeS3{buckets: map[string]*fakeBucket{}, pageSize: 1000}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	isolateAWSEnv(t)
	// A host name, not an IP: the SDK would pick virtual-hosted style for
	// it unless NewClient asks for path style.
	return f, f.client(t, strings.Replace(f.srv.URL, "127.0.0.1", "localhost", 1))
}

// client returns a Client made by NewClient for the endpoint.
func (f *fakeS3) client(t testing.TB, endpoint string) *Client {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFAKE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fakesecret")
	c, err := NewClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// isolateAWSEnv clears the AWS variables a developer's shell might have and
// points the shared config files at nothing.
func isolateAWSEnv(t testing.TB) {
	t.Helper()
	for _, k := range []string{
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	} {
		t.Setenv(k, "")
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func (f *fakeS3) createBucket(name, versioning string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buckets[name] = &fakeBucket{versioning: versioning, objects: map[string][]*fakeVersion{}}
}

// put adds a version of bucket/key and returns its id, as a PUT would.
func (f *fakeS3) put(bucket, key string, data []byte) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buckets[bucket].add(key, data, false)
}

// deleteKey adds a delete marker, as a DELETE without a version would.
func (f *fakeS3) deleteKey(bucket, key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buckets[bucket].add(key, nil, true)
}

func (b *fakeBucket) add(key string, data []byte, del bool) string {
	id := "null"
	if b.versioning == "Enabled" {
		b.seq++
		id = fmt.Sprintf("v%03d", b.seq)
	}
	vs := slices.DeleteFunc(b.objects[key], func(v *fakeVersion) bool { return v.id == "null" && id == "null" })
	b.objects[key] = append([]*fakeVersion{{id: id, data: data, deleteMarker: del}}, vs...)
	return id
}

// setHook installs h (nil: none) for the following requests.
func (f *fakeS3) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// requests returns the recorded requests.
func (f *fakeS3) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r.Clone(context.Background()))
	hook := f.hook
	f.mu.Unlock()
	if hook != nil && hook(w, r) {
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buckets[bucket]
	if b == nil {
		writeErr(w, r, http.StatusNotFound, "NoSuchBucket")
		return
	}
	switch {
	case key == "" && r.Method == http.MethodGet && q.Has("versioning"):
		type cfg struct {
			XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ VersioningConfiguration"`
			Status  string   `xml:",omitempty"`
		}
		writeXML(w, cfg{Status: b.versioning})
	case key == "" && r.Method == http.MethodGet && q.Has("versions"):
		f.listVersions(w, b, bucket, q)
	case key == "" && r.Method == http.MethodGet && q.Get("list-type") == "2":
		f.listObjects(w, b, bucket, q)
	case key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		f.get(w, r, b, key, q)
	case key != "" && r.Method == http.MethodPut:
		if r.Header.Get("If-None-Match") == "*" {
			if vs := b.objects[key]; len(vs) > 0 && (!vs[0].deleteMarker || f.markerExists) {
				writeErr(w, r, http.StatusPreconditionFailed, "PreconditionFailed")
				return
			}
		}
		if m := r.Header.Get("If-Match"); m != "" {
			switch vs := b.objects[key]; {
			case len(vs) == 0 || vs[0].deleteMarker:
				writeErr(w, r, http.StatusNotFound, "NoSuchKey") // as S3 answers
				return
			case vs[0].etag() != m:
				writeErr(w, r, http.StatusPreconditionFailed, "PreconditionFailed")
				return
			}
		}
		data, err := io.ReadAll(r.Body)
		if err != nil || r.Header.Get("Content-Encoding") == "aws-chunked" {
			writeErr(w, r, http.StatusBadRequest, "IncompleteBody")
			return
		}
		id := b.add(key, data, false)
		if b.versioning != "" {
			w.Header().Set("x-amz-version-id", id)
		}
		w.Header().Set("ETag", b.objects[key][0].etag())
	default:
		writeErr(w, r, http.StatusNotImplemented, "NotImplemented")
	}
}

func (f *fakeS3) get(w http.ResponseWriter, r *http.Request, b *fakeBucket, key string, q map[string][]string) {
	vs := b.objects[key]
	var v *fakeVersion
	if ids, ok := q["versionId"]; ok {
		for _, c := range vs {
			if c.id == ids[0] {
				v = c
			}
		}
		if v == nil {
			writeErr(w, r, http.StatusNotFound, "NoSuchVersion")
			return
		}
		if v.deleteMarker {
			w.Header().Set("x-amz-delete-marker", "true")
			writeErr(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed")
			return
		}
	} else if len(vs) > 0 {
		v = vs[0]
	}
	if v == nil || v.deleteMarker {
		writeErr(w, r, http.StatusNotFound, "NoSuchKey")
		return
	}
	h := w.Header()
	if b.versioning != "" {
		h.Set("x-amz-version-id", v.id)
	}
	h.Set("ETag", v.etag())
	h.Set("Last-Modified", "Mon, 30 Nov 2026 12:00:00 GMT")
	data, status := v.data, http.StatusOK
	if rng := r.Header.Get("Range"); rng != "" && r.Method == http.MethodGet {
		start, end, ok := parseRange(rng, int64(len(data)))
		if !ok {
			writeErr(w, r, http.StatusRequestedRangeNotSatisfiable, "InvalidRange")
			return
		}
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
		data, status = data[start:end+1], http.StatusPartialContent
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		w.Write(data)
	}
}

// parseRange parses "bytes=a-b" or "bytes=a-" against size as S3 does.
func parseRange(rng string, size int64) (start, end int64, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(rng, "bytes="), "-")
	start, err := strconv.ParseInt(a, 10, 64)
	if !found || err != nil || start >= size {
		return 0, 0, false
	}
	end = size - 1
	if b != "" {
		e, err := strconv.ParseInt(b, 10, 64)
		if err != nil || e < start {
			return 0, 0, false
		}
		end = min(e, size-1)
	}
	return start, end, true
}

func (f *fakeS3) listVersions(w http.ResponseWriter, b *fakeBucket, bucket string, q map[string][]string) {
	type entry struct {
		Key          string
		VersionId    string
		IsLatest     bool
		LastModified string
		ETag         string `xml:",omitempty"`
		Size         *int64 `xml:",omitempty"`
		del          bool
	}
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	prefix := get("prefix")
	var all []entry
	for _, key := range slices.Sorted(maps.Keys(b.objects)) {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		for i, v := range b.objects[key] {
			e := entry{Key: key, VersionId: v.id, IsLatest: i == 0, LastModified: "2026-11-30T12:00:00.000Z", del: v.deleteMarker}
			if !v.deleteMarker {
				size := int64(len(v.data))
				e.ETag, e.Size = v.etag(), &size
			}
			all = append(all, e)
		}
	}
	if km := get("key-marker"); km != "" {
		vm := get("version-id-marker")
		i := slices.IndexFunc(all, func(e entry) bool {
			return e.Key > km || e.Key == km && vm != "" && e.VersionId == vm
		})
		if i < 0 {
			i = len(all)
		} else if all[i].Key == km {
			i++ // after the marker version
		}
		all = all[i:]
	}
	type result struct {
		XMLName             xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListVersionsResult"`
		Name                string
		Prefix              string
		MaxKeys             int
		IsTruncated         bool
		NextKeyMarker       string `xml:",omitempty"`
		NextVersionIdMarker string `xml:",omitempty"`
		Entries             []any
	}
	res := result{Name: bucket, Prefix: prefix, MaxKeys: f.pageSize}
	if len(all) > f.pageSize {
		last := all[f.pageSize-1]
		res.IsTruncated, res.NextKeyMarker, res.NextVersionIdMarker = true, last.Key, last.VersionId
		all = all[:f.pageSize]
	}
	for _, e := range all {
		name := "Version"
		if e.del {
			name = "DeleteMarker"
		}
		res.Entries = append(res.Entries, struct {
			XMLName xml.Name
			entry
		}{xml.Name{Local: name}, e})
	}
	writeXML(w, res)
}

func writeXML(w http.ResponseWriter, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/xml")
	io.WriteString(w, xml.Header)
	w.Write(b)
}

// writeErr answers with an S3 error document (HEAD: status only, as S3 does).
func writeErr(w http.ResponseWriter, r *http.Request, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, "%s<Error><Code>%s</Code><Message>fake %s</Message><RequestId>fake</RequestId></Error>", xml.Header, code, code)
	}
}

// listObjects answers ListObjectsV2: the current, non-deleted objects under
// prefix, in pages of pageSize, the continuation token being the last key.
func (f *fakeS3) listObjects(w http.ResponseWriter, b *fakeBucket, bucket string, q url.Values) {
	type object struct {
		Key  string
		Size int64
		ETag string
	}
	type result struct {
		XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
		Name                  string
		Prefix                string
		KeyCount              int
		MaxKeys               int
		IsTruncated           bool
		NextContinuationToken string `xml:",omitempty"`
		Contents              []object
	}
	res := result{Name: bucket, Prefix: q.Get("prefix"), MaxKeys: f.pageSize}
	after := q.Get("continuation-token")
	for _, key := range slices.Sorted(maps.Keys(b.objects)) {
		v := b.objects[key][0]
		if !strings.HasPrefix(key, res.Prefix) || key <= after || v.deleteMarker {
			continue
		}
		if len(res.Contents) == f.pageSize {
			res.IsTruncated, res.NextContinuationToken = true, res.Contents[len(res.Contents)-1].Key
			break
		}
		res.Contents = append(res.Contents, object{Key: key, Size: int64(len(v.data)), ETag: v.etag()})
	}
	res.KeyCount = len(res.Contents)
	writeXML(w, res)
}
