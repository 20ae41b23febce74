package kubernetes

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The flags of pinfs mount, warm and status (cmd/pinfs; --log-format and
// --debug are every command's). integration/deploy runs every pinfs command
// line under deploy/ through the real CLI, so a flag renamed there fails
// too.
var (
	mountValueFlags = []string{"store", "fallback-store", "cache-dir", "cache-mem", "cache-disk", "run-record", "run-id",
		"policy", "uid", "gid", "metrics-addr", "read-timeout", "stall-timeout", "flush-interval", "log-format"}
	mountBoolFlags   = []string{"require-permit", "foreground", "allow-other", "debug"}
	warmValueFlags   = []string{"store", "fallback-store", "cache-dir", "split", "jobs", "cache-disk", "log-format"}
	warmBoolFlags    = []string{"quiet", "json", "debug"}
	statusValueFlags = []string{"store", "policy", "timeout", "wait", "log-format"}
	statusBoolFlags  = []string{"json", "debug"}
)

// statusTimeout is pinfs status's default --timeout.
const statusTimeout = 5 * time.Second

// pinfsCmd is one pinfs command line in a pod: a container's, or its
// startup probe's.
type pinfsCmd struct {
	pc    podContainer
	sub   string              // mount, warm, status, ...
	flags map[string][]string // flag values
	pos   []string            // positional arguments
}

// flag returns the last value of flag name, and whether it was given.
func (p pinfsCmd) flag(name string) (string, bool) {
	v := p.flags[name]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// on reports whether boolean flag name was given and not as =false.
func (p pinfsCmd) on(name string) bool {
	v, ok := p.flag(name)
	return ok && v != "false"
}

// parseCmd parses the arguments after "pinfs" of a mount, warm or status
// command line; other subcommands are returned unparsed.
func parseCmd(pc podContainer, args []string) (pinfsCmd, error) {
	p := pinfsCmd{pc: pc}
	if len(args) == 0 {
		return p, nil
	}
	p.sub = args[0]
	var err error
	switch p.sub {
	case "mount":
		p.flags, p.pos, err = parseFlags("mount", args[1:], mountValueFlags, mountBoolFlags)
	case "warm":
		p.flags, p.pos, err = parseFlags("warm", args[1:], warmValueFlags, warmBoolFlags)
	case "status":
		p.flags, p.pos, err = parseFlags("status", args[1:], statusValueFlags, statusBoolFlags)
	}
	return p, err
}

// shellPinfs reports whether container c runs pinfs mount, warm or status
// through something else (a shell), where its flags cannot be checked.
func shellPinfs(argv []string) bool {
	s := strings.Join(argv, " ")
	return strings.Contains(s, "pinfs mount") || strings.Contains(s, "pinfs warm")
}

// checkPod checks the pinfs containers of a pod: a pinfs mount is a native
// sidecar whose mount the other containers see, gated by a startup probe,
// fed by a warm step, alone with the credentials. It returns the number of
// mounts and warm steps it found.
func checkPod(where string, spec *corev1.PodSpec) (mounts, warms int, errs []error) {
	cs := containersOf(where, spec)
	errs = checkPodBasics(cs)
	var cmds []pinfsCmd
	var runsPinfs []bool
	for _, pc := range cs {
		args, ok := pinArgs(*pc.c)
		runsPinfs = append(runsPinfs, ok)
		if !ok {
			if shellPinfs(append(slices.Clone(pc.c.Command), pc.c.Args...)) {
				errs = append(errs, fmt.Errorf("%s: run pinfs directly (command: [pinfs]), not through a shell, so that its flags can be checked", pc.where))
			}
			continue
		}
		p, err := parseCmd(pc, args)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pc.where, err))
			continue
		}
		cmds = append(cmds, p)
	}
	var mountDigests []string
	for _, m := range cmds {
		if m.sub == "mount" {
			mounts++
			errs = append(errs, checkMount(spec, cs, m)...)
			if len(m.pos) > 0 {
				mountDigests = append(mountDigests, m.pos[0])
			}
		}
	}
	for _, w := range cmds {
		if w.sub == "warm" {
			warms++
			errs = append(errs, checkWarm(spec, w, cmds)...)
		}
	}
	if mounts == 0 && !slices.Contains(runsPinfs, true) {
		return mounts, warms, errs
	}
	for i, pc := range cs {
		if !runsPinfs[i] {
			if cred := credentials(spec, pc.c); len(cred) > 0 {
				errs = append(errs, fmt.Errorf("%s: %s: only the containers that run pinfs get the store's credentials", pc.where, strings.Join(cred, ", ")))
			}
		}
		if mounts == 0 {
			continue
		}
		for _, d := range namedDigests(pc.c) {
			if !slices.Contains(mountDigests, d) {
				errs = append(errs, fmt.Errorf("%s: names %s, but the pod mounts %s: one snapshot, one digest", pc.where, d, strings.Join(mountDigests, ", ")))
			}
		}
	}
	if g := spec.TerminationGracePeriodSeconds; mounts > 0 && (g == nil || *g < minGracePeriod) {
		have := "unset (30)"
		if g != nil {
			have = fmt.Sprint(*g)
		}
		errs = append(errs, fmt.Errorf("%s: terminationGracePeriodSeconds %s: want at least %d, for the sidecar to unmount and write run_end after SIGTERM", where, have, minGracePeriod))
	}
	return mounts, warms, errs
}

