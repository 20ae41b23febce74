package s3store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
)

// cannedGET answers every request with the same 206 of size bytes at
// version "v1", without a network: what is left is the SDK's and the
// store's own cost per GET.
type cannedGET struct{ body []byte }

func (c cannedGET) Do(r *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("x-amz-version-id", "v1")
	h.Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", len(c.body)-1, len(c.body)))
	h.Set("Content-Length", fmt.Sprint(len(c.body)))
	h.Set("Etag", `"e"`)
	return &http.Response{StatusCode: 206, Status: "206 Partial Content", Header: h, Request: r,
		ContentLength: int64(len(c.body)), Body: io.NopCloser(bytes.NewReader(c.body))}, nil
}

// BenchmarkGetOverhead is the CPU and allocations of one ranged GET of a
// 256 KiB member with the network taken out: through ReadRange (NewClient's
// configuration) and through the SDK with make bench's raw options.
func BenchmarkGetOverhead(b *testing.B) {
	const size = 256 << 10
	_, c := newFake(b)
	canned := cannedGET{body: make([]byte, size)}
	c = &Client{api: s3.New(c.api.Options(), func(o *s3.Options) { o.HTTPClient = canned })}
	obj, err := store.NewVersion("bucket", "key", "v1")
	if err != nil {
		b.Fatal(err)
	}
	raw := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://localhost:1"), UsePathStyle: true,
		Credentials: c.api.Options().Credentials, HTTPClient: canned,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired})
	buf := make([]byte, 64<<10)
	viaStore := func() {
		r, err := c.ReadRange(context.Background(), obj, 0, size)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := drain(r, buf); err != nil || n != size {
			b.Fatalf("%d bytes, %v", n, err)
		}
		r.Close()
	}
	viaRaw := func() {
		out, err := raw.GetObject(context.Background(), &s3.GetObjectInput{
			Bucket: aws.String("bucket"), Key: aws.String("key"), VersionId: aws.String("v1"),
			Range: aws.String(fmt.Sprintf("bytes=0-%d", size-1))})
		if err != nil {
			b.Fatal(err)
		}
		if n, err := drain(out.Body, buf); err != nil || n != size {
			b.Fatalf("%d bytes, %v", n, err)
		}
		out.Body.Close()
	}
	// Alternately, so that both see the same load; CPU time, not wall
	// time, since the machine is shared.
	b.ReportAllocs()
	var cpu [2]time.Duration
	for b.Loop() {
		for k, f := range []func(){viaRaw, viaStore} {
			c0 := cpuTime()
			for range 10 {
				f()
			}
			cpu[k] += cpuTime() - c0
		}
	}
	n := float64(b.N) * 10
	b.ReportMetric(float64(cpu[0].Nanoseconds())/n/1e3, "raw-cpu-µs/get")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/n/1e3, "store-cpu-µs/get")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "store/raw-cpu")
}

// BenchmarkGetFreshGoroutine is ReadRange of a 256 KiB member from a new
// goroutine each time, as store/blocks fetches: with the Client's workers
// (the SDK call runs on a goroutine whose stack has grown already) and
// without (the caller's new goroutine grows its stack on every GET).
func BenchmarkGetFreshGoroutine(b *testing.B) {
	const size = 256 << 10
	_, c := newFake(b)
	canned := cannedGET{body: make([]byte, size)}
	obj, err := store.NewVersion("bucket", "key", "v1")
	if err != nil {
		b.Fatal(err)
	}
	api := s3.New(c.api.Options(), func(o *s3.Options) { o.HTTPClient = canned })
	for _, tc := range []struct {
		name string
		c    *Client
	}{{"workers", &Client{api: api, workers: newWorkers()}}, {"no-workers", &Client{api: api}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				done := make(chan error, 1)
				go func() {
					buf := make([]byte, 64<<10)
					r, err := tc.c.ReadRange(context.Background(), obj, 0, size)
					if err == nil {
						_, err = drain(r, buf)
						r.Close()
					}
					done <- err
				}()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/get")
		})
	}
}
