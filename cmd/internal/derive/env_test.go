package derive

import (
	"slices"
	"strings"
	"testing"

	record "github.com/pinfs/pinfs/verify/derive"
)

// TestEnv: the inherited environment without any enclosing derivation's
// variables, then this one's inputs (both spellings), output, params,
// transform and key.
func TestEnv(t *testing.T) {
	r, err := record.New([]record.Input{{Name: "raw", Digest: dA}, {Name: "LABELS", Digest: dB}}, "harvest@v1.4.2",
		map[string]string{"min.agree-ment": "5"}, []string{"true"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"HOME=/root", "PINFS_INPUT_old=/x", "PINFS_PARAM_OLD=1", "PINFS_OUTPUT=/y", "PINFS_TRANSFORM=old@v0",
		"PINFS_DERIVATION_KEY=k", "PINFS_STORE=/st"}
	got := Env(base, nil, r, "/w/inputs", "/w/output")
	want := []string{"HOME=/root", "PINFS_STORE=/st",
		"PINFS_INPUT_LABELS=/w/inputs/LABELS",
		"PINFS_INPUT_raw=/w/inputs/raw", "PINFS_INPUT_RAW=/w/inputs/raw",
		"PINFS_OUTPUT=/w/output", "PINFS_PARAM_MIN_AGREE_MENT=5",
		"PINFS_TRANSFORM=harvest@v1.4.2", "PINFS_DERIVATION_KEY=" + string(r.Key)}
	if !slices.Equal(got, want) {
		t.Errorf("Env =\n%q\nwant\n%q", got, want)
	}
}

// credentials are a CI job's variables that hold or lead the AWS SDKs to
// credentials; others are variables that hold none.
var (
	credentials = []string{
		"AWS_ACCESS_KEY_ID=AKIA", "AWS_SECRET_ACCESS_KEY=secret", "AWS_SESSION_TOKEN=token",
		"AWS_PROFILE=prod", "AWS_DEFAULT_PROFILE=prod", "AWS_CONFIG_FILE=/c", "AWS_SHARED_CREDENTIALS_FILE=/s",
		"AWS_WEB_IDENTITY_TOKEN_FILE=/w", "AWS_ROLE_ARN=arn:aws:iam::1:role/ci", "AWS_ROLE_SESSION_NAME=ci",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/creds", "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://169.254.170.23/v1/creds",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN=tok", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=/t",
		"AWS_ENDPOINT_URL_S3=http://s3", "AWS_REGION=eu-west-1", "aws_secret_access_key=lower",
	}
	others = []string{"HOME=/home/ci", "PATH=/bin", "PINFS_STORE=s3://bucket/pinfs", "AWSOME=1", "MY_AWS_NOTE=1"}
)

// TestEnvDropsCredentials: every AWS_* variable is left out of a
// transform's environment, in any case, unless passed by name; PINFS_STORE
// and variables that merely contain AWS stay.
func TestEnvDropsCredentials(t *testing.T) {
	r, err := record.New([]record.Input{{Name: "raw", Digest: dA}}, "harvest@v1", nil, []string{"true"}, "dir")
	if err != nil {
		t.Fatal(err)
	}
	added := Env(nil, nil, r, "/w/inputs", "/w/output")
	for _, c := range []struct {
		pass, want []string
	}{
		{nil, others},
		{[]string{"AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_NOT_SET", "HOME"},
			[]string{"AWS_SECRET_ACCESS_KEY=secret", "AWS_PROFILE=prod", "HOME=/home/ci", "PATH=/bin",
				"PINFS_STORE=s3://bucket/pinfs", "AWSOME=1", "MY_AWS_NOTE=1"}},
		{[]string{"aws_secret_access_key"}, append([]string{"aws_secret_access_key=lower"}, others...)},
	} {
		got := Env(append(slices.Clone(credentials), others...), c.pass, r, "/w/inputs", "/w/output")
		if want := append(slices.Clone(c.want), added...); !slices.Equal(got, want) {
			t.Errorf("Env(pass %q) =\n%q\nwant\n%q", c.pass, got, want)
		}
	}
	for _, kv := range credentials {
		if name, _, _ := strings.Cut(kv, "="); !Credential(name) {
			t.Errorf("Credential(%s) = false", name)
		}
	}
	for _, name := range []string{"HOME", "PINFS_STORE", "AWSOME", "MY_AWS_NOTE", "AWS"} {
		if Credential(name) {
			t.Errorf("Credential(%s) = true", name)
		}
	}
}

// TestParsePassEnv: a variable name, or exit 2.
func TestParsePassEnv(t *testing.T) {
	if got, err := ParsePassEnv([]string{"AWS_SECRET_ACCESS_KEY", "_x1"}); err != nil || len(got) != 2 {
		t.Errorf("ParsePassEnv(good) = %q, %v", got, err)
	}
	for _, bad := range []string{"", "AWS_*", "A=B", "1X", "A B", "A\n"} {
		if _, err := ParsePassEnv([]string{bad}); err == nil {
			t.Errorf("ParsePassEnv(%q) accepted", bad)
		}
	}
}
