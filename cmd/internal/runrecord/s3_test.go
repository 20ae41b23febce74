package runrecord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/store/dial"
)

// realRecords runs versitygw with a versioned bucket "records" and points
// the AWS environment at endpoint, or at the server when endpoint is "".
// It returns the server and Options for run id at s3://records/pinfs.
func realRecords(t *testing.T, endpoint func(s *s3test.Server) string, runID string) (*s3test.Server, Options) {
	t.Helper()
	s := s3test.Start(t)
	s.CreateBucket(t, "records", true)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if endpoint != nil {
		t.Setenv("AWS_ENDPOINT_URL_S3", endpoint(s))
		t.Setenv("AWS_ENDPOINT_URL", endpoint(s))
	}
	return s, Options{
		URL: "s3://records/pinfs", RunID: runID, Digest: digestA, SpoolDir: t.TempDir(),
		Open: func(ctx context.Context, u string) (store.Blobs, error) { return dial.Open(ctx, u) },
	}
}

// keys lists the current keys of bucket records under prefix.
func keys(t testing.TB, s *s3test.Server, prefix string) []string {
	t.Helper()
	out, err := s.Client(t).ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("records"), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range out.Contents {
		ks = append(ks, aws.ToString(o.Key))
	}
	return ks
}

// refuseNotExclusive checks that Open failed because the binding could
// not be created exclusively, and that nothing of the run was stored.
func refuseNotExclusive(t *testing.T, s *s3test.Server, o Options, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("Open bound run %s although the store cannot create its binding exclusively", o.RunID)
	}
	if !errors.Is(err, store.ErrNotExclusive) || !strings.Contains(err.Error(), "refusing to bind run "+o.RunID) {
		t.Fatalf("Open: want a refusal wrapping store.ErrNotExclusive, got %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the refusal is not one line: %q", err)
	}
	if ks := keys(t, s, "pinfs/runs/"+o.RunID+"/"); len(ks) > 0 {
		t.Fatalf("a refused bind stored %v", ks)
	}
}

