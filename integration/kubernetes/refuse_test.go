package kubernetes

import (
	"errors"
	"strings"
	"testing"
)

// goodShardJob is a minimal valid phase-2 Job. The cases below each break it
// in one place, so the checks must refuse them for that one reason.
const goodShardJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: shards
spec:
  completionMode: Indexed
  completions: 8
  parallelism: 8
  backoffLimitPerIndex: 2
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: pin
          image: ghcr.io/example/pinfs:v0.1.0
          command: [pinfs]
          args: [pin, --plan, "sha256:1111111111111111111111111111111111111111111111111111111111111111", --shard, $(JOB_COMPLETION_INDEX), --store, "s3://store/p", --jobs, "4"]
          resources:
            requests:
              cpu: "1"
`

// edit returns goodShardJob with old replaced by new, failing when old is
// not in it (so a case cannot silently test the good Job).
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(goodShardJob, old) {
		t.Fatalf("%q is not in goodShardJob", old)
	}
	return strings.Replace(goodShardJob, old, new, 1)
}

func TestAcceptsGoodJobs(t *testing.T) {
	fieldRef := edit(t, `$(JOB_COMPLETION_INDEX), --store`, `$(SHARD), --store`) +
		`          env:
            - name: SHARD
              valueFrom:
                fieldRef:
                  fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
`
	planFile := edit(t, `"sha256:1111111111111111111111111111111111111111111111111111111111111111"`, `/plan/plan.json`) +
		`          volumeMounts:
            - name: plan
              mountPath: /plan
      volumes:
        - name: plan
          configMap:
            name: pinfs-plan
`
	for name, y := range map[string]string{"env $(JOB_COMPLETION_INDEX)": goodShardJob, "env fieldRef": fieldRef, "plan file": planFile} {
		t.Run(name, func(t *testing.T) {
			rep, errs := checkFile("good.yaml", []byte(y))
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("refused: %v", err)
			}
			if rep.docs != 1 || rep.shards != 1 {
				t.Errorf("found %d objects and %d shard containers; want 1 and 1", rep.docs, rep.shards)
			}
		})
	}
}

func TestRefusesBrokenJobs(t *testing.T) {
	plan := `"sha256:1111111111111111111111111111111111111111111111111111111111111111"`
	cases := []refusal{
		{"misspelt field", edit(t, "completionMode:", "completionsMode:"), `unknown field "spec.completionsMode"`},
		{"field in wrong case", edit(t, "completionMode:", "CompletionMode:"), `unknown field "spec.CompletionMode"`},
		{"field at the wrong level", edit(t, "  parallelism: 8\n", "  parallelism: 8\n  restartPolicy: Never\n"), `unknown field "spec.restartPolicy"`},
		{"wrong type", edit(t, "completions: 8", "completions: eight"), "cannot unmarshal"},
		{"bad quantity", edit(t, `cpu: "1"`, "cpu: one"), "quantities must match"},
		{"duplicate field", edit(t, "  parallelism: 8\n", "  parallelism: 8\n  parallelism: 4\n"), `"parallelism" already set`},
		{"unknown kind", edit(t, "kind: Job", "kind: Jobs"), "unknown kind batch/v1 Jobs"},
		{"no kind", edit(t, "kind: Job\n", ""), "no apiVersion or kind"},
		{"missing completionMode", edit(t, "  completionMode: Indexed\n", ""), "want spec.completionMode: Indexed"},
		{"NonIndexed", edit(t, "completionMode: Indexed", "completionMode: NonIndexed"), "want spec.completionMode: Indexed"},
		{"missing completions", edit(t, "  completions: 8\n", ""), "needs spec.completions"},
		{"restartPolicy Always", edit(t, "restartPolicy: Never", "restartPolicy: Always"), `restartPolicy "Always"`},
		{"fixed shard", edit(t, "$(JOB_COMPLETION_INDEX)", `"0"`), `--shard "0": want $(JOB_COMPLETION_INDEX)`},
		{"shell expansion", edit(t, "$(JOB_COMPLETION_INDEX)", "$JOB_COMPLETION_INDEX"), "want $(JOB_COMPLETION_INDEX)"},
		{"undefined index var", edit(t, "$(JOB_COMPLETION_INDEX)", "$(SHARD)"), "env SHARD is not defined"},
		{"plan tag", edit(t, plan, "sha256:abc"), `--plan "sha256:abc": want sha256:`},
		{"plan file not mounted", edit(t, plan, "/plan/plan.json"), "no volume mounted there"},
		{"no plan", edit(t, "--plan, "+plan+", ", ""), "no --plan"},
		{"no store", edit(t, `--store, "s3://store/p", `, ""), "no --store"},
		{"misspelt CLI flag", edit(t, "--shard,", "--shrad,"), "pinfs pin has no flag --shrad"},
		{"source with --shard", edit(t, "args: [pin,", `args: [pin, "s3://data/p",`), "takes the source from the plan"},
		{"manifest flag with --shard", edit(t, "--jobs,", "--purpose, x, --jobs,"), "--purpose with --shard"},
		{"no cpu request", edit(t, `              cpu: "1"`, `              memory: 1Gi`), "no resources.requests.cpu"},
		{"through a shell", edit(t, "command: [pinfs]\n          args: [pin,", `command: [sh, -c, "pinfs pin $0 $@"]`+"\n          args: ["), "not through a shell"},
	}
	refuseAll(t, cases)
}

func TestRefusesMismatchedPlans(t *testing.T) {
	other := strings.ReplaceAll(goodShardJob, "1111", "2222")
	_, errs := checkFile("two.yaml", []byte(goodShardJob+"---\n"+other))
	if err := errors.Join(errs...); err == nil || !strings.Contains(err.Error(), "share one plan") {
		t.Errorf("two Jobs with different plans: %v; want a refusal", err)
	}
}

func TestSplitDocuments(t *testing.T) {
	in := "# only a comment\n---\na: 1\n--- # second\nb: 2\n---\n\n---\nc: |\n  ---x\n"
	got := splitDocuments([]byte(in))
	want := []string{"a: 1\n", "b: 2\n", "c: |\n  ---x\n"}
	if len(got) != len(want) {
		t.Fatalf("got %d documents %q; want %q", len(got), got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("document %d = %q; want %q", i, got[i], want[i])
		}
	}
}

// refusal is a broken manifest and what its refusal must say.
type refusal struct{ name, yaml, want string }

// refuseAll checks that checkFile refuses each case for its reason.
func refuseAll(t *testing.T, cases []refusal) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := checkFile("broken.yaml", []byte(c.yaml))
			err := errors.Join(errs...)
			if err == nil {
				t.Fatalf("accepted:\n%s", c.yaml)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("refused for another reason: %v; want %q", err, c.want)
			}
		})
	}
}
