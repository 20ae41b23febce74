package s3store

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// TestClientNoResponseChecksums: the client neither asks for nor checks
// S3's response checksums (BLAKE3 verifies every byte of a member): a GET
// whose x-amz-checksum-crc32 is wrong, whole or ranged, still reads.
func TestClientNoResponseChecksums(t *testing.T) {
	f, c := newFake(t)
	if o := c.api.Options(); o.ResponseChecksumValidation != aws.ResponseChecksumValidationWhenRequired ||
		o.RequestChecksumCalculation != aws.RequestChecksumCalculationWhenRequired {
		t.Fatalf("checksums: response %v, request %v; want both WhenRequired",
			o.ResponseChecksumValidation, o.RequestChecksumCalculation)
	}
	f.createBucket("data", "Enabled")
	obj := mustVersion(t, "data", "k", f.put("data", "k", []byte("0123456789")))
	var modes atomic.Int64
	f.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("x-amz-checksum-mode") != "" {
			modes.Add(1)
		}
		w.Header().Set("x-amz-checksum-crc32", "AAAAAA==") // not the body's
		w.Header().Set("x-amz-checksum-type", "FULL_OBJECT")
		return false
	}
	for _, rng := range [][2]int64{{0, -1}, {2, 5}} {
		got, err := readRange(c, obj, rng[0], rng[1])
		if err != nil {
			t.Fatalf("read %v with a wrong CRC32 header: %v", rng, err)
		}
		if want := "0123456789"[rng[0]:]; rng[1] >= 0 && string(got) != want[:rng[1]] || rng[1] < 0 && string(got) != want {
			t.Fatalf("read %v: %q", rng, got)
		}
	}
	if n := modes.Load(); n > 0 {
		t.Fatalf("%d GETs asked for response checksums (x-amz-checksum-mode)", n)
	}
}

// TestClientConnsPerHost: nothing in the client caps the member GETs in
// flight to one endpoint below 32: 32 GETs are all at the server at once,
// and the transport keeps at least 32 connections to a host.
func TestClientConnsPerHost(t *testing.T) {
	const n = 32
	f, c := newFake(t)
	bc, ok := c.api.Options().HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		t.Fatalf("HTTP client %T, want the SDK's BuildableClient", c.api.Options().HTTPClient)
	}
	tr := bc.GetTransport()
	if tr.MaxConnsPerHost != 0 && tr.MaxConnsPerHost < n || tr.MaxIdleConnsPerHost < n || tr.MaxIdleConns < tr.MaxIdleConnsPerHost {
		t.Fatalf("transport: MaxConnsPerHost %d, MaxIdleConnsPerHost %d, MaxIdleConns %d; want >= %d each",
			tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost, tr.MaxIdleConns, n)
	}
	f.createBucket("data", "Enabled")
	obj := mustVersion(t, "data", "k", f.put("data", "k", []byte("0123456789")))
	var mu sync.Mutex
	var in, most int
	all := make(chan struct{})
	f.hook = func(http.ResponseWriter, *http.Request) bool {
		mu.Lock()
		in++
		most = max(most, in)
		if in == n {
			close(all)
		}
		mu.Unlock()
		select { // hold each GET until all n are here
		case <-all:
		case <-time.After(10 * time.Second):
		}
		mu.Lock()
		in--
		mu.Unlock()
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r, err := c.ReadRange(ctx, obj, 1, 4)
			if err != nil {
				t.Error(err)
				return
			}
			r.Close()
		})
	}
	wg.Wait()
	if most < n {
		t.Fatalf("at most %d of %d GETs reached the server at once", most, n)
	}
}
