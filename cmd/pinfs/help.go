package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// helpWidth is the width flag help is wrapped to.
const helpWidth = 100

// flagUsages is the Flags section of a command's help: one entry per flag
// of fs, "--name PLACEHOLDER" (the back-quoted word of its usage; none for
// a boolean), its usage wrapped beside it, and its default unless that is
// the zero value. It replaces pflag's FlagUsages, which writes a boolean
// as --name[=true|false] and names a placeholder after the flag's Go type
// (string, uint32, size) when the usage has no back-quoted word.
func flagUsages(fs *pflag.FlagSet) string {
	type entry struct{ left, usage string }
	var es []entry
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		left := "      --" + f.Name
		if f.Shorthand != "" {
			left = "  -" + f.Shorthand + ", --" + f.Name
		}
		name, usage := pflag.UnquoteUsage(f)
		if !isBoolFlag(f) && name != "" {
			left += " " + name
		}
		if d := defaultText(f); d != "" {
			usage += " (default " + d + ")"
		}
		es = append(es, entry{left, usage})
		width = max(width, len(left))
	})
	var b strings.Builder
	for _, e := range es {
		indent := width + 3
		lines := wrapWords(e.usage, max(helpWidth-indent, 40))
		fmt.Fprintf(&b, "%-*s%s\n", indent, e.left, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%*s%s\n", indent, "", l)
		}
	}
	return b.String()
}

// isBoolFlag reports whether f is a boolean flag: given alone it is true.
func isBoolFlag(f *pflag.Flag) bool {
	return f.Value.Type() == "bool" && f.NoOptDefVal == "true"
}

// defaultText is f's default as help shows it, or "" when it is the zero
// value of its type (or, for a boolean, false).
func defaultText(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "0", "0s", "false", "[]", "<nil>":
		return ""
	}
	if f.Value.Type() == "string" {
		return fmt.Sprintf("%q", f.DefValue)
	}
	return f.DefValue
}

// wrapWords breaks s into lines of at most width bytes at spaces (a word
// longer than width gets a line of its own).
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) > width:
			lines = append(lines, line)
			line = w
		default:
			line += " " + w
		}
	}
	return append(lines, line)
}
