package kubernetes

import (
	"errors"
	"strings"
	"testing"
)

// digestA is the snapshot that goodSidecarPod mounts.
const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// goodSidecarPod is a minimal valid pod with a pinfs sidecar (sidecarPod
// with digestA). The cases below each break it in one place, so the checks
// must refuse them for that one reason.
var goodSidecarPod = strings.ReplaceAll(sidecarPod, "DIGEST", digestA)

// sidecarPod is goodSidecarPod with DIGEST for its digest.
const sidecarPod = `apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 90
  initContainers:
    - name: mkdir
      image: ghcr.io/example/pinfs:v0.1.0
      command: [mkdir, -p, /data/DIGEST]
      volumeMounts:
        - {name: data, mountPath: /data}
    - name: warm
      image: ghcr.io/example/pinfs:v0.1.0
      command: [pinfs]
      args: [warm, "DIGEST", --cache-dir, /cache/c, --store, "s3://store/p"]
      envFrom:
        - secretRef: {name: s3}
      securityContext:
        runAsUser: 0
      volumeMounts:
        - {name: cache, mountPath: /cache}
    - name: pinfs
      image: ghcr.io/example/pinfs:v0.1.0
      restartPolicy: Always
      command: [pinfs]
      args: [mount, "DIGEST", /data/DIGEST, --foreground, --allow-other, --cache-dir, /var/cache/pinfs/c, --store, "s3://store/p"]
      env:
        - name: AWS_ACCESS_KEY_ID
          valueFrom:
            secretKeyRef: {name: s3, key: id}
      securityContext:
        privileged: true
        runAsUser: 0
      startupProbe:
        exec:
          command: [pinfs, status, /data/DIGEST]
        timeoutSeconds: 10
      volumeMounts:
        - {name: data, mountPath: /data, mountPropagation: Bidirectional}
        - {name: cache, mountPath: /var/cache/pinfs}
  containers:
    - name: trainer
      image: ghcr.io/example/trainer:v1
      args: [--data, /data/DIGEST]
      volumeMounts:
        - {name: data, mountPath: /data, mountPropagation: HostToContainer, readOnly: true}
  volumes:
    - {name: data, emptyDir: {}}
    - {name: cache, emptyDir: {}}
    - {name: creds, secret: {secretName: s3}}
`

// editPod returns goodSidecarPod with old replaced by new (every time it
// occurs when all is set), failing when old is not in it.
func editPod(t *testing.T, old, new string, all bool) string {
	t.Helper()
	if !strings.Contains(goodSidecarPod, old) {
		t.Fatalf("%q is not in goodSidecarPod", old)
	}
	if all {
		return strings.ReplaceAll(goodSidecarPod, old, new)
	}
	return strings.Replace(goodSidecarPod, old, new, 1)
}

func TestAcceptsGoodSidecar(t *testing.T) {
	volumeRoot := editPod(t, "/data/"+digestA, "/data", true)
	volumeRoot = strings.Replace(volumeRoot, "[mkdir, -p, /data]", "[mkdir, -p, /data/x]", 1)
	for name, y := range map[string]string{"good": goodSidecarPod, "mount at the volume root": volumeRoot} {
		t.Run(name, func(t *testing.T) {
			rep, errs := checkFile("good.yaml", []byte(y))
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("refused: %v", err)
			}
			if rep.mounts != 1 || rep.warms != 1 {
				t.Errorf("found %d mounts and %d warm steps; want 1 and 1", rep.mounts, rep.warms)
			}
		})
	}
}

