package store

import (
	"errors"
	"fmt"
	"testing"
)

type detailed struct{ msg, detail string }

func (e detailed) Error() string  { return e.msg }
func (e detailed) Detail() string { return e.detail }

func TestDetail(t *testing.T) {
	inner := detailed{"bucket b does not exist", "operation error S3: GetObject, RequestID: r"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("plain"), "plain"},
		{inner, "bucket b does not exist: operation error S3: GetObject, RequestID: r"},
		{fmt.Errorf("manifest m: %w", inner), "manifest m: bucket b does not exist: operation error S3: GetObject, RequestID: r"},
		{detailed{"no detail", ""}, "no detail"},
		{errors.Join(errors.New("first"), inner), "first\nbucket b does not exist: operation error S3: GetObject, RequestID: r"},
	} {
		if got := Detail(tc.err); got != tc.want {
			t.Errorf("Detail(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
