package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/integration/fusetest"
	"github.com/pinfs/pinfs/integration/s3test"
)

// quickstartBlock returns the shell block of README.md between the
// <!-- quickstart --> and <!-- /quickstart --> markers, without its fences.
func quickstartBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quickstart -->\n```sh\n(.*?)```\n<!-- /quickstart -->").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no <!-- quickstart --> ```sh … ``` <!-- /quickstart --> block")
	}
	return string(m[1])
}

// awsCLI returns the path and version of the aws-cli on PATH, or ok false
// where it does not run.
func awsCLI() (path, version string, ok bool) {
	path, err := exec.LookPath("aws")
	if err != nil {
		return "", "", false
	}
	out, err := exec.Command(path, "--version").Output()
	return path, strings.TrimSpace(string(out)), err == nil
}

// awsWrapper is the aws on the quick start's PATH: the real one, given
// the test server's endpoint as a flag. aws-cli before 2.13 (Debian 12's
// awscli is 2.9) ignores $AWS_ENDPOINT_URL and would go to AWS itself.
const awsWrapper = `#!/bin/sh
exec "$PINFS_TEST_AWS" --endpoint-url "$AWS_ENDPOINT_URL" "$@"
`

// TestQuickstart runs the README's S3 quick start as written, with bash
// -e, against a fresh versitygw and the real pinfs binary on PATH. Only
// the environment is the test's: the server's endpoint and credentials
// (AWS_* as aws-cli and pinfs read them), HOME (so ~/data and the default
// cache dir ~/.cache/pinfs are the test's own) and the current directory
// with ./my-dataset. The bucket my-bucket is new on a fresh server.
//
// The aws lines run as written with the aws-cli on PATH (.ci/run installs
// Debian's awscli), given the endpoint as a flag (awsWrapper). Under
// CI=true an aws-cli that does not run fails the test; elsewhere the test
// then creates the versioned bucket and uploads ./my-dataset itself (what
// the block's aws lines do) and runs every other line as written.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	fusetest.Require(t)
	block := quickstartBlock(t)
	s := s3test.Start(t)
	work, home := t.TempDir(), t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"train/a.bin": randomBytes(t, 200_000),
		"train/b.txt": []byte("bravo\n"),
		"val/c.txt":   []byte("charlie\n"),
	}
	for p, b := range files {
		writeFile(t, filepath.Join(work, "my-dataset", p), string(b))
	}
	data := filepath.Join(home, "data")
	t.Cleanup(func() {
		entries, _ := os.ReadDir(data) // names only: never a stat of a mount
		for _, e := range entries {
			fusetest.ForceUnmount(t, filepath.Join(data, e.Name()))
		}
	})
	bin := t.TempDir()
	if err := os.Symlink(pinfsBin, filepath.Join(bin, "pinfs")); err != nil {
		t.Fatal(err)
	}

	script := block
	awsPath, awsVersion, ok := awsCLI()
	switch {
	case ok:
		t.Logf("the aws lines run with %s (%s)", awsPath, awsVersion)
		if err := os.WriteFile(filepath.Join(bin, "aws"), []byte(awsWrapper), 0o755); err != nil {
			t.Fatal(err)
		}
	case os.Getenv("CI") == "true":
		t.Fatal("CI=true but aws-cli does not run here: the quick start's aws lines cannot run as written (.ci/run installs Debian's awscli)")
	default:
		t.Log("aws-cli does not run here: the test creates my-bucket and uploads ./my-dataset itself, and runs the rest of the block as written")
		// What the fallback does instead, line by line: a line the block
		// gains or changes that starts with aws fails here, so the two
		// cannot drift apart.
		standIns := []string{
			"aws s3api create-bucket --bucket my-bucket",
			"aws s3api put-bucket-versioning --bucket my-bucket --versioning-configuration Status=Enabled",
			"aws s3 cp --recursive ./my-dataset s3://my-bucket/datasets/v1/",
		}
		var kept, dropped []string
		for _, line := range strings.SplitAfter(block, "\n") {
			if strings.HasPrefix(line, "aws ") {
				dropped = append(dropped, strings.TrimSpace(line))
			} else {
				kept = append(kept, line)
			}
		}
		if !slices.Equal(dropped, standIns) {
			t.Fatalf("the quick start's aws lines are\n%s\nthe fallback stands in for\n%s", strings.Join(dropped, "\n"), strings.Join(standIns, "\n"))
		}
		script = strings.Join(kept, "")
		s.CreateBucket(t, "my-bucket", true)
		for p, b := range files {
			s.Put(t, "my-bucket", "datasets/v1/"+p, b)
		}
	}
	path := filepath.Join(work, "quickstart.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", path)
	cmd.Dir = work
	for _, kv := range os.Environ() {
		// No profile or session of this machine's: aws-cli takes an empty
		// AWS_PROFILE for a profile named "".
		if k, _, _ := strings.Cut(kv, "="); k != "AWS_PROFILE" && k != "AWS_DEFAULT_PROFILE" && k != "AWS_SESSION_TOKEN" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, s.Env()...),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+home, "XDG_CACHE_HOME=", "PINFS_STORE=",
		"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull, "AWS_PAGER=",
		"PINFS_TEST_AWS="+awsPath)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("the README quick start failed:\n%s\n%v", script, r)
	}

	// It read every file through the mount: their digests are in the output.
	for p, b := range files {
		sum := sha256.Sum256(b)
		if !strings.Contains(r.stdout, hex.EncodeToString(sum[:])) {
			t.Errorf("output lacks the sha256 of %s:\n%s", p, r.stdout)
		}
	}
	// run show reports the run of the pinned digest, ended, with every
	// member opened, from the default run record.
	d := regexp.MustCompile(`run quickstart-1  (sha256:[0-9a-f]{64})  ended`).FindStringSubmatch(r.stdout)
	if d == nil {
		t.Fatalf("no `run quickstart-1 DIGEST ended` line from pinfs run show:\n%s", r.stdout)
	}
	if want := fmt.Sprintf("consumed  %d members opened, %d read in full", len(files), len(files)); !strings.Contains(r.stdout, want) {
		t.Errorf("run show lacks %q:\n%s", want, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "pinfs", "runs.jsonl")); err != nil {
		t.Errorf("the default run record: %v", err)
	}
	if fusetest.Mounted(filepath.Join(data, d[1])) {
		t.Errorf("%s is still mounted after the quick start", filepath.Join(data, d[1]))
	}
	// pinfs list finds the digest again.
	list := mustPinfs(t, s.Env(), "list", "--store", "s3://my-bucket/pinfs")
	if !regexp.MustCompile(`(?m)^\S+ +` + d[1] + ` +BUILDING +3 `).MatchString(list.stdout) {
		t.Errorf("pinfs list does not list %s:\n%s", d[1], list.stdout)
	}
}