func TestRefusesBrokenSidecars(t *testing.T) {
	const b = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	trainerMount := "{name: data, mountPath: /data, mountPropagation: HostToContainer, readOnly: true}"
	cases := []refusal{
		{"plain init container", editPod(t, "      restartPolicy: Always\n", "", false), "without restartPolicy: Always: it never exits"},
		{"regular container", editPod(t, "  containers:\n", "  containers:\n    - name: mount2\n      image: ghcr.io/example/pinfs:v0.1.0\n      args: [mount, \""+digestA+"\", /data/"+digestA+", --foreground]\n", false), "pinfs mount in containers"},
		{"no --foreground", editPod(t, "--foreground, ", "", false), "without --foreground"},
		{"--foreground=false", editPod(t, "--foreground, ", "--foreground=false, ", false), "without --foreground"},
		{"misspelt mount flag", editPod(t, "--foreground, ", "--foregrond, ", false), "pinfs mount has no flag --foregrond"},
		{"short digest", editPod(t, "[mount, \""+digestA+"\"", "[mount, \"sha256:aaaa\"", false), "want a full sha256:<64 lowercase hex> digest"},
		{"through a shell", editPod(t, "command: [pinfs]\n      args: [mount,", "command: [sh, -c, \"pinfs mount $0 $@\"]\n      args: [", false), "not through a shell"},
		{"no probe", editPod(t, "      startupProbe:\n        exec:\n          command: [pinfs, status, /data/"+digestA+"]\n        timeoutSeconds: 10\n", "", false), "no startupProbe running pinfs status"},
		{"probe on another path", editPod(t, "[pinfs, status, /data/"+digestA+"]", "[pinfs, status, /data]", false), "but the mount is at /data/" + digestA},
		{"probe through a shell", editPod(t, "[pinfs, status, /data/"+digestA+"]", "[sh, -c, \"pinfs status /data/"+digestA+"\"]", false), "no startupProbe running pinfs status"},
		{"probe shorter than status", editPod(t, "timeoutSeconds: 10", "timeoutSeconds: 5", false), "not longer than pinfs status --timeout 5s"},
		{"probe default timeout", editPod(t, "        timeoutSeconds: 10\n", "", false), "timeoutSeconds 1 is not longer"},
		{"probe on a plain init container", editPod(t, "      envFrom:\n        - secretRef: {name: s3}\n", "      envFrom:\n        - secretRef: {name: s3}\n      startupProbe:\n        exec: {command: [ls]}\n", false), "a probe on an init container without restartPolicy: Always"},
		{"no propagation", editPod(t, ", mountPropagation: Bidirectional}", "}", false), "needs mountPropagation: Bidirectional"},
		{"not privileged", editPod(t, "privileged: true", "privileged: false", false), "needs securityContext.privileged: true"},
		{"mountpoint on no volume", editPod(t, "{name: data, mountPath: /data, mountPropagation: Bidirectional}", "{name: data, mountPath: /srv, mountPropagation: Bidirectional}", false), "no volume mounted at or above the mountpoint"},
		{"mountpoint not created", editPod(t, "[mkdir, -p, /data/"+digestA+"]", "[mkdir, -p, /data/other]", false), "does not exist in the fresh volume data"},
		{"trainer without propagation", editPod(t, trainerMount, "{name: data, mountPath: /data, readOnly: true}", false), "container trainer: volume data needs mountPropagation: HostToContainer"},
		{"trainer without the volume", editPod(t, "      volumeMounts:\n        - "+trainerMount+"\n", "", false), "nothing can read the mount"},
		{"no --allow-other", editPod(t, "--allow-other, ", "", false), "no --allow-other"},
		{"no --cache-dir", editPod(t, "--cache-dir, /var/cache/pinfs/c, ", "", false), "no --cache-dir on a volume"},
		{"cache dir on no volume", editPod(t, "--cache-dir, /var/cache/pinfs/c, ", "--cache-dir, /tmp/pinfs, ", false), "--cache-dir /tmp/pinfs is on no volume"},
		{"trainer with envFrom secret", editPod(t, "      args: [--data,", "      envFrom:\n        - secretRef: {name: s3}\n      args: [--data,", false), "container trainer: envFrom Secret s3: only the containers that run pinfs"},
		{"trainer with a key in env", editPod(t, "      args: [--data,", "      env:\n        - {name: AWS_SECRET_ACCESS_KEY, value: x}\n      args: [--data,", false), "container trainer: env AWS_SECRET_ACCESS_KEY"},
		{"trainer with a secret volume", editPod(t, "readOnly: true}\n", "readOnly: true}\n        - {name: creds, mountPath: /creds}\n", false), "container trainer: Secret volume creds"},
		{"mkdir with credentials", editPod(t, "      volumeMounts:\n        - {name: data, mountPath: /data}\n", "      env:\n        - {name: AWS_PROFILE, value: p}\n      volumeMounts:\n        - {name: data, mountPath: /data}\n", false), "init container mkdir: env AWS_PROFILE"},
		{"trainer reads another digest", editPod(t, "[--data, /data/"+digestA+"]", "[--data, /data/"+b+"]", false), "container trainer: names " + b + ", but the pod mounts " + digestA},
		{"mountpoint of another digest", editPod(t, "/data/"+digestA+", --foreground", "/data/"+b+", --foreground", false), "init container pinfs: names " + b},
		{"warm of another digest", editPod(t, "[warm, \""+digestA+"\"", "[warm, \""+b+"\"", false), "warms " + b + ", but pinfs mounts " + digestA},
		{"warm into another cache", editPod(t, "--cache-dir, /cache/c,", "--cache-dir, /cache/other,", false), "is not the cache dir \"/var/cache/pinfs/c\" of pinfs"},
		{"cache dir at an emptyDir's root", editPod(t, "--cache-dir, /var/cache/pinfs/c, ", "--cache-dir, /var/cache/pinfs, ", false), "--cache-dir /var/cache/pinfs is the root of emptyDir cache"},
		{"warm as another user", editPod(t, "        runAsUser: 0\n", "        runAsUser: 65532\n", false), "runs as uid 65532, but pinfs as uid 0"},
		{"warm as the image's user", editPod(t, "      securityContext:\n        runAsUser: 0\n", "", false), "runs as the image's user, but pinfs as uid 0"},
		{"warm as a sidecar", editPod(t, "      command: [pinfs]\n      args: [warm,", "      restartPolicy: Always\n      command: [pinfs]\n      args: [warm,", false), "pinfs warm runs once, before the mount"},
		{"misspelt warm flag", editPod(t, "--cache-dir, /cache/c,", "--cachedir, /cache/c,", false), "pinfs warm has no flag --cachedir"},
		{"short grace period", editPod(t, "terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 30", false), "terminationGracePeriodSeconds 30: want at least 60"},
		{"default grace period", editPod(t, "  terminationGracePeriodSeconds: 90\n", "", false), "terminationGracePeriodSeconds unset (30)"},
	}
	refuseAll(t, cases)
}

func TestRefusesWarmAfterSidecar(t *testing.T) {
	// Swap the warm step and the sidecar: the mount starts on a cold cache.
	y := goodSidecarPod
	i, j, k := strings.Index(y, "    - name: warm\n"), strings.Index(y, "    - name: pinfs\n"), strings.Index(y, "  containers:\n")
	if i < 0 || j < i || k < j {
		t.Fatal("goodSidecarPod lost its warm step, sidecar or containers")
	}
	y = y[:i] + y[j:k] + y[i:j] + y[k:]
	_, errs := checkFile("swapped.yaml", []byte(y))
	if err := errors.Join(errs...); err == nil || !strings.Contains(err.Error(), "runs after the sidecar pinfs") {
		t.Errorf("warm step after the sidecar: %v; want a refusal", err)
	}
}
