package kubernetes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pinfs/pinfs/integration/repo"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// manifestDirs are the folders, relative to the repository root, whose
// *.yaml and *.yml files are Kubernetes manifests. docs/ must exist.
var manifestDirs = []string{"docs", "deploy"}

// shardExample is the example of phase 2 that the issue asks for, and
// sidecarExample the training pod with a pinfs sidecar.
const (
	shardExample   = "docs/kubernetes/pin-shards.yaml"
	sidecarExample = "deploy/kubernetes/sidecar.yaml"
)

// fileReport is what checkFile found in one manifest file.
type fileReport struct {
	docs   int
	shards int // containers running pinfs pin --shard
	merges int // containers running pinfs pin --merge
	mounts int // command lines running pinfs mount
	warms  int // command lines running pinfs warm
}

// checkFile decodes a manifest file strictly and checks its Jobs and the
// pinfs containers of every pod; it returns every error, not only the
// first.
func checkFile(name string, b []byte) (fileReport, []error) {
	docs, errs := decodeFile(name, b)
	rep := fileReport{docs: len(docs)}
	var runs []pinRun
	for _, d := range docs {
		if spec := podSpecOf(d.obj); spec != nil {
			m, w, e := checkPod(d.name, spec)
			rep.mounts, rep.warms, errs = rep.mounts+m, rep.warms+w, append(errs, e...)
		}
		switch o := d.obj.(type) {
		case *batchv1.Job:
			errs = append(errs, checkJob(d.name, o)...)
			r, e := checkPinJob(d.name, o)
			runs, errs = append(runs, r...), append(errs, e...)
		}
	}
	for _, r := range runs {
		if r.phase == "shard" {
			rep.shards++
		} else {
			rep.merges++
		}
		if r.plan != runs[0].plan {
			errs = append(errs, fmt.Errorf("%s: --plan %s, but %s has --plan %s: the phases of one pin share one plan", r.where, r.plan, runs[0].where, runs[0].plan))
		}
	}
	return rep, errs
}

// checkJob checks what the API server would refuse in a Job that a strict
// decode lets through.
func checkJob(where string, j *batchv1.Job) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(where+": "+format, a...)) }
	spec, pod := j.Spec, j.Spec.Template.Spec
	if j.Name == "" && j.GenerateName == "" {
		bad("no metadata.name")
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever && pod.RestartPolicy != corev1.RestartPolicyOnFailure {
		bad("restartPolicy %q: a Job's pods need Never or OnFailure", pod.RestartPolicy)
	}
	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if indexed && spec.Completions == nil {
		bad("completionMode Indexed needs spec.completions")
	}
	if spec.BackoffLimitPerIndex != nil && !indexed {
		bad("backoffLimitPerIndex needs completionMode: Indexed")
	}
	if (spec.BackoffLimitPerIndex != nil || spec.PodFailurePolicy != nil) && pod.RestartPolicy != corev1.RestartPolicyNever {
		bad("backoffLimitPerIndex and podFailurePolicy need restartPolicy: Never")
	}
	var names []string
	for _, c := range pod.Containers {
		if c.Name == "" || c.Image == "" {
			bad("a container without a name or an image")
		}
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		bad("no containers")
	}
	if spec.PodFailurePolicy != nil {
		for _, r := range spec.PodFailurePolicy.Rules {
			if e := r.OnExitCodes; e != nil && e.ContainerName != nil && !slices.Contains(names, *e.ContainerName) {
				bad("podFailurePolicy names container %q; the containers are %q", *e.ContainerName, names)
			}
		}
	}
	return errs
}

// manifestFiles returns the *.yaml and *.yml files under manifestDirs,
// relative to root.
func manifestFiles(t testing.TB, root string) []string {
	t.Helper()
	var files []string
	for _, d := range manifestDirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ext := filepath.Ext(p); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				rel, err := filepath.Rel(root, p)
				files = append(files, filepath.ToSlash(rel))
				return err
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) && d != "docs" {
			continue
		}
		if err != nil {
			t.Fatalf("walk %s: %v", d, err)
		}
	}
	return files
}

// TestManifests decodes every manifest pinfs ships and checks its pinfs
// Jobs; the sharded-pin example must hold an Indexed Job of shards.
func TestManifests(t *testing.T) {
	root := repo.MustRoot(t)
	files := manifestFiles(t, root)
	for _, f := range []string{shardExample, sidecarExample} {
		if !slices.Contains(files, f) {
			t.Fatalf("%s is missing (found %q)", f, files)
		}
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			rep, errs := checkFile(f, b)
			for _, err := range errs {
				t.Error(err)
			}
			if rep.docs == 0 {
				t.Errorf("%s: no Kubernetes object in it", f)
			}
			if f == shardExample && (rep.shards == 0 || rep.merges == 0) {
				t.Errorf("%s: %d containers run pinfs pin --shard and %d run --merge; want at least one of each", f, rep.shards, rep.merges)
			}
			if f == sidecarExample && (rep.mounts == 0 || rep.warms == 0) {
				t.Errorf("%s: %d containers run pinfs mount and %d run pinfs warm; want at least one of each", f, rep.mounts, rep.warms)
			}
			t.Logf("%s: %d objects, %d shard and %d merge containers, %d mounts, %d warm steps", f, rep.docs, rep.shards, rep.merges, rep.mounts, rep.warms)
		})
	}
}
