package kubernetes

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// minGracePeriod is the least terminationGracePeriodSeconds of a pod that
// runs pinfs mount: time for the trainer to stop, then for the sidecar to
// unmount and write the consumed set and run_end to the run record. The
// Kubernetes default, 30 s, is too short for a slow store.
const minGracePeriod = 60

// digestText finds full snapshot digests in text.
var digestText = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// credentialEnv are env vars that carry storage credentials or point at
// them. AWS_REGION and endpoints are not secrets.
var credentialEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
	"AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"}

// podSpecOf returns the pod template of a workload, or nil for a kind
// without pods.
func podSpecOf(obj any) *corev1.PodSpec {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.Spec
	case *batchv1.Job:
		return &o.Spec.Template.Spec
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.Spec
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	}
	return nil
}

// podContainer is one container of a pod, in start order: init containers
// first, in their order, then the regular ones.
type podContainer struct {
	c       *corev1.Container
	order   int
	init    bool // in initContainers
	sidecar bool // an init container with restartPolicy: Always
	where   string
}

// containersOf returns every container of spec in start order.
func containersOf(where string, spec *corev1.PodSpec) []podContainer {
	var cs []podContainer
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		always := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		cs = append(cs, podContainer{c: c, order: len(cs), init: true, sidecar: always,
			where: fmt.Sprintf("%s init container %s", where, c.Name)})
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		cs = append(cs, podContainer{c: c, order: len(cs), where: fmt.Sprintf("%s container %s", where, c.Name)})
	}
	return cs
}

// volumeAt returns the volume mount of c that holds path p (the deepest
// mountPath at or above p) and p's path inside that volume, or nil.
func volumeAt(c *corev1.Container, p string) (*corev1.VolumeMount, string) {
	p = path.Clean(p)
	var best *corev1.VolumeMount
	var rel string
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := path.Clean(m.MountPath)
		r, ok := strings.CutPrefix(p, mp)
		if !ok || r != "" && !strings.HasPrefix(r, "/") && mp != "/" {
			continue
		}
		if best == nil || len(mp) > len(path.Clean(best.MountPath)) {
			best, rel = m, path.Join("/", m.SubPath, r)
		}
	}
	return best, rel
}

// volumeMount returns c's mount of the volume called name, or nil.
func volumeMount(c *corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// credentials returns what in container c carries storage credentials:
// credential env vars, env from Secrets and Secret volumes.
func credentials(spec *corev1.PodSpec, c *corev1.Container) []string {
	var found []string
	for _, e := range c.Env {
		switch {
		case slices.Contains(credentialEnv, e.Name):
			found = append(found, "env "+e.Name)
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			found = append(found, fmt.Sprintf("env %s from Secret %s", e.Name, e.ValueFrom.SecretKeyRef.Name))
		}
	}
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			found = append(found, "envFrom Secret "+e.SecretRef.Name)
		}
	}
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && secretVolume(v) {
				found = append(found, "Secret volume "+v.Name)
			}
		}
	}
	return found
}

// secretVolume reports whether v holds a Secret.
func secretVolume(v corev1.Volume) bool {
	if v.Secret != nil {
		return true
	}
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				return true
			}
		}
	}
	return false
}

// namedDigests returns the snapshot digests that container c names in its
// command, args, env values and exec probes.
func namedDigests(c *corev1.Container) []string {
	var texts []string
	texts = append(texts, c.Command...)
	texts = append(texts, c.Args...)
	for _, e := range c.Env {
		texts = append(texts, e.Value)
	}
	for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		if p != nil && p.Exec != nil {
			texts = append(texts, p.Exec.Command...)
		}
	}
	var ds []string
	for _, t := range texts {
		ds = append(ds, digestText.FindAllString(t, -1)...)
	}
	return ds
}

// checkPodBasics checks what the API server refuses in any pod: probes on
// a plain init container, Bidirectional propagation without privileged.
func checkPodBasics(cs []podContainer) []error {
	var errs []error
	for _, pc := range cs {
		c := pc.c
		if pc.init && !pc.sidecar && (c.StartupProbe != nil || c.ReadinessProbe != nil || c.LivenessProbe != nil) {
			errs = append(errs, fmt.Errorf("%s: a probe on an init container without restartPolicy: Always: the API server refuses it", pc.where))
		}
		for _, m := range c.VolumeMounts {
			if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional && !privileged(c) {
				errs = append(errs, fmt.Errorf("%s: volume %s has Bidirectional propagation, which needs securityContext.privileged: true (the API server refuses it otherwise)", pc.where, m.Name))
			}
		}
	}
	return errs
}

// privileged reports whether c runs privileged.
func privileged(c *corev1.Container) bool {
	s := c.SecurityContext
	return s != nil && s.Privileged != nil && *s.Privileged
}
