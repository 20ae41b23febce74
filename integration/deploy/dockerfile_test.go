package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/integration/repo"
)

// envAssign matches a NAME=value word before a command.
var envAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is one FROM of a Dockerfile and the instructions under it.
type stage struct {
	image, name string
	ins         []instruction
}

// parseDockerfile splits a Dockerfile into stages. It knows the Dockerfile
// syntax pinfs uses: comments, "\" continuations, one instruction a line.
func parseDockerfile(text string) ([]stage, error) {
	var stages []stage
	var cur strings.Builder
	flush := func() error {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			return nil
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				return nil
			}
			return fmt.Errorf("%s before the first FROM", in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		return nil
	}
	for line := range strings.Lines(text) {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") || t == "" && cur.Len() == 0 {
			continue
		}
		if body, ok := strings.CutSuffix(t, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(t)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return stages, nil
}

// shellWords splits a POSIX shell command into words: quotes and
// backslashes are honoured, nothing is expanded. "&&", ";" and "|" are
// words of their own when spaced.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for i := 0; i < len(s); i++ {
		c := rune(s[i])
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				w.WriteRune(c)
			}
		case quote == '"':
			if c == '"' {
				quote = 0
			} else if c == '\\' && i+1 < len(s) && strings.ContainsRune(`"\$`, rune(s[i+1])) {
				i++
				w.WriteByte(s[i])
			} else {
				w.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// goBuild is the go build command of a Dockerfile's build stage.
type goBuild struct {
	env  []string // NAME=value set for it
	args []string // after "go build"
	out  string   // its -o
}

// findGoBuild returns the go build command of stage s (the first RUN
// segment, between && and ;, that runs go build).
func findGoBuild(s stage) (goBuild, error) {
	for _, in := range s.ins {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		words, err := shellWords(in.args)
		if err != nil {
			return goBuild{}, err
		}
		for seg := range splitSegments(words) {
			var b goBuild
			i := 0
			for ; i < len(seg) && envAssign.MatchString(seg[i]); i++ {
				b.env = append(b.env, seg[i])
			}
			if len(seg) < i+2 || seg[i] != "go" || seg[i+1] != "build" {
				continue
			}
			b.args = seg[i+2:]
			for j, a := range b.args {
				if a == "-o" && j+1 < len(b.args) {
					b.out = b.args[j+1]
				} else if v, ok := strings.CutPrefix(a, "-o="); ok {
					b.out = v
				}
			}
			return b, nil
		}
	}
	return goBuild{}, errors.New("no RUN … go build in the build stage")
}

// splitSegments yields the commands of a word list split at &&, ; and ||.
func splitSegments(words []string) func(func([]string) bool) {
	return func(yield func([]string) bool) {
		start := 0
		for i := 0; i <= len(words); i++ {
			if i == len(words) || slices.Contains([]string{"&&", ";", "||"}, words[i]) {
				if i > start && !yield(words[start:i]) {
					return
				}
				start = i + 1
			}
		}
	}
}

// goModVersion returns the major and minor Go version of a go.mod's go
// directive.
func goModVersion(gomod string) (int, int, error) {
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(gomod)
	if m == nil {
		return 0, 0, errors.New("go.mod has no go directive")
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major, minor, nil
}

// checkDockerfile checks a Dockerfile against what the image promises; go
// is go.mod's major and minor version. It returns the build command.
func checkDockerfile(text string, goMajor, goMinor int) (goBuild, []error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	stages, err := parseDockerfile(text)
	if err != nil {
		return goBuild{}, []error{err}
	}
	if len(stages) < 2 {
		return goBuild{}, []error{fmt.Errorf("%d stages: want a build stage and a runtime stage", len(stages))}
	}
	build, run := stages[0], stages[len(stages)-1]
	m := regexp.MustCompile(`^golang:(\d+)\.(\d+)(\.\d+)?(-[a-z0-9]+)?$`).FindStringSubmatch(build.image)
	if m == nil {
		bad("build stage FROM %s: want golang:<major>.<minor>, a pinned Go release", build.image)
	} else if major, _ := strconv.Atoi(m[1]); major < goMajor || major == goMajor && atoi(m[2]) < goMinor {
		bad("build stage FROM %s: older than go %d.%d in go.mod", build.image, goMajor, goMinor)
	}
	b, err := findGoBuild(build)
	if err != nil {
		return b, append(errs, err)
	}
	if !slices.Contains(b.env, "CGO_ENABLED=0") {
		bad("go build without CGO_ENABLED=0: the binary would need the build image's libc")
	}
	if !slices.Contains(b.args, "-trimpath") {
		bad("go build without -trimpath")
	}
	if !slices.ContainsFunc(b.args, func(a string) bool {
		return strings.HasPrefix(a, "-ldflags=") && strings.Contains(a, "-s") && strings.Contains(a, "-w")
	}) {
		bad(`go build without -ldflags="-s -w"`)
	}
	if b.out == "" {
		bad("go build without -o")
	}
	var user, entry string
	copied, fuse, certs := false, false, false
	for _, in := range run.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entry = in.args
		case "COPY":
			f := strings.Fields(in.args)
			copied = copied || len(f) == 3 && f[0] == "--from="+build.name && f[1] == b.out && f[2] == "/usr/local/bin/pinfs"
		case "RUN":
			if w, err := shellWords(in.args); err == nil && strings.Contains(in.args, "apt-get install") {
				fuse = fuse || slices.Contains(w, "fuse3")
				certs = certs || slices.Contains(w, "ca-certificates")
			}
		}
	}
	if !copied {
		bad("the runtime stage does not COPY --from=%s %s /usr/local/bin/pinfs (the binary go build writes)", build.name, b.out)
	}
	if !fuse || !certs {
		bad("the runtime stage does not apt-get install fuse3 and ca-certificates (fusermount3, TLS to S3)")
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		bad("USER %q: want a non-root user by default (the sidecar overrides it)", user)
	}
	if entry != `["pinfs"]` && entry != `["/usr/local/bin/pinfs"]` {
		bad(`ENTRYPOINT %s: want ["pinfs"] (exec form, so pinfs gets SIGTERM)`, entry)
	}
	return b, errs
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// readRepoFile returns the repository file name.
func readRepoFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo.MustRoot(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goVersion returns go.mod's major and minor Go version.
func goVersion(t testing.TB) (int, int) {
	t.Helper()
	major, minor, err := goModVersion(readRepoFile(t, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	return major, minor
}

func TestDockerfile(t *testing.T) {
	major, minor := goVersion(t)
	b, errs := checkDockerfile(readRepoFile(t, "Dockerfile"), major, minor)
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("go build: %s go build %s", strings.Join(b.env, " "), strings.Join(b.args, " "))
}

func TestRefusesBrokenDockerfiles(t *testing.T) {
	good := readRepoFile(t, "Dockerfile")
	major, minor := goVersion(t)
	if _, errs := checkDockerfile(good, major, minor); len(errs) > 0 {
		t.Fatalf("the Dockerfile is refused: %v", errors.Join(errs...))
	}
	// edit replaces old with new in the first instruction line (not a
	// comment) that holds it.
	edit := func(old, new string) string {
		t.Helper()
		lines := strings.SplitAfter(good, "\n")
		for i, l := range lines {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, old) {
				lines[i] = strings.Replace(l, old, new, 1)
				return strings.Join(lines, "")
			}
		}
		t.Fatalf("%q is in no instruction of the Dockerfile", old)
		return ""
	}
	cases := []struct{ name, text, want string }{
		{"latest", edit("FROM golang:1.26 AS build", "FROM golang:latest AS build"), "a pinned Go release"},
		{"older Go", edit("FROM golang:1.26 AS build", "FROM golang:1.25 AS build"), "older than go"},
		{"cgo", edit("CGO_ENABLED=0 go build", "CGO_ENABLED=1 go build"), "without CGO_ENABLED=0"},
		{"no trimpath", edit(" -trimpath", ""), "without -trimpath"},
		{"no -s -w", edit(`-ldflags="-s -w -X`, `-ldflags="-X`), `without -ldflags="-s -w"`},
		{"no go build", edit("go build", "go install"), "no RUN … go build"},
		{"copied from elsewhere", edit("COPY --from=build /out/pinfs", "COPY --from=build /go/bin/pinfs"), "does not COPY --from=build /out/pinfs"},
		{"no fuse3", edit(" fuse3 ", " "), "fuse3 and ca-certificates"},
		{"root", edit("USER 65532:65532", "USER root"), `USER "root"`},
		{"no user", edit("USER 65532:65532\n", ""), `USER ""`},
		{"shell entrypoint", edit(`ENTRYPOINT ["pinfs"]`, "ENTRYPOINT pinfs"), "ENTRYPOINT pinfs: want"},
		{"one stage", good[:strings.Index(good, "FROM debian")], "want a build stage and a runtime stage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := checkDockerfile(c.text, major, minor)
			err := errors.Join(errs...)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("refused for another reason: %v; want %q", err, c.want)
			}
		})
	}
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`A=1 go build -ldflags="-s -w" 'x y' a\ b "q\"q" && echo`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "go", "build", "-ldflags=-s -w", "x y", "a b", `q"q`, "&&", "echo"}
	if !slices.Equal(got, want) {
		t.Errorf("shellWords = %q; want %q", got, want)
	}
	if _, err := shellWords(`go build "-o`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
}
