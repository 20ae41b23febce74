package integration

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/integration/s3test"
	"github.com/pinfs/pinfs/verify"
	"github.com/pinfs/pinfs/verify/b3"
)

// statsRE matches the summary line pinfs pin prints on stderr.
var statsRE = regexp.MustCompile(`(?m)^pinfs pin: (\d+) members: (\d+) reused, (\d+) read; read (\d+) bytes of members, (\d+) bytes of index and outboards$`)

// pinCounts is the parsed summary line of a pin.
type pinCounts struct{ members, reused, read, readBytes, metaBytes int64 }

func (c pinCounts) String() string {
	return fmt.Sprintf("%d members, %d reused, %d read", c.members, c.reused, c.read)
}

// incrementalPin runs pinfs pin with args, requires exit 0 and no cache
// warning, and returns its digest and summary.
func incrementalPin(t *testing.T, env []string, args ...string) (string, pinCounts) {
	t.Helper()
	r := mustPinfs(t, env, append([]string{"pin"}, args...)...)
	m := statsRE.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("pinfs pin %v: no summary line on stderr: %v", args, r)
	}
	if strings.Contains(r.stderr, "warning") {
		t.Fatalf("pinfs pin %v: warned: %v", args, r)
	}
	var n [5]int64
	for i := range n {
		n[i], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	return r.lastLine(), pinCounts{n[0], n[1], n[2], n[3], n[4]}
}

// incrementalDataset puts 39 objects under data/ds/: 29 small ones and 10
// of several Bao groups, 13 of them under ds/sub/. It returns the bytes of
// each key (relative to the bucket).
func incrementalDataset(t *testing.T, s *s3test.Server) map[string][]byte {
	t.Helper()
	s.CreateBucket(t, "data", true)
	s.CreateBucket(t, "store", true)
	objs := map[string][]byte{}
	for i := range 39 {
		dir := "ds/all/"
		if i%3 == 0 {
			dir = "ds/sub/"
		}
		key := fmt.Sprintf("%sobj%02d", dir, i)
		if i%4 == 0 {
			objs[key] = randomBytes(t, 3*b3.GroupSize+1000*i)
		} else {
			objs[key] = []byte(fmt.Sprintf("small object %d\n", i))
		}
		s.Put(t, "data", key, objs[key])
	}
	return objs
}

