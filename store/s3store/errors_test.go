package s3store

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/pinfs/pinfs/store"
	"github.com/pinfs/pinfs/verify/b3"
)

// checkOneLine fails unless err's message is exactly want (one line,
// without the SDK's chain) and store.Detail(err) adds the SDK error.
func checkOneLine(t *testing.T, err error, want string, detail ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	if got := err.Error(); got != want {
		t.Errorf("error\n  %q\nwant\n  %q", got, want)
	}
	for _, bad := range []string{"\n", "operation error", "RequestID", "HostID", "s3store:"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("error %q contains %q", err, bad)
		}
	}
	full := store.Detail(err)
	if !strings.HasPrefix(full, err.Error()+": ") {
		t.Errorf("Detail %q does not begin with the message", full)
	}
	for _, d := range detail {
		if !strings.Contains(full, d) {
			t.Errorf("Detail %q lacks %q", full, d)
		}
	}
}

// answer makes the fake answer every request with status and S3 error code.
func answer(f *fakeS3, status int, code string) {
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		writeErr(w, r, status, code)
		return true
	})
}

func TestErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		name         string
		status       int
		code         string // "": no hook (the fake's own answer)
		bucket       string
		want         string
		is, isNot    []error
		detailHasAPI bool
	}{
		{"missing key", http.StatusNotFound, "NoSuchKey", "st",
			"get s3://st/p/m/k: not found", []error{store.ErrNotFound, fs.ErrNotExist}, nil, true},
		{"missing bucket", 0, "", "nob",
			"bucket nob does not exist", []error{store.ErrNotFound}, []error{fs.ErrNotExist}, true},
		{"unknown access key", http.StatusForbidden, "InvalidAccessKeyId", "st",
			"s3://st: the access key ID is not known to the server (check AWS_ACCESS_KEY_ID or the profile)",
			[]error{store.ErrAccessDenied}, []error{store.ErrNotFound}, true},
		{"unknown access key, versitygw", http.StatusNotFound, "XAdminUserNotFound", "st",
			"s3://st: the access key ID is not known to the server (check AWS_ACCESS_KEY_ID or the profile)",
			[]error{store.ErrAccessDenied}, []error{store.ErrNotFound, fs.ErrNotExist}, true},
		{"wrong secret", http.StatusForbidden, "SignatureDoesNotMatch", "st",
			"s3://st: the secret key is wrong (the signature does not match; check AWS_SECRET_ACCESS_KEY or the profile)",
			[]error{store.ErrAccessDenied}, nil, true},
		{"access denied", http.StatusForbidden, "AccessDenied", "st",
			"access denied to s3://st/p/m/k", []error{store.ErrAccessDenied}, nil, true},
		{"other error", http.StatusBadRequest, "InvalidArgument", "st",
			"get s3://st/p/m/k: InvalidArgument: fake InvalidArgument", nil, []error{store.ErrNotFound}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t)
			f.createBucket("st", "Enabled")
			if tc.code != "" {
				answer(f, tc.status, tc.code)
			}
			_, err := mustBucket(t, c, tc.bucket, "p").Get(ctx, "m/k")
			checkOneLine(t, err, tc.want, "operation error S3: GetObject", "RequestID: fake")
			for _, s := range tc.is {
				if !errors.Is(err, s) {
					t.Errorf("error %q does not wrap %q", err, s)
				}
			}
			for _, s := range tc.isNot {
				if errors.Is(err, s) {
					t.Errorf("error %q wraps %q", err, s)
				}
			}
			if _, ok := errors.AsType[smithy.APIError](err); !ok {
				t.Errorf("error %q does not wrap the SDK's API error", err)
			}
		})
	}
}

// A missing bucket under a pinned member keeps the member's location.
func TestMissingBucketOfMember(t *testing.T) {
	_, c := newFake(t)
	_, err := readRange(c, mustVersion(t, "nob", "k", "v1"), 0, -1)
	checkOneLine(t, err, "get s3://nob/k?versionId=v1: bucket nob does not exist", "NoSuchBucket")
}