// checkMount checks one pinfs mount command line m of a pod.
func checkMount(spec *corev1.PodSpec, cs []podContainer, m pinfsCmd) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(m.pc.where+": "+format, a...)) }
	c := m.pc.c
	switch {
	case !m.pc.init:
		bad("pinfs mount in containers: run it as a native sidecar (an init container with restartPolicy: Always), so the trainer starts after it serves and a Job can complete")
	case !m.pc.sidecar:
		bad("pinfs mount in an init container without restartPolicy: Always: it never exits, so the pod never starts")
	}
	if !m.on("foreground") {
		bad("pinfs mount without --foreground returns once mounted, and the container exits with it")
	}
	if len(m.pos) != 2 {
		bad("pinfs mount %q: want DIGEST MOUNTPOINT", m.pos)
		return errs
	}
	digest, mp := m.pos[0], path.Clean(m.pos[1])
	if !planDigest.MatchString(digest) {
		bad("mounts %q: want a full sha256:<64 lowercase hex> digest", digest)
	}
	if !path.IsAbs(mp) {
		bad("mountpoint %q is not an absolute path", m.pos[1])
		return errs
	}
	errs = append(errs, checkProbe(m, mp)...)
	vm, rel := volumeAt(c, mp)
	if vm == nil {
		bad("no volume mounted at or above the mountpoint %s: the mount would stay inside this container", mp)
		return errs
	}
	if vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional {
		bad("volume %s (at %s) needs mountPropagation: Bidirectional, or the mount stays inside this container", vm.Name, vm.MountPath)
	}
	if rel != path.Join("/", vm.SubPath) && !mkdirBefore(cs, m.pc.order, vm.Name, rel) {
		bad("the mountpoint %s does not exist in the fresh volume %s: create it in an init container before this one (command: [mkdir, -p, %s])", mp, vm.Name, mp)
	}
	readers := 0
	for _, o := range cs {
		om := volumeMount(o.c, vm.Name)
		if o.c == c || om == nil || o.order < m.pc.order {
			continue
		}
		readers++
		if om.MountPropagation == nil || *om.MountPropagation != corev1.MountPropagationHostToContainer {
			errs = append(errs, fmt.Errorf("%s: volume %s needs mountPropagation: HostToContainer to see the pinfs mount made in %s", o.where, vm.Name, c.Name))
		}
	}
	if readers == 0 {
		bad("no container that starts after it mounts volume %s: nothing can read the mount", vm.Name)
	} else if !m.on("allow-other") {
		bad("no --allow-other: FUSE refuses every user but the sidecar's, so the trainer cannot read the mount")
	}
	if cd, ok := m.flag("cache-dir"); !ok || !path.IsAbs(cd) {
		bad("no --cache-dir on a volume: the default is in the container's own filesystem, lost when it restarts")
	} else if v, _ := volumeAt(c, cd); v == nil {
		bad("--cache-dir %s is on no volume: the cache is lost when the sidecar restarts and no warm step can fill it", cd)
	} else if err := checkCacheDir(spec, m, cd); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkCacheDir refuses a --cache-dir dir of p that is the root of an
// emptyDir: the kubelet creates it writable by all (0777), and pinfs
// refuses a cache dir that other users may write to.
func checkCacheDir(spec *corev1.PodSpec, p pinfsCmd, dir string) error {
	v, rel := volumeAt(p.pc.c, dir)
	if v == nil || rel != path.Join("/", v.SubPath) {
		return nil
	}
	for _, vol := range spec.Volumes {
		if vol.Name == v.Name && vol.EmptyDir != nil {
			return fmt.Errorf("%s: --cache-dir %s is the root of emptyDir %s, which is writable by all (0777), so pinfs refuses it: use a directory in it (%s)", p.pc.where, dir, v.Name, path.Join(dir, "pinfs"))
		}
	}
	return nil
}

