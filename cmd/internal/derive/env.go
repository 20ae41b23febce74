package derive

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pinfs/pinfs/verify"
	record "github.com/pinfs/pinfs/verify/derive"
)

// Credential reports whether the environment variable name may carry
// storage credentials, so that a transform does not get it unless the
// caller passes it (--pass-env): every AWS_* variable, in any case. That
// is the keys and session token, and everything that leads the AWS SDKs
// to credentials: AWS_PROFILE, AWS_CONFIG_FILE,
// AWS_SHARED_CREDENTIALS_FILE, AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN,
// AWS_CONTAINER_CREDENTIALS_* and AWS_CONTAINER_AUTHORIZATION_TOKEN*.
// PINFS_STORE is not one: a store URL names a bucket and prefix or a
// directory, and pinfs takes no credentials from it.
func Credential(name string) bool {
	return len(name) >= 4 && strings.EqualFold(name[:4], "AWS_")
}

// ParsePassEnv checks --pass-env values: each is the name of a variable,
// letters, digits and "_", not starting with a digit.
func ParsePassEnv(names []string) ([]string, error) {
	for _, n := range names {
		ok := n != "" && (n[0] < '0' || n[0] > '9')
		for _, c := range n {
			ok = ok && (c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
		}
		if !ok {
			return nil, fmt.Errorf("--pass-env %s: want the NAME of an environment variable (letters, digits, _)", verify.Printable(n))
		}
	}
	return names, nil
}

// Env returns the environment of r's command: base without the variables
// that may carry credentials (Credential) unless pass names them, and
// without any PINFS_INPUT_* or PINFS_PARAM_* variable, PINFS_OUTPUT,
// PINFS_TRANSFORM and PINFS_DERIVATION_KEY, so that nothing of an
// enclosing derivation leaks in; then PINFS_INPUT_<name>
// (record.InputEnv) for each input mounted under inputs, PINFS_OUTPUT,
// PINFS_PARAM_<KEY> (record.ParamEnv) for each parameter, PINFS_TRANSFORM
// and PINFS_DERIVATION_KEY.
func Env(base, pass []string, r *record.Record, inputs, output string) []string {
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case Credential(k) && !slices.Contains(pass, k),
			strings.HasPrefix(k, "PINFS_INPUT_"), strings.HasPrefix(k, "PINFS_PARAM_"),
			k == "PINFS_OUTPUT", k == "PINFS_TRANSFORM", k == "PINFS_DERIVATION_KEY":
			continue
		}
		env = append(env, kv)
	}
	for _, in := range r.Inputs {
		for _, k := range record.InputEnv(in.Name) {
			env = append(env, k+"="+filepath.Join(inputs, in.Name))
		}
	}
	env = append(env, "PINFS_OUTPUT="+output)
	for k, v := range r.Params {
		env = append(env, record.ParamEnv(k)+"="+v)
	}
	return append(env, "PINFS_TRANSFORM="+r.Transform, "PINFS_DERIVATION_KEY="+string(r.Key))
}