func TestUnversionedMessages(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("plain", "")
	f.createBucket("susp", "Suspended")
	for bucket, status := range map[string]string{"plain": "off", "susp": "Suspended"} {
		_, err := c.ListCurrent(ctx, bucket, "")
		want := "bucket " + bucket + " does not have versioning enabled (status: " + status +
			"); enable it: pinfs pins exact object versions"
		if err == nil || err.Error() != want || !errors.Is(err, store.ErrUnversioned) {
			t.Errorf("ListCurrent(%s) = %v; want %q wrapping ErrUnversioned", bucket, err, want)
		}
	}
	// A store bucket without versioning cannot keep member bytes.
	data := []byte("member")
	_, err := mustBucket(t, c, "plain", "p").PutCAS(ctx, b3.Of(data).String(), bytes.NewReader(data), int64(len(data)))
	want := "bucket plain does not have versioning enabled (status: off); enable it: pinfs pins exact object versions"
	if err == nil || err.Error() != want || !errors.Is(err, store.ErrUnversioned) {
		t.Errorf("PutCAS into an unversioned bucket = %v; want %q", err, want)
	}
}

func TestUnreachableEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	isolateAWSEnv(t)
	c := (&fakeS3{}).client(t, endpoint)
	// A ranged read makes one attempt, so the test does not wait for retries.
	_, err = readRange(c, mustVersion(t, "b", "k", "v1"), 0, 1)
	checkOneLine(t, err, "cannot reach S3 at "+endpoint+": connection refused", "dial tcp")
	if !errors.Is(err, store.ErrUnreachable) || store.Classify(err) != store.KindUnreachable {
		t.Errorf("%v: does not wrap store.ErrUnreachable (kind %q)", err, store.Classify(err))
	}
}

func TestUnknownHost(t *testing.T) {
	sdk := &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &url.Error{
		Op: "Get", URL: "https://s3.nohost.invalid/b/k?x-id=GetObject",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "s3.nohost.invalid", IsNotFound: true}},
	}}
	err := mapErr("get", "s3://b/k", sdk)
	checkOneLine(t, err, "cannot reach S3 at https://s3.nohost.invalid: no such host", "operation error S3: GetObject")
	if store.Classify(err) != store.KindUnreachable {
		t.Errorf("%v: kind %q, want unreachable", err, store.Classify(err))
	}
}

// TestErrorKinds: what pinfs status reports as store_error.kind for each
// answer of the store.
func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   store.Kind
	}{
		{http.StatusForbidden, "SignatureDoesNotMatch", store.KindAccess},
		{http.StatusForbidden, "InvalidAccessKeyId", store.KindAccess},
		{http.StatusNotFound, "XAdminUserNotFound", store.KindAccess},
		{http.StatusForbidden, "AccessDenied", store.KindAccess},
		{http.StatusNotFound, "NoSuchKey", store.KindMissing},
		{http.StatusNotFound, "NoSuchVersion", store.KindMissing},
		{http.StatusServiceUnavailable, "SlowDown", store.KindOther},
		{http.StatusInternalServerError, "InternalError", store.KindOther},
		{http.StatusBadRequest, "InvalidArgument", store.KindOther},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f, c := newFake(t)
			f.createBucket("st", "Enabled")
			answer(f, tc.status, tc.code)
			// A ranged read makes one attempt: no retries of the 5xx.
			_, err := readRange(c, mustVersion(t, "st", "k", "v1"), 0, 1)
			if got := store.Classify(err); got != tc.want {
				t.Errorf("%d %s: %v: kind %q, want %q", tc.status, tc.code, err, got, tc.want)
			}
		})
	}
}

func TestNoCredentials(t *testing.T) {
	f, _ := newFake(t) // isolates the environment: no files, no IMDS
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	c, err := NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mustBucket(t, c, "st", "p").Get(ctx, "k")
	checkOneLine(t, err,
		"no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or give the pod a role",
		"get identity", "IMDS")
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent without credentials", n)
	}
}

// A profile whose credential source fails is not "no credentials".
func TestCredentialSourceFails(t *testing.T) {
	newFake(t) // isolates the environment
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("[profile broken]\ncredential_process = /bin/false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfg)
	t.Setenv("AWS_PROFILE", "broken")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	c, err := NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mustBucket(t, c, "st", "p").Get(ctx, "k")
	checkOneLine(t, err,
		"cannot load the AWS credentials of the configured profile or source (the cause is in the log, or run with --debug)",
		"get identity")
}

func TestCanceledRequest(t *testing.T) {
	f, c := newFake(t)
	f.createBucket("st", "Enabled")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := mustBucket(t, c, "st", "p").Get(cctx, "k")
	if !errors.Is(err, context.Canceled) || err.Error() != "get s3://st/p/k: context canceled" {
		t.Errorf("canceled Get = %v; want %q wrapping context.Canceled", err, "get s3://st/p/k: context canceled")
	}
}
