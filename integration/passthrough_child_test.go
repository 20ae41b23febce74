package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The passthrough tests open members from child processes (sh, cat, dd),
// not from the test binary. A signal to the opening thread while the
// daemon verifies a member file makes the kernel send INTERRUPT, and the
// daemon then serves that open through the Reader, as it must; the test
// binary gets such signals all the time (SIGCHLD of the pinfs commands
// parallel tests run, the Go runtime's preemption), a child that only
// reads does not.

// catMember returns what cat reads of the file at p, or an error with
// cat's stderr.
func catMember(t testing.TB, p string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errb strings.Builder
	cmd := exec.CommandContext(ctx, "cat", p)
	cmd.Stderr = &errb
	b, err := cmd.Output()
	if err != nil {
		return b, fmt.Errorf("cat %s: %w: %s", p, err, strings.TrimSpace(errb.String()))
	}
	return b, nil
}

// childOpen is a child process that holds a file open on its fd 3 and
// reads it in steps, when told, through that one open.
type childOpen struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	steps []int
}

// openInChild opens p in a child process and returns once it is open.
// Each call of next reads the following steps[i] bytes; rest reads to the
// end and closes. The child is killed when the test ends.
func openInChild(t testing.TB, p string, steps ...int) *childOpen {
	t.Helper()
	script := `exec 3<"$1" || exit 1; echo open; shift
for n in "$@"; do read x; dd bs="$n" count=1 iflag=fullblock status=none <&3 || exit 1; done
read x; exec cat <&3`
	args := []string{"-c", script, "sh", p}
	for _, n := range steps {
		args = append(args, strconv.Itoa(n))
	}
	cmd := exec.Command("sh", args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := &childOpen{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), steps: steps}
	if line, err := inMount(t, 30*time.Second, func() (string, error) { return c.out.ReadString('\n') }); line != "open\n" {
		t.Fatalf("the child could not open %s: %q %v", p, line, err)
	}
	return c
}

// next has the child read its next step and returns those bytes.
func (c *childOpen) next(t testing.TB) ([]byte, error) {
	t.Helper()
	if len(c.steps) == 0 {
		t.Fatal("childOpen.next: no steps left")
	}
	b := make([]byte, c.steps[0])
	c.steps = c.steps[1:]
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		return nil, err
	}
	return inMount(t, 60*time.Second, func() ([]byte, error) {
		n, err := io.ReadFull(c.out, b)
		return b[:n], err
	})
}

// rest has the child read the file to its end, close it and exit, and
// returns those bytes.
func (c *childOpen) rest(t testing.TB) ([]byte, error) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		return nil, err
	}
	c.stdin.Close()
	b, err := inMount(t, 60*time.Second, func() ([]byte, error) { return io.ReadAll(c.out) })
	if err != nil {
		return b, err
	}
	return b, c.cmd.Wait()
}
