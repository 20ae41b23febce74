package jcs_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pinfs/pinfs/verify/jcs"
)

// appendixB is the number serialization table of RFC 8785 Appendix B:
// IEEE-754 bit patterns and the text ECMAScript prints for them. NaN and
// the infinities of that table are in TestNumberRefused.
var appendixB = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"}, // -0
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"},
}

func TestFormatFloatAppendixB(t *testing.T) {
	for _, tc := range appendixB {
		f := math.Float64frombits(tc.bits)
		// The vector itself must be right: its text parses back to the
		// same double (or to ±0 for the zero rows).
		if p, err := strconv.ParseFloat(tc.want, 64); err != nil || (p != f && !(p == 0 && f == 0)) {
			t.Fatalf("bad test vector %016x %s: parses to %v, %v", tc.bits, tc.want, p, err)
		}
		if got := jcs.FormatFloat(f); got != tc.want {
			t.Errorf("FormatFloat(%016x) = %s, want %s", tc.bits, got, tc.want)
		}
		// The same number through the JSON path, written in Go's own
		// (different) shortest notation.
		lit := strconv.FormatFloat(f, 'g', -1, 64)
		if got, err := jcs.Canonicalize([]byte(lit)); err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", lit, got, err, tc.want)
		}
	}
}

func TestNumber(t *testing.T) {
	for lit, want := range map[string]string{
		"-0":                      "0",
		"-0.0e10":                 "0",
		"0.0":                     "0",
		"1E+2":                    "100",
		"1e2":                     "100",
		"4.50":                    "4.5",
		"2e-3":                    "0.002",
		"1e-7":                    "1e-7",
		"0.000001":                "0.000001",
		"1e21":                    "1e+21",
		"1e20":                    "100000000000000000000",
		"123456789012345678901":   "123456789012345680000",
		"12345678901234567890":    "12345678901234567000",
		"9007199254740993":        "9007199254740992", // rounds to even
		"1E30":                    "1e+30",
		"0.000000000000000000001": "1e-21",
		"-1.5e-9":                 "-1.5e-9",
		"5e-324":                  "5e-324",
		"1e-400":                  "0", // underflows to 0 as in ECMAScript
		"333333333.33333329":      "333333333.3333333",
	} {
		got, err := jcs.Number(lit)
		if err != nil || got != want {
			t.Errorf("Number(%s) = %q, %v; want %s", lit, got, err, want)
		}
	}
}

func TestNumberRefused(t *testing.T) {
	for _, lit := range []string{"1e400", "-1e400", "1e309", "1.8e308", "NaN", "Infinity", "-Infinity", "", "0x10"} {
		if got, err := jcs.Number(lit); err == nil {
			t.Errorf("Number(%q) = %q, want error", lit, got)
		}
	}
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		lit := strconv.FormatFloat(math.Float64frombits(bits), 'g', -1, 64)
		if got, err := jcs.Number(lit); err == nil {
			t.Errorf("Number(%s) = %q, want error", lit, got)
		}
	}
}

// TestRFCExample is the example of RFC 8785 §3.2.2 (also testdata/values in
// the RFC author's reference implementation).
func TestRFCExample(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	checkCanonical(t, in, want)
	// RFC 8785 §3.2.4 gives the result as UTF-8 bytes.
	wantHex := "7b226c69746572616c73223a5b6e756c6c2c747275652c66616c73655d2c226e" +
		"756d62657273223a5b3333333333333333332e333333333333332c31652b3330" +
		"2c342e352c302e3030322c31652d32375d2c22737472696e67223a22e282ac24" +
		"5c75303030665c6e4127425c225c5c5c5c5c222f227d"
	got, _ := jcs.Canonicalize([]byte(in))
	if h := hex.EncodeToString(got); h != wantHex {
		t.Errorf("UTF-8 of the result\n got %s\nwant %s", h, wantHex)
	}
}

// TestRFCSorting is the property sorting example of RFC 8785 §3.2.3: names
// sort by UTF-16 code units, so U+1F600 (a surrogate pair starting 0xD83D)
// sorts before U+FB33.
func TestRFCSorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{" + strings.Join([]string{
		`"\r":"Carriage Return"`,
		`"1":"One"`,
		"\"\u0080\":\"Control\"",
		`"ö":"Latin Small Letter O With Diaeresis"`,
		`"€":"Euro Sign"`,
		`"😀":"Emoji: Grinning Face"`,
		"\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"",
	}, ",") + "}"
	checkCanonical(t, in, want)
}

