package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/integration/repo"

	"sigs.k8s.io/yaml"

	"github.com/pinfs/pinfs/verify"
)

// exampleDigest stands for the unit's instance, %i.
const exampleDigest = "sha256:5e1c8478403ae3e79cffc6beaff6556a5e1afdee0900c8ea4d0f8464a046291d"

// docSeparator matches the "---" lines between YAML documents.
var docSeparator = regexp.MustCompile(`(?m)^---.*$`)

// kubeVar matches a Kubernetes $(VAR) reference, which the kubelet expands.
var kubeVar = regexp.MustCompile(`\$\([A-Za-z_][A-Za-z0-9_]*\)`)

// commandLine is one pinfs command line shipped under deploy/.
type commandLine struct {
	where string
	args  []string // after "pinfs"
}

// parsesWithCLI runs pinfs ARGS --help: pflag parses the arguments left to
// right and stops at --help with exit 0, so exit 0 means that every flag
// before it exists and its value parses; an unknown flag or a bad value
// exits 2 first.
func parsesWithCLI(bin string, args []string) error {
	cmd := exec.Command(bin, append(slices.Clone(args), "--help")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return fmt.Errorf("pinfs %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if !strings.HasPrefix(stdout.String(), "Usage: pinfs "+args[0]) {
		return fmt.Errorf("pinfs %s --help printed no usage of pinfs %s:\n%s", strings.Join(args, " "), args[0], stdout.String())
	}
	return nil
}

// unitCommandLines returns the pinfs command lines of the systemd unit
// with the example digest for %i, checking that the mounted one is a digest.
func unitCommandLines(t *testing.T) []commandLine {
	cmds, errs := checkUnit(readRepoFile(t, unitFile))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var lines []commandLine
	for _, c := range cmds {
		args := slices.Clone(c.argv[1:])
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "%i", exampleDigest)
		}
		if c.key == "ExecStart" {
			if _, err := verify.ParseDigest(args[1]); err != nil {
				t.Errorf("%s %s: the instance in place of %%i is not a digest pinfs mount takes: %v", unitFile, c.key, err)
			}
		}
		lines = append(lines, commandLine{where: unitFile + " " + c.key, args: args})
	}
	return lines
}

// kubeCommandLines returns the pinfs command lines of the containers and
// exec probes of the manifests under deploy/kubernetes, with every $(VAR)
// replaced by a word. The manifests' strict decoding and their other checks
// are in integration/kubernetes; this reads them loosely.
func kubeCommandLines(t *testing.T) []commandLine {
	root := repo.MustRoot(t)
	var lines []commandLine
	err := filepath.WalkDir(filepath.Join(root, "deploy", "kubernetes"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || (filepath.Ext(p) != ".yaml" && filepath.Ext(p) != ".yml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for i, doc := range docSeparator.Split(string(b), -1) {
			var v any
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
				return fmt.Errorf("%s#%d: %w", rel, i, err)
			}
			walkCommands(v, fmt.Sprintf("%s#%d", rel, i), &lines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// walkCommands adds the pinfs command lines found in v: a container's
// command and args (with no command, an image named pinfs runs pinfs), and
// a probe's or hook's exec command.
func walkCommands(v any, where string, lines *[]commandLine) {
	switch o := v.(type) {
	case []any:
		for _, e := range o {
			walkCommands(e, where, lines)
		}
	case map[string]any:
		name, _ := o["name"].(string)
		img, isContainer := o["image"].(string)
		if isContainer {
			argv := append(strs(o["command"]), strs(o["args"])...)
			if len(strs(o["command"])) == 0 && strings.Contains(img, "pinfs") {
				argv = append([]string{"pinfs"}, argv...)
			}
			addLine(argv, fmt.Sprintf("%s container %s", where, name), lines)
		}
		if ex, ok := o["exec"].(map[string]any); ok {
			addLine(strs(ex["command"]), where+" exec", lines)
		}
		for _, e := range o {
			w := where
			if isContainer {
				w = fmt.Sprintf("%s container %s", where, name)
			}
			walkCommands(e, w, lines)
		}
	}
}

// addLine adds argv when it runs pinfs.
func addLine(argv []string, where string, lines *[]commandLine) {
	if len(argv) < 2 || path.Base(argv[0]) != "pinfs" {
		return
	}
	args := slices.Clone(argv[1:])
	for i := range args {
		args[i] = kubeVar.ReplaceAllString(args[i], "x")
	}
	*lines = append(*lines, commandLine{where: where, args: args})
}

// strs returns v as a list of strings (YAML numbers and booleans quoted by
// their text).
func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, e := range l {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// TestCommandLinesParse runs every pinfs command line under deploy/ through
// the flag parsing of the pinfs the image ships.
func TestCommandLinesParse(t *testing.T) {
	lines := append(unitCommandLines(t), kubeCommandLines(t)...)
	subs := map[string]int{}
	for _, l := range lines {
		subs[l.args[0]]++
	}
	if subs["mount"] < 2 || subs["status"] < 2 || subs["warm"] < 1 {
		t.Fatalf("found %v pinfs command lines by subcommand; want the unit's and the sidecar's mount and status, and a warm step", subs)
	}
	bin := dockerBinary(t)
	for _, l := range lines {
		if err := parsesWithCLI(bin, l.args); err != nil {
			t.Errorf("%s: %v", l.where, err)
		}
	}
	t.Logf("%d pinfs command lines parse: %v", len(lines), subs)
}

func TestRefusesUnknownFlags(t *testing.T) {
	bin := dockerBinary(t)
	for _, args := range [][]string{
		{"mount", exampleDigest, "/data/x", "--foregrond"},
		{"status", "/data/x", "--wait", "two minutes"},
		{"warm", exampleDigest, "--cache-disk", "lots"},
	} {
		if err := parsesWithCLI(bin, args); err == nil {
			t.Errorf("pinfs %q parsed", args)
		}
	}
}

// TestImageNamesItsRevision: the image's pinfs says which commit it was
// built from, although its build context has no .git: the run record of a
// sidecar mount names the build that served it (run_start's pinfs).
func TestImageNamesItsRevision(t *testing.T) {
	bin := dockerBinary(t)
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("pinfs version --json: %v", err)
	}
	var v struct {
		Version  string `json:"version"`
		Revision string `json:"revision"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("pinfs version --json: %v: %s", err, out)
	}
	if v.Revision != imageRevision || v.Version == "" {
		t.Errorf("the image's pinfs version --json says %s; want revision %s (the Dockerfile's PINFS_REVISION)", out, imageRevision)
	}
}