func TestPinIncrementalReusesUnchangedVersions(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	objs := incrementalDataset(t, s)
	st := "s3://store/pinfs"

	start := time.Now()
	d1, c := incrementalPin(t, env, "s3://data/ds/", "--store", st)
	first := time.Since(start)
	if c.members != 39 || c.reused != 0 || c.read != 39 {
		t.Fatalf("first pin: %v, want 39 read", c)
	}
	start = time.Now()
	d, c := incrementalPin(t, env, "s3://data/ds/", "--store", st)
	again := time.Since(start)
	if d != d1 || c.reused != 39 || c.read != 0 || c.readBytes != 0 {
		t.Fatalf("re-pin of unchanged data: %s %v, want %s with everything reused", d, c, d1)
	}
	t.Logf("first pin of 39 objects %v, re-pin %v (%d bytes of index and outboards)", first, again, c.metaBytes)

	// Two new versions (one small, one of several groups) and a new key.
	changed := map[string][]byte{
		"ds/all/obj01": []byte("small object 1, second version\n"),
		"ds/all/obj04": randomBytes(t, 3*b3.GroupSize+4000),
		"ds/all/new":   []byte("a new member\n"),
	}
	newVersions := map[string]string{}
	for k, v := range changed {
		newVersions[k] = s.Put(t, "data", k, v)
		objs[k] = v
	}
	d2, c := incrementalPin(t, env, "s3://data/ds/", "--store", st, "--parent", d1)
	if c.members != 40 || c.reused != 37 || c.read != 3 {
		t.Fatalf("pin after 2 changes and 1 addition, with --parent: %v, want 37 reused and 3 read", c)
	}
	want := int64(0)
	for _, v := range changed {
		want += int64(len(v))
	}
	if c.readBytes != want {
		t.Errorf("read %d bytes of members, want %d (the changed ones)", c.readBytes, want)
	}
	d3, c := incrementalPin(t, env, "s3://data/ds/", "--store", st, "--parent", d1, "--rehash")
	if d3 != d2 || c.reused != 0 || c.read != 40 {
		t.Fatalf("--rehash: %s %v, want %s with everything read", d3, c, d2)
	}
	wantExit(t, env, 0, []string{"verify: OK", "members 40"}, "verify", d2, "--store", st, "--deep")
	for k, v := range newVersions {
		ls := mustPinfs(t, env, "ls", d2, strings.TrimPrefix(k, "ds/"), "--store", st, "--long").stdout
		if !strings.Contains(ls, v) {
			t.Errorf("ls of %s does not show its new version %s:\n%s", k, v, ls)
		}
	}

	// Without --parent the digest cache of the prefix alone does it.
	s.Put(t, "data", "ds/all/obj02", []byte("small object 2, second version\n"))
	_, c = incrementalPin(t, env, "s3://data/ds/", "--store", st)
	if c.reused != 39 || c.read != 1 {
		t.Fatalf("pin after one more change: %v, want 39 reused and 1 read", c)
	}

	// A sub-prefix has a cache of its own, empty: its members come from
	// the parent.
	dsub, c := incrementalPin(t, env, "s3://data/ds/sub/", "--store", st, "--parent", d2)
	if c.members != 13 || c.reused != 13 || c.read != 0 {
		t.Fatalf("sub-prefix with --parent: %v, want its 13 members reused", c)
	}
	if d, _ := incrementalPin(t, env, "s3://data/ds/sub/", "--store", st, "--parent", d2, "--rehash"); d != dsub {
		t.Fatalf("sub-prefix --rehash: %s, reused pin %s", d, dsub)
	}
	wantExit(t, env, 0, []string{"verify: OK", "members 13"}, "verify", dsub, "--store", st, "--deep")
}

func TestPinIncrementalRereadsAMemberWithoutAGoodOutboard(t *testing.T) {
	t.Parallel()
	s := s3test.Start(t)
	env := s.Env()
	objs := incrementalDataset(t, s)
	st := "s3://store/pinfs"
	d1, _ := incrementalPin(t, env, "s3://data/ds/", "--store", st)

	big := objs["ds/sub/obj12"]
	key := "pinfs/" + verify.OutboardKey(b3.Of(big).Hex())
	good := s.Get(t, "store", key, "")
	if len(good) != b3.OutboardSize(int64(len(big))) {
		t.Fatalf("outboard of obj12: %d bytes, want %d", len(good), b3.OutboardSize(int64(len(big))))
	}
	client := s.Client(t)
	ctx := context.Background()
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff

	for _, damage := range []struct {
		name string
		do   func() error
	}{
		{"deleted", func() error {
			_, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("store"), Key: aws.String(key)})
			return err
		}},
		{"corrupted", func() error {
			_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("store"), Key: aws.String(key), Body: bytes.NewReader(bad)})
			return err
		}},
	} {
		if err := damage.do(); err != nil {
			t.Fatalf("%s outboard: %v", damage.name, err)
		}
		wantExit(t, env, 1, []string{"verify: FAILED"}, "verify", d1, "--store", st, "--deep")
		d, c := incrementalPin(t, env, "s3://data/ds/", "--store", st)
		if d != d1 || c.reused != 38 || c.read != 1 || c.readBytes != int64(len(big)) {
			t.Fatalf("pin with a %s outboard: %s %v (%d bytes), want %s with only obj12 read", damage.name, d, c, c.readBytes, d1)
		}
		if got := s.Get(t, "store", key, ""); !bytes.Equal(got, good) {
			t.Fatalf("outboard after the pin over a %s one: %d bytes, not the outboard", damage.name, len(got))
		}
		wantExit(t, env, 0, []string{"verify: OK"}, "verify", d1, "--store", st, "--deep")
	}
}