// TestReferenceTestdata are the input/output pairs of the testdata directory
// of the RFC author's reference implementation (cyberphone/json-canonicalization).
func TestReferenceTestdata(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"arrays", `[
  56,
  {
    "d": true,
    "10": null,
    "1": [ ]
  }
]`, `[56,{"1":[],"10":null,"d":true}]`},
		{"french", `{
  "peach": "This sorting order",
  "péché": "is wrong according to French",
  "pêche": "but canonicalization MUST",
  "sin":   "ignore locale"
}`, `{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ignore locale"}`},
		{"structures", `{
  "1": {"f": {"f": "hi","F": 5} ,"\n": 56.0},
  "10": { },
  "": "empty",
  "a": { },
  "111": [ {"e": "yes","E": "no" } ],
  "A": { }
}`, `{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],"A":{},"a":{}}`},
		{"unicode", `{"Unnormalized Unicode":"A\u030a"}`, "{\"Unnormalized Unicode\":\"A\u030a\"}"},
		{"weird", `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\u000a": "Newline",
  "1": "One",
  "\u0080": "Control\u007f",
  "\ud83d\ude02": "Smiley",
  "\u00f6": "Latin Small Letter O With Diaeresis",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "</script>": "Browser Challenge"
}`, "{\"\\n\":\"Newline\",\"\\r\":\"Carriage Return\",\"1\":\"One\",\"</script>\":\"Browser Challenge\",\"\u0080\":\"Control\u007f\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😂\":\"Smiley\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkCanonical(t, tc.in, tc.want) })
	}
}

