package derive

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pinfs/pinfs/verify"
)

// Limits on the parts of a record, so that a record stays small and every
// name makes an environment variable.
const (
	maxName    = 64
	maxVersion = 256
	maxValue   = 4096
	maxArg     = 4096
	maxArgs    = 256
)

// checkParts checks everything New takes: inputs, transform, params,
// command and split.
func (r *Record) checkParts() error {
	if len(r.Inputs) == 0 {
		return errors.New("no inputs: a derivation reads at least one snapshot")
	}
	envs := map[string]string{}
	claim := func(env, what string) error {
		if other, ok := envs[env]; ok {
			return fmt.Errorf("%s and %s both give $%s", other, what, env)
		}
		envs[env] = what
		return nil
	}
	for _, in := range r.Inputs {
		if err := CheckName(in.Name); err != nil {
			return err
		}
		if _, err := verify.ParseDigest(string(in.Digest)); err != nil {
			return fmt.Errorf("input %s: %w", in.Name, err)
		}
		for _, env := range InputEnv(in.Name) {
			if err := claim(env, "input "+in.Name); err != nil {
				return err
			}
		}
	}
	if err := CheckVersion(r.Transform); err != nil {
		return err
	}
	for k, v := range r.Params {
		if err := CheckParam(k, v); err != nil {
			return err
		}
		if err := claim(ParamEnv(k), "param "+k); err != nil {
			return err
		}
	}
	if len(r.Command) == 0 || r.Command[0] == "" {
		return errors.New("no command: give it after --")
	}
	if len(r.Command) > maxArgs {
		return fmt.Errorf("command: %d arguments, more than %d", len(r.Command), maxArgs)
	}
	for _, a := range r.Command {
		if len(a) > maxArg || !utf8.ValidString(a) || strings.ContainsRune(a, 0) {
			return fmt.Errorf("command argument %s: longer than %d bytes, not UTF-8 or holds a NUL", verify.Printable(a), maxArg)
		}
	}
	if r.Split == "" || len(r.Split) > maxVersion || strings.ContainsFunc(r.Split, badRune) {
		return fmt.Errorf("split rule %s: empty, too long or holds spaces", verify.Printable(r.Split))
	}
	return nil
}

// CheckName accepts an input name: a letter or "_", then up to 63
// letters, digits or "_", so that it makes an environment variable name.
func CheckName(name string) error {
	ok := name != "" && len(name) <= maxName && !('0' <= name[0] && name[0] <= '9')
	for _, c := range []byte(name) {
		ok = ok && (c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z')
	}
	if !ok {
		return fmt.Errorf("input name %s: want a letter or _ then letters, digits or _ (at most %d)", verify.Printable(name), maxName)
	}
	return nil
}

// CheckVersion accepts a transform NAME@VERSION, cut at the last "@": both
// parts non-empty, no space or control characters, at most 256 bytes in
// all. harvest@v1.4.2, registry/harvest@sha256:<hex> and repo@<commit>
// all pass; a bare name or tag (harvest, harvest:v1) does not.
func CheckVersion(v string) error {
	i := strings.LastIndex(v, "@")
	if i <= 0 || i == len(v)-1 || len(v) > maxVersion || !utf8.ValidString(v) || strings.ContainsFunc(v, badRune) {
		return fmt.Errorf("transform %s: want NAME@VERSION, such as harvest@v1.4.2 or registry/harvest@sha256:<64 hex>", verify.Printable(v))
	}
	return nil
}

// CheckParam accepts a parameter: a key of 1 to 64 letters, digits, ".",
// "-" or "_", and a value of at most 4096 bytes of UTF-8 without control
// characters.
func CheckParam(k, v string) error {
	ok := k != "" && len(k) <= maxName
	for _, c := range []byte(k) {
		ok = ok && (c == '_' || c == '.' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z')
	}
	if !ok {
		return fmt.Errorf("param %s: want a key of letters, digits, '.', '-' or '_' (at most %d)", verify.Printable(k), maxName)
	}
	if len(v) > maxValue || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
		return fmt.Errorf("param %s: value longer than %d bytes, not UTF-8 or holds control characters", k, maxValue)
	}
	return nil
}

// InputEnv returns the environment variables that carry input name's
// mountpoint: PINFS_INPUT_<name>, and PINFS_INPUT_<NAME> in upper case
// when that differs.
func InputEnv(name string) []string {
	envs := []string{"PINFS_INPUT_" + name}
	if up := strings.ToUpper(name); up != name {
		envs = append(envs, "PINFS_INPUT_"+up)
	}
	return envs
}

// ParamEnv returns the environment variable that carries parameter key:
// PINFS_PARAM_ and the key in upper case, "." and "-" turned into "_".
func ParamEnv(key string) string {
	return "PINFS_PARAM_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(key))
}

// badRune reports space and control characters.
func badRune(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }
