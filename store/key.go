package store

import (
	"fmt"
	"strings"
)

// CheckKey reports whether key is a well-formed blob key: a relative,
// slash-separated path such as "manifests/sha256/<hex>" with no empty, "."
// or ".." components, no backslashes and no NUL bytes. Backends call it
// before they turn a key into a file path or an object key, so that a key
// can never name something outside the store root.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("blob key is empty")
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("blob key %q: absolute", key)
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("blob key %q: contains a backslash or NUL", key)
	}
	for _, c := range strings.Split(key, "/") {
		switch c {
		case "":
			return fmt.Errorf("blob key %q: empty path component", key)
		case ".", "..":
			return fmt.Errorf("blob key %q: %q path component", key, c)
		}
	}
	return nil
}

// CASKey returns the blob key of a content-addressed object,
// "cas/blake3/<hex>". obj must be in the CAS form.
func CASKey(obj Object) (string, error) {
	if err := obj.Validate(); err != nil {
		return "", err
	}
	if obj.CAS == "" {
		return "", fmt.Errorf("%v: not a content-addressed object", obj)
	}
	return "cas/blake3/" + strings.TrimPrefix(obj.CAS, "blake3:"), nil
}