func TestStrings(t *testing.T) {
	for in, want := range map[string]string{
		`"\u0000"`:         `"\u0000"`,
		`"\u001F"`:         `"\u001f"`,
		`"\b\f\n\r\t"`:     `"\b\f\n\r\t"`,
		`"\u0008"`:         `"\b"`,
		`"\/"`:             `"/"`,
		`"\u0041"`:         `"A"`,
		`"\u007f"`:         "\"\x7f\"",
		`"\u2028\u2029"`:   "\"\u2028\u2029\"", // not escaped, unlike encoding/json
		`"<>&"`:            `"<>&"`,
		`"\u003c"`:         `"<"`,
		`"\uD83D\uDE00"`:   `"😀"`,
		`"\ufeff"`:         "\"\ufeff\"",
		`"\\ud800"`:        `"\\ud800"`, // an escaped backslash, then text
		`"\\\ud83d\ude00"`: `"\\😀"`,
		" \t\r\n\"x\" \n":  `"x"`,
	} {
		checkCanonical(t, in, want)
	}
	// AppendString agrees with Canonicalize on every control character.
	for c := rune(0); c < 0x80; c++ {
		s := string(c)
		lit, _ := json.Marshal(s)
		want, err := jcs.Canonicalize(lit)
		if err != nil {
			t.Fatal(err)
		}
		if got := jcs.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestLiteralsAndNesting(t *testing.T) {
	for in, want := range map[string]string{
		`null`:                          `null`,
		` true `:                        `true`,
		`false`:                         `false`,
		`[]`:                            `[]`,
		`{}`:                            `{}`,
		`[ [ [ ] ] , { } ]`:             `[[[]],{}]`,
		`{"b":[{"z":1,"y":2}],"a":{}}`:  `{"a":{},"b":[{"y":2,"z":1}]}`,
		`{"a":1,"A":2,"aa":3,"":4}`:     `{"":4,"A":2,"a":1,"aa":3}`,
		`{"\ud800\udc00":1,"\uffff":2}`: "{\"\U00010000\":1,\"\uffff\":2}",
	} {
		checkCanonical(t, in, want)
	}
}

func TestRefused(t *testing.T) {
	for name, in := range map[string]string{
		"empty":                 ``,
		"only white space":      " \n\t",
		"duplicate key":         `{"a":1,"a":2}`,
		"duplicate nested key":  `[{"x":{"a":1,"b":2,"a":1}}]`,
		"duplicate via escape":  `{"a":1,"\u0061":2}`,
		"invalid UTF-8":         "\"\xff\"",
		"invalid UTF-8 key":     "{\"\xc3\":1}",
		"truncated UTF-8":       "\"\xe2\x82\"",
		"overlong UTF-8":        "\"\xc0\xaf\"",
		"UTF-8 surrogate":       "\"\xed\xa0\x80\"",
		"lone high surrogate":   `"\ud800"`,
		"lone low surrogate":    `"\udc00"`,
		"high then non-low":     `"\ud83d\u0041"`,
		"high then text":        `"\ud83dx"`,
		"reversed pair":         `"\ude00\ud83d"`,
		"lone surrogate key":    `{"\uDBFF":1}`,
		"overflow":              `1e400`,
		"negative overflow":     `[-1e400]`,
		"overflow in object":    `{"a":1.8e308}`,
		"NaN":                   `NaN`,
		"Infinity":              `[Infinity]`,
		"trailing value":        `{} {}`,
		"trailing number":       `1 2`,
		"trailing garbage":      `{"a":1}x`,
		"trailing bracket":      `[1]]`,
		"trailing brace":        `{"a":1} }`,
		"trailing comma":        `"a",`,
		"trailing NUL":          "{}\x00",
		"comma in array":        `[1,]`,
		"comma in object":       `{"a":1,}`,
		"missing value":         `{"a"}`,
		"leading zero":          `01`,
		"bare fraction":         `.5`,
		"plus sign":             `+1`,
		"single quotes":         `'a'`,
		"raw control character": "\"a\x01\"",
		"bad escape":            `"\x41"`,
		"bad unicode escape":    `"\u00zz"`,
		"unterminated":          `{"a":[1,2`,
		"non-string key":        `{1:2}`,
	} {
		if got, err := jcs.Canonicalize([]byte(in)); err == nil {
			t.Errorf("%s: Canonicalize(%q) = %q, want error", name, in, got)
		}
	}
}

func TestMarshal(t *testing.T) {
	got, err := jcs.Marshal(map[string]any{"b": 1.0, "a": []any{"<", -0.0, 1e21}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":["<",0,1e+21],"b":1}`; string(got) != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	if _, err := jcs.Marshal(math.Inf(1)); err == nil {
		t.Error("Marshal(+Inf) succeeded")
	}
}

// checkCanonical checks that in canonicalizes to want and that want is a
// fixed point.
func checkCanonical(t testing.TB, in, want string) {
	t.Helper()
	got, err := jcs.Canonicalize([]byte(in))
	if err != nil {
		t.Errorf("Canonicalize(%q): %v", in, err)
		return
	}
	if string(got) != want {
		t.Errorf("Canonicalize(%q)\n got %q\nwant %q", in, got, want)
	}
	again, err := jcs.Canonicalize([]byte(want))
	if err != nil || string(again) != want {
		t.Errorf("Canonicalize(%q) = %q, %v; canonical text must be a fixed point", want, again, err)
	}
}

// FuzzCanonicalize checks, for every input Canonicalize accepts, that the
// output is valid JSON and valid UTF-8, is a fixed point, and means the same
// as the input to an independent decoder (encoding/json, numbers as float64).
func FuzzCanonicalize(f *testing.F) {
	for _, tc := range appendixB {
		f.Add([]byte(strconv.FormatFloat(math.Float64frombits(tc.bits), 'g', -1, 64)))
		f.Add([]byte(tc.want))
	}
	for _, s := range []string{
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"\u20ac":"Euro Sign","\r":"CR","\ufb33":"Dalet","1":"One","\ud83d\ude00":"Emoji","\u0080":"Control","\u00f6":"o"}`,
		`{"1":{"f":{"f":"hi","F":5},"\n":56.0},"10":{},"":"empty","a":{},"111":[{"e":"yes","E":"no"}],"A":{}}`,
		`[56,{"d":true,"10":null,"1":[]}]`,
		`{"a":1,"a":2}`, `"\ud800"`, `1e400`, `{} x`, "\"\xff\"", `-0`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := jcs.Canonicalize(in)
		if err != nil {
			return
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q: not valid JSON/UTF-8", in, out)
		}
		again, err := jcs.Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonicalize(%q) = %q, but Canonicalize of that = %q, %v", in, out, again, err)
		}
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatalf("Canonicalize accepted %q, encoding/json refuses it: %v", in, err)
		}
		if err := json.Unmarshal(out, &vout); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("Canonicalize(%q) = %q changes the value:\n%#v\n%#v", in, out, vin, vout)
		}
	})
}
