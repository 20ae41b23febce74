// Package kubernetes has no code of its own: its tests check the Kubernetes
// manifests that pinfs ships, every *.yaml and *.yml file under docs/ and
// deploy/.
//
// Each document is decoded with the Kubernetes API types (k8s.io/api) in
// strict mode, as kubectl apply --validate=strict and the API server do: an
// unknown or misspelt field (wrong case included), a duplicate field, a value
// of the wrong type or a kind the tests do not know fails. A Job that runs a
// phase of a sharded pin is then checked against the pinfs CLI: a shard
// (pinfs pin --plan … --shard …) must be an Indexed Job whose pods take
// their shard from the completion index, read the plan by its digest (or
// from a mounted file), and request CPU; a merge must run one pod.
//
// A pod that runs pinfs mount is checked as the sidecar pattern of
// docs/operations.md: the mount is a native sidecar (an init container with
// restartPolicy: Always) with --foreground, --allow-other and a cache dir
// on a volume, a startupProbe running pinfs status on its mountpoint, and a
// privileged Bidirectional mount of the volume holding that mountpoint,
// which is created before it; the containers after it that mount that
// volume use HostToContainer; a pinfs warm step is a plain init container
// before it, of the same digest, into the same cache dir; only containers
// that run pinfs carry storage credentials; every digest the pod names is
// the mounted one; and terminationGracePeriodSeconds leaves time for
// run_end.
package kubernetes
