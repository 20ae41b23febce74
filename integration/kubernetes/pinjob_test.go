package kubernetes

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// completionIndexAnnotation is where the Job controller puts a pod's index.
const completionIndexAnnotation = "batch.kubernetes.io/job-completion-index"

// pinValueFlags are the pinfs pin flags that take a value, and pinBoolFlags
// those that do not (cmd/pinfs/pin.go). manifestFlags are fixed by the plan:
// the CLI refuses them with --shard and --merge.
var (
	pinValueFlags = []string{"store", "parent", "purpose", "split", "transform", "record-schema",
		"selection-policy", "tombstone-watermark", "benchmark-fence", "jobs", "plan", "shards", "shard"}
	pinBoolFlags  = []string{"rehash", "merge"}
	manifestFlags = []string{"parent", "purpose", "split", "transform", "record-schema",
		"selection-policy", "tombstone-watermark", "benchmark-fence"}
)

var planDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// indexRef matches an argument that is exactly one $(VAR) reference.
var indexRef = regexp.MustCompile(`^\$\(([A-Za-z_][A-Za-z0-9_]*)\)$`)

// pinRun is one container of a Job that runs a phase of a sharded pin.
type pinRun struct {
	where string // "file#n container NAME"
	phase string // "shard" or "merge"
	plan  string // the --plan argument
}

// pinArgs returns the arguments after "pinfs" that container c runs, and
// false when it does not run pinfs directly. With no command, an image
// whose name holds "pinfs" is taken to have pinfs as its entrypoint.
func pinArgs(c corev1.Container) ([]string, bool) {
	argv := append(slices.Clone(c.Command), c.Args...)
	switch {
	case len(c.Command) > 0 && path.Base(c.Command[0]) == "pinfs":
		return argv[1:], true
	case len(c.Command) == 0 && strings.Contains(c.Image, "pinfs"):
		return argv, true
	}
	return nil, false
}

// parsePinFlags splits pinfs pin arguments into flag values and positional
// arguments, refusing flags pinfs pin does not have.
func parsePinFlags(args []string) (map[string][]string, []string, error) {
	return parseFlags("pin", args, pinValueFlags, pinBoolFlags)
}

// parseFlags splits the arguments of pinfs sub into flag values and
// positional arguments, refusing flags other than valueFlags (which take a
// value, as --f v or --f=v) and boolFlags.
func parseFlags(sub string, args, valueFlags, boolFlags []string) (map[string][]string, []string, error) {
	flags := map[string][]string{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(name, "=")
		switch {
		case slices.Contains(boolFlags, name):
			flags[name] = append(flags[name], val)
		case !slices.Contains(valueFlags, name):
			return nil, nil, fmt.Errorf("pinfs %s has no flag --%s", sub, name)
		case hasVal:
			flags[name] = append(flags[name], val)
		case i+1 < len(args):
			i++
			flags[name] = append(flags[name], args[i])
		default:
			return nil, nil, fmt.Errorf("--%s needs a value", name)
		}
	}
	return flags, pos, nil
}

// checkPinJob checks every container of Job j that runs pinfs pin with
// --shard or --merge, and returns those runs with what is wrong with them.
func checkPinJob(where string, j *batchv1.Job) ([]pinRun, []error) {
	var runs []pinRun
	var errs []error
	for _, c := range j.Spec.Template.Spec.Containers {
		at := fmt.Sprintf("%s container %s", where, c.Name)
		args, ok := pinArgs(c)
		if !ok {
			if s := strings.Join(append(slices.Clone(c.Command), c.Args...), " "); strings.Contains(s, "pinfs pin") {
				errs = append(errs, fmt.Errorf("%s: run pinfs directly (command: [pinfs]), not through a shell, so that its flags can be checked", at))
			}
			continue
		}
		if len(args) == 0 || args[0] != "pin" {
			continue
		}
		flags, pos, err := parsePinFlags(args[1:])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
			continue
		}
		_, shard := flags["shard"]
		_, merge := flags["merge"]
		if !shard && !merge {
			continue
		}
		run := pinRun{where: at, phase: "merge"}
		if shard {
			run.phase = "shard"
		}
		for _, e := range checkPinRun(j, c, run.phase, flags, pos) {
			errs = append(errs, fmt.Errorf("%s: %s", at, e))
		}
		if p := flags["plan"]; len(p) == 1 {
			run.plan = p[0]
		}
		runs = append(runs, run)
	}
	return runs, errs
}

