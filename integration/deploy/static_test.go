package deploy

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pinfs/pinfs/integration/repo"
)

// built is the pinfs binary built once per test run as the Dockerfile
// builds it, or why it could not be.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// buildArgs are the Dockerfile's build arguments as dockerBinary passes
// them, the way make image does (--build-arg).
var buildArgs = map[string]string{"PINFS_REVISION": imageRevision}

// imageRevision stands for the commit make image passes.
const imageRevision = "0123456789abcdef0123456789abcdef01234567"

// TestMain removes the binary that dockerBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// dockerBinary returns pinfs built with the Dockerfile's own go build
// command (its environment and flags, its output path replaced), from the
// repository root, which the Dockerfile copies to its WORKDIR.
func dockerBinary(t testing.TB) string {
	t.Helper()
	root := repo.MustRoot(t)
	major, minor := goVersion(t)
	b, errs := checkDockerfile(readRepoFile(t, "Dockerfile"), major, minor)
	built.once.Do(func() {
		if b.out == "" {
			built.err = fmt.Errorf("no go build -o in the Dockerfile: %v", errors.Join(errs...))
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "pinfs-deploy-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "pinfs")
		args := slices.Clone(b.args)
		for i, a := range args {
			// The build arguments (ARG) as make image passes them.
			args[i] = os.Expand(a, func(name string) string {
				if v, ok := buildArgs[name]; ok {
					return v
				}
				built.err = errors.Join(built.err, fmt.Errorf("go build in the Dockerfile uses $%s, which is no build argument this test knows", name))
				return ""
			})
			switch {
			case a == "-o" && i+1 < len(args):
				args[i+1] = built.bin
			case strings.HasPrefix(a, "-o="):
				args[i] = "-o=" + built.bin
			}
		}
		if built.err != nil {
			return
		}
		cmd := exec.CommandContext(context.Background(), "go", append([]string{"build"}, args...)...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("%s go build %s: %v\n%s", strings.Join(b.env, " "), strings.Join(args, " "), err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// checkStatic returns why the ELF file at name is not a static executable:
// it asks for a program interpreter (the dynamic loader) or names shared
// libraries.
func checkStatic(name string) error {
	f, err := elf.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp := make([]byte, p.Filesz)
			p.ReadAt(interp, 0)
			return fmt.Errorf("%s is dynamically linked: it asks for the interpreter %s", name, strings.TrimRight(string(interp), "\x00"))
		}
	}
	libs, err := f.DynString(elf.DT_NEEDED)
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return fmt.Errorf("%s: dynamic section: %w", name, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %q", name, libs)
	}
	return nil
}

func TestStaticBinary(t *testing.T) {
	bin := dockerBinary(t)
	if err := checkStatic(bin); err != nil {
		t.Fatalf("the image's binary: %v", err)
	}
	out, err := exec.Command(bin, "--help").Output()
	if err != nil || !strings.Contains(string(out), "Usage: pinfs COMMAND") {
		t.Errorf("pinfs --help: %v\n%s", err, out)
	}
}

// TestRefusesDynamicBinary checks that checkStatic tells a dynamic
// executable: /bin/sh is one on every Debian.
func TestRefusesDynamicBinary(t *testing.T) {
	err := checkStatic("/bin/sh")
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("checkStatic(/bin/sh) = %v; want it dynamically linked", err)
	}
}