// runAs returns the user container c runs as: its runAsUser, else the
// pod's, else "the image's user".
func runAs(spec *corev1.PodSpec, c *corev1.Container) string {
	if s := c.SecurityContext; s != nil && s.RunAsUser != nil {
		return fmt.Sprintf("uid %d", *s.RunAsUser)
	}
	if s := spec.SecurityContext; s != nil && s.RunAsUser != nil {
		return fmt.Sprintf("uid %d", *s.RunAsUser)
	}
	return "the image's user"
}

// checkProbe checks that mount m's container has a startup probe running
// pinfs status on mountpoint mp, with time to answer.
func checkProbe(m pinfsCmd, mp string) []error {
	where := m.pc.where
	p := m.pc.c.StartupProbe
	if p == nil || p.Exec == nil || len(p.Exec.Command) == 0 || path.Base(p.Exec.Command[0]) != "pinfs" {
		return []error{fmt.Errorf("%s: no startupProbe running pinfs status %s (exec, directly): the trainer could start before the mount serves", where, mp)}
	}
	s, err := parseCmd(m.pc, p.Exec.Command[1:])
	if err != nil {
		return []error{fmt.Errorf("%s: startupProbe: %w", where, err)}
	}
	if s.sub != "status" || len(s.pos) != 1 {
		return []error{fmt.Errorf("%s: startupProbe runs %q: want pinfs status %s", where, p.Exec.Command, mp)}
	}
	if path.Clean(s.pos[0]) != mp {
		return []error{fmt.Errorf("%s: startupProbe asks pinfs status %s, but the mount is at %s", where, s.pos[0], mp)}
	}
	timeout := statusTimeout
	if v, ok := s.flag("timeout"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return []error{fmt.Errorf("%s: startupProbe: --timeout %q: %v", where, v, err)}
		}
		timeout = d
	}
	if probe := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second; probe <= timeout {
		return []error{fmt.Errorf("%s: startupProbe timeoutSeconds %v is not longer than pinfs status --timeout %v: a slow answer is killed before pinfs says why", where, probe.Seconds(), timeout)}
	}
	return nil
}

// mkdirBefore reports whether an init container before position order
// creates the directory rel of volume vol (command mkdir -p DIR).
func mkdirBefore(cs []podContainer, order int, vol, rel string) bool {
	for _, o := range cs[:order] {
		argv := append(slices.Clone(o.c.Command), o.c.Args...)
		if !o.init || o.sidecar || len(argv) < 2 || path.Base(argv[0]) != "mkdir" {
			continue
		}
		for _, a := range argv[1:] {
			if v, r := volumeAt(o.c, a); path.IsAbs(a) && v != nil && v.Name == vol && r == rel {
				return true
			}
		}
	}
	return false
}

// checkWarm checks one pinfs warm command line w against the pod's mounts:
// a plain init container before the mount, of its digest, into its cache.
func checkWarm(spec *corev1.PodSpec, w pinfsCmd, cmds []pinfsCmd) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(w.pc.where+": "+format, a...)) }
	if !w.pc.init || w.pc.sidecar {
		bad("pinfs warm runs once, before the mount: a plain init container (no restartPolicy), not a sidecar or a regular container")
	}
	for _, m := range cmds {
		if m.sub != "mount" || len(m.pos) != 2 || len(w.pos) == 0 {
			continue
		}
		if w.pos[0] != m.pos[0] {
			bad("warms %s, but %s mounts %s", w.pos[0], m.pc.c.Name, m.pos[0])
			continue
		}
		if w.pc.order > m.pc.order {
			bad("runs after the sidecar %s: list it before, so the mount starts on a warm cache", m.pc.c.Name)
		}
		wd, _ := w.flag("cache-dir")
		md, _ := m.flag("cache-dir")
		wv, wr := volumeAt(w.pc.c, wd)
		mv, mr := volumeAt(m.pc.c, md)
		if wv == nil || mv == nil || wv.Name != mv.Name || wr != mr {
			bad("--cache-dir %q is not the cache dir %q of %s (the same directory of the same volume): the mount would not see what was warmed", wd, md, m.pc.c.Name)
		} else if err := checkCacheDir(spec, w, wd); err != nil {
			errs = append(errs, err)
		}
		if wu, mu := runAs(spec, w.pc.c), runAs(spec, m.pc.c); wu != mu {
			bad("runs as %s, but %s as %s: pinfs refuses a cache dir owned by another user", wu, m.pc.c.Name, mu)
		}
	}
	return errs
}