// checkPinRun checks one pinfs pin --shard or --merge container c of Job j.
func checkPinRun(j *batchv1.Job, c corev1.Container, phase string, flags map[string][]string, pos []string) []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if len(pos) > 0 {
		bad("--%s takes the source from the plan, but the args name %q", phase, pos)
	}
	for _, f := range append([]string{"shards", map[string]string{"shard": "merge", "merge": "shard"}[phase]}, manifestFlags...) {
		if _, ok := flags[f]; ok {
			bad("--%s with --%s: pinfs pin refuses it (exit 2)", f, phase)
		}
	}
	for f, v := range flags {
		if len(v) > 1 && f != "parent" {
			bad("--%s given %d times", f, len(v))
		}
	}
	if _, ok := flags["store"]; !ok && envVar(c, "PINFS_STORE") == nil {
		bad("no --store and no PINFS_STORE env")
	}
	errs = append(errs, checkPlanArg(c, flags["plan"])...)
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok || q.Sign() <= 0 {
		bad("no resources.requests.cpu: a shard is sized to a CPU budget")
	}
	spec := j.Spec
	if phase == "merge" {
		if spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion ||
			spec.Completions != nil && *spec.Completions != 1 || spec.Parallelism != nil && *spec.Parallelism != 1 {
			bad("a merge runs once: want one pod, not an Indexed Job or completions/parallelism other than 1")
		}
		return errs
	}
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		bad("pinfs pin --shard runs in an Indexed Job: want spec.completionMode: Indexed")
	}
	if spec.Completions == nil || *spec.Completions < 1 {
		bad("an Indexed Job needs spec.completions (= the plan's --shards)")
	}
	if v := flags["shard"]; len(v) == 1 {
		if err := checkIndexRef(c, v[0]); err != "" {
			bad("--shard %q: %s", v[0], err)
		}
	}
	return errs
}

// checkPlanArg checks a --plan argument: a plan digest in the store, or a
// file in a volume mounted into container c.
func checkPlanArg(c corev1.Container, plan []string) []string {
	switch {
	case len(plan) == 0:
		return []string{"no --plan"}
	case len(plan) > 1:
		return nil // reported as a repeated flag
	}
	p := plan[0]
	if planDigest.MatchString(p) {
		return nil
	}
	if strings.HasPrefix(p, "sha256:") || p == "" || strings.HasPrefix(p, "-") {
		return []string{fmt.Sprintf("--plan %q: want sha256:<64 lowercase hex> (phase 1's digest) or a plan file", p)}
	}
	p = path.Clean(p)
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(p, strings.TrimSuffix(path.Clean(m.MountPath), "/")+"/") {
			return nil
		}
	}
	return []string{fmt.Sprintf("--plan %q: no volume mounted there; pass the plan's digest (sha256:…) instead", p)}
}

// checkIndexRef returns what is wrong with a --shard argument, or "": it
// must be $(VAR) where VAR holds the pod's completion index, either the
// JOB_COMPLETION_INDEX the Job controller adds to every container of an
// Indexed Job or an env var of c with a fieldRef to the index.
func checkIndexRef(c corev1.Container, arg string) string {
	m := indexRef.FindStringSubmatch(arg)
	if m == nil {
		return "want $(JOB_COMPLETION_INDEX), so that pod i hashes shard i"
	}
	e := envVar(c, m[1])
	if e == nil {
		if m[1] == "JOB_COMPLETION_INDEX" {
			return "" // added by the Job controller
		}
		return fmt.Sprintf("env %s is not defined, so Kubernetes passes the text unexpanded", m[1])
	}
	if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.annotations['" + completionIndexAnnotation + "']",
			"metadata.labels['" + completionIndexAnnotation + "']":
			return ""
		}
	}
	return fmt.Sprintf("env %s is not a fieldRef to %s", m[1], completionIndexAnnotation)
}

// envVar returns container c's env var name, or nil.
func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}
