package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kinds maps "apiVersion kind" to a new value of its API type. A manifest of
// any other kind fails: add its type here when pinfs ships one.
var kinds = map[string]func() any{
	"batch/v1 Job":                       func() any { return new(batchv1.Job) },
	"batch/v1 CronJob":                   func() any { return new(batchv1.CronJob) },
	"v1 Pod":                             func() any { return new(corev1.Pod) },
	"v1 ConfigMap":                       func() any { return new(corev1.ConfigMap) },
	"v1 Secret":                          func() any { return new(corev1.Secret) },
	"v1 ServiceAccount":                  func() any { return new(corev1.ServiceAccount) },
	"v1 Service":                         func() any { return new(corev1.Service) },
	"apps/v1 DaemonSet":                  func() any { return new(appsv1.DaemonSet) },
	"apps/v1 Deployment":                 func() any { return new(appsv1.Deployment) },
	"apps/v1 StatefulSet":                func() any { return new(appsv1.StatefulSet) },
	"networking.k8s.io/v1 NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
}

// document is one decoded manifest: its place in a file and its typed value
// (a pointer to one of the types in kinds).
type document struct {
	name string // "file#n", n counting documents from 0
	obj  any
}

// splitDocuments returns the documents of a YAML stream: the text between
// "---" lines (a separator may carry a comment). Documents holding nothing
// but comments and blank lines are dropped.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	flush := func() {
		if j, err := yaml.YAMLToJSON(cur); err != nil || !bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			docs = append(docs, cur)
		}
		cur = nil
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "---"); ok {
			if rest = strings.TrimSpace(rest); rest == "" || strings.HasPrefix(rest, "#") {
				flush()
				continue
			}
		}
		cur = append(cur, line...)
	}
	flush()
	return docs
}

// decode decodes one document strictly into the API type of its apiVersion
// and kind. It decodes twice: with the API server's own strict JSON decoder
// (sigs.k8s.io/json: unknown, duplicate and wrong-case fields, wrong types,
// each error naming the field's path), and with
// sigs.k8s.io/yaml.UnmarshalStrict, whose value it returns. The second alone
// would miss a field in the wrong case: encoding/json takes "CompletionMode"
// for "completionMode".
func decode(doc []byte) (any, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, errors.New("no apiVersion or kind: not a Kubernetes object")
	}
	newObj, ok := kinds[tm.APIVersion+" "+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %s %s (the kinds this test knows are in kinds)", tm.APIVersion, tm.Kind)
	}
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	strict, err := kjson.UnmarshalStrict(j, newObj())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if err := errors.Join(strict...); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	obj := newObj()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

// decodeFile decodes every document of a manifest file named name.
func decodeFile(name string, b []byte) ([]document, []error) {
	var docs []document
	var errs []error
	for i, doc := range splitDocuments(b) {
		where := fmt.Sprintf("%s#%d", name, i)
		obj, err := decode(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		docs = append(docs, document{name: where, obj: obj})
	}
	return docs, errs
}