// TestS3BindRefusedWithoutConditionalWrites: a server that answers
// NotImplemented to If-None-Match cannot make the binding exclusive, so
// the run must not be bound (an unconditional PUT would let two first
// mounts both claim run_start).
func TestS3BindRefusedWithoutConditionalWrites(t *testing.T) {
	var conditional sync.Map
	s, o := realRecords(t, func(s *s3test.Server) string {
		target, _ := url.Parse(s.Endpoint)
		rp := httputil.NewSingleHostReverseProxy(target)
		p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "" {
				conditional.Store(r.URL.Path, true)
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusNotImplemented)
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>`+
					`<Message>A header you provided implies functionality that is not implemented.</Message></Error>`)
				return
			}
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(p.Close)
		return p.URL
	}, "run-ni")
	r, err := Open(t.Context(), o)
	if err == nil {
		r.Close(t.Context())
	}
	if _, ok := conditional.Load("/records/pinfs/runs/run-ni/run.json"); !ok && err == nil {
		t.Fatal("the binding was not even tried with If-None-Match")
	}
	refuseNotExclusive(t, s, o, err)
	if !strings.Contains(err.Error(), "If-None-Match") {
		t.Errorf("the refusal does not say why: %v", err)
	}
}

// TestS3BindRefusedOverDeleteMarker: versitygw counts a delete marker as
// existing for If-None-Match, so a binding whose current version is a
// delete marker cannot be created exclusively: refused, not overwritten
// unconditionally.
func TestS3BindRefusedOverDeleteMarker(t *testing.T) {
	s, o := realRecords(t, nil, "run-dm")
	key := "pinfs/runs/run-dm/run.json"
	s.Put(t, "records", key, []byte("an old binding, deleted\n"))
	if _, err := s.Client(t).DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String("records"), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(t.Context(), o)
	if err == nil {
		r.Close(t.Context())
	}
	refuseNotExclusive(t, s, o, err)
	if !strings.Contains(err.Error(), "delete marker") {
		t.Errorf("the refusal does not say why: %v", err)
	}
}

// TestS3ConcurrentFirstMounts: two first mounts of one run id at the same
// time (two hosts, two spools) against a real server: exactly one starts
// the run, the other resumes it.
func TestS3ConcurrentFirstMounts(t *testing.T) {
	s, o := realRecords(t, nil, "")
	for i := range 5 {
		o := o
		o.RunID = fmt.Sprintf("race-%d", i)
		a, b := o, o
		a.SpoolDir, b.SpoolDir = t.TempDir(), t.TempDir()
		starts := openTogether(t, a, b)
		var stored []string
		for _, k := range keys(t, s, "pinfs/runs/"+o.RunID+"/events/") {
			_, name, _ := strings.Cut(k, "/events/")
			stored = append(stored, strings.Split(name, "-")[2])
		}
		if starts != 1 || strings.Count(strings.Join(stored, ","), RunStart) != 1 {
			t.Fatalf("%s: %d mounts started the run; stored events %v", o.RunID, starts, stored)
		}
	}
}

// TestS3AdmitThenMount: on a real server, concurrent Admits of one run id
// create exactly one permit; the first Open after it starts the run, a
// second resumes it, and RequirePermit refuses another digest and a run
// without a permit, storing nothing for them.
func TestS3AdmitThenMount(t *testing.T) {
	s, o := realRecords(t, nil, "adm")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		held    []Permit
	)
	start := make(chan struct{})
	for i := range 8 {
		p := permitFor(digestA)
		p.Generation = int64(i + 1)
		wg.Go(func() {
			<-start
			h, c, err := Admit(t.Context(), o, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("Admit %d: %v", i, err)
				return
			}
			if c {
				created++
			}
			held = append(held, h)
		})
	}
	close(start)
	wg.Wait()
	if created != 1 {
		t.Fatalf("%d concurrent Admits created a permit, want 1", created)
	}
	for _, h := range held[1:] {
		samePermit(t, "concurrent Admit", &h, held[0])
	}

	req := o
	req.RequirePermit = true
	req.Digest = digestB
	if _, err := Open(t.Context(), req); !errors.Is(err, ErrNotPermitted) || !strings.Contains(err.Error(), "permit is for "+string(digestA)) {
		t.Fatalf("Open for another digest: %v", err)
	}
	req.Digest = digestA
	for i, resumed := range []bool{false, true} {
		r, err := Open(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Resumed() != resumed {
			t.Fatalf("Open %d: resumed %v", i, r.Resumed())
		}
		samePermit(t, "Open", r.Permit(), held[0])
		closeOK(t, r)
	}
	var evs []string
	for _, k := range keys(t, s, "pinfs/runs/adm/events/") {
		_, name, _ := strings.Cut(k, "/events/")
		evs = append(evs, strings.Split(name, "-")[2])
	}
	if got := strings.Join(evs, ","); got != "run_start,resume" {
		t.Fatalf("stored events %s", got)
	}

	req.RunID = "not-admitted"
	if _, err := Open(t.Context(), req); !errors.Is(err, ErrNotPermitted) || !strings.Contains(err.Error(), "holds no permit") {
		t.Fatalf("Open of a run without a permit: %v", err)
	}
	if ks := keys(t, s, "pinfs/runs/not-admitted/"); len(ks) > 0 {
		t.Fatalf("a refused Open stored %v", ks)
	}
}

// TestS3ReadRunAndList: ReadRun, ReadConsumed and List of a record on a
// real server (Source.Open nil: store/dial.Open), two runs and an admitted one.
func TestS3ReadRunAndList(t *testing.T) {
	_, o := realRecords(t, nil, "real-1")
	o.Store, o.FlushInterval = "s3://data/train", time.Minute
	ctx := t.Context()
	for i := range 2 {
		r, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		emitAll(t, r, Event{Event: ConsumedSet, Set: fmt.Sprintf("c1.%d", i)}, Event{Event: VersionMissing, Path: "x"},
			Event{Event: RunEnd, Totals: &Totals{MembersOpened: int64(i + 1)}})
		closeOK(t, r)
	}
	two := o
	two.RunID = "real-2"
	r, err := Open(ctx, two)
	if err != nil {
		t.Fatal(err)
	}
	emitAll(t, r, Event{Event: Mismatch, Path: "y"})
	closeOK(t, r)
	adm := o
	adm.RunID = "real-3"
	if _, _, err := Admit(ctx, adm, permitFor(digestA)); err != nil {
		t.Fatal(err)
	}

	src := Source{URL: o.URL, SpoolDir: o.SpoolDir}
	run, err := ReadRun(ctx, src, "real-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(run.Events); got != "run_start,consumed,version_missing,run_end,resume,consumed,version_missing,run_end" || run.Digest != digestA {
		t.Fatalf("events %s digest %s", got, run.Digest)
	}
	ms := run.Mounts(time.Now(), LocalLiveness)
	if len(ms) != 2 || ms[0].Store != o.Store || ms[1].FlushInterval != time.Minute || ms[1].Totals == nil || ms[1].Totals.MembersOpened != 2 {
		t.Fatalf("mounts %+v", ms)
	}
	cs, err := ReadConsumed(ctx, src, "real-1")
	if err != nil || len(cs) != 2 || cs[0].Set != "c1.0" || cs[1].Set != "c1.1" {
		t.Fatalf("consumed %+v, %v", cs, err)
	}
	if run, err := ReadRun(ctx, src, "real-3"); err != nil || run.Permit == nil || len(run.Events) != 0 {
		t.Fatalf("admitted run %+v, %v", run, err)
	}
	if _, err := ReadRun(ctx, src, "real-4"); !errors.Is(err, ErrNoRun) {
		t.Fatalf("a run the record lacks: %v", err)
	}
	infos, err := List(ctx, src, time.Now(), LocalLiveness)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range infos {
		got = append(got, fmt.Sprintf("%s:%s:%d:%d:%d", in.RunID, in.State, in.Mounts, in.Integrity[VersionMissing], in.Integrity[Mismatch]))
	}
	// real-2's mount is this process, which has not written run_end.
	if strings.Join(got, " ") != "real-1:ended:2:2:0 real-2:running:1:0:1 real-3:admitted:0:0:0" {
		t.Fatalf("list %v", got)
	}
}
