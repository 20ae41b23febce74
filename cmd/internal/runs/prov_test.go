package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pinfs/pinfs/cmd/internal/runrecord"
)

// provRequired is, for each PROV-JSON relation, the keys the PROV-JSON
// schema (https://www.w3.org/submissions/prov-json/schema) requires of it,
// and whether it admits keys beyond its formal ones (attributes).
var provRequired = map[string]struct {
	keys       []string
	formal     []string // every key the relation defines
	attributes bool
}{
	"wasGeneratedBy":    {[]string{"prov:entity"}, []string{"prov:entity", "prov:activity", "prov:time"}, true},
	"used":              {[]string{"prov:activity"}, []string{"prov:entity", "prov:activity", "prov:time"}, true},
	"wasInformedBy":     {[]string{"prov:informed", "prov:informant"}, []string{"prov:informed", "prov:informant"}, true},
	"wasStartedBy":      {[]string{"prov:activity"}, []string{"prov:activity", "prov:trigger", "prov:starter", "prov:time"}, true},
	"wasEndedBy":        {[]string{"prov:activity"}, []string{"prov:activity", "prov:trigger", "prov:ender", "prov:time"}, true},
	"wasInvalidatedBy":  {[]string{"prov:entity"}, []string{"prov:entity", "prov:activity", "prov:time"}, true},
	"wasDerivedFrom":    {[]string{"prov:generatedEntity", "prov:usedEntity"}, []string{"prov:generatedEntity", "prov:usedEntity", "prov:activity", "prov:generation", "prov:usage"}, true},
	"wasAttributedTo":   {[]string{"prov:entity", "prov:agent"}, []string{"prov:entity", "prov:agent"}, true},
	"wasAssociatedWith": {[]string{"prov:activity"}, []string{"prov:activity", "prov:agent", "prov:plan"}, true},
	"actedOnBehalfOf":   {[]string{"prov:delegate", "prov:responsible"}, []string{"prov:delegate", "prov:responsible", "prov:activity"}, true},
	"wasInfluencedBy":   {[]string{"prov:influencer", "prov:influencee"}, []string{"prov:influencer", "prov:influencee"}, true},
	"specializationOf":  {[]string{"prov:specificEntity", "prov:generalEntity"}, []string{"prov:specificEntity", "prov:generalEntity"}, false},
	"alternateOf":       {[]string{"prov:alternate1", "prov:alternate2"}, []string{"prov:alternate1", "prov:alternate2"}, false},
	"hadMember":         {[]string{"prov:collection", "prov:entity"}, []string{"prov:collection", "prov:entity"}, false},
}

// provRefs says which kind of record each formal key of a relation names.
var provRefs = map[string]string{
	"prov:activity": "activity", "prov:entity": "entity", "prov:agent": "agent", "prov:collection": "entity",
	"prov:generatedEntity": "entity", "prov:usedEntity": "entity", "prov:informed": "activity", "prov:informant": "activity",
	"prov:delegate": "agent", "prov:responsible": "agent", "prov:plan": "entity",
}

var (
	prefixName = regexp.MustCompile(`^[a-zA-Z0-9_\-]+$`)
	qnameRe    = regexp.MustCompile(`^([a-zA-Z0-9_\-]+):(\S+)$`)
)

// checkPROV checks doc against the PROV-JSON structure: known top-level
// keys, the required keys of every relation (and no keys beyond the formal
// ones where the schema admits none), every QName's prefix declared (only
// relation ids may be blank, "_:"), every reference naming a record of the
// right kind, and typed literals with "$" and "type". It returns doc
// decoded and what is wrong with it.
func provProblems(b []byte) (doc map[string]map[string]map[string]any, problems []string) {
	errorf := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, []string{err.Error()}
	}
	var prefix map[string]string
	if err := json.Unmarshal(raw["prefix"], &prefix); err != nil || len(prefix) == 0 {
		return nil, []string{fmt.Sprintf("prefix: %v %s", err, raw["prefix"])}
	}
	for p, uri := range prefix {
		if !prefixName.MatchString(p) || !strings.HasPrefix(uri, "http") {
			errorf("prefix %q: %q", p, uri)
		}
	}
	qn := func(where, q string, blank bool) {
		m := qnameRe.FindStringSubmatch(q)
		switch {
		case m == nil:
			errorf("%s: %q is not a QName", where, q)
		case m[1] == "_" && blank:
		case prefix[m[1]] == "":
			errorf("%s: prefix of %q not declared", where, q)
		}
	}
	var literal func(where string, v any)
	literal = func(where string, v any) {
		switch v := v.(type) {
		case []any:
			for _, x := range v {
				literal(where, x)
			}
		case map[string]any:
			typ, ok := v["type"].(string)
			if _, has := v["$"]; !has || !ok || len(v) > 3 {
				errorf("%s: typed literal %v", where, v)
				return
			}
			qn(where, typ, false)
			if typ == "prov:QUALIFIED_NAME" {
				qn(where, fmt.Sprint(v["$"]), false)
			}
		}
	}
	doc = map[string]map[string]map[string]any{}
	for kind, r := range raw {
		if kind == "prefix" {
			continue
		}
		_, relation := provRequired[kind]
		if !relation && kind != "entity" && kind != "activity" && kind != "agent" {
			errorf("unknown top-level key %q", kind)
			continue
		}
		var recs map[string]map[string]any
		if err := json.Unmarshal(r, &recs); err != nil {
			errorf("%s: %v", kind, err)
			continue
		}
		doc[kind] = recs
		for id, rec := range recs {
			qn(kind, id, relation)
			for k, v := range rec {
				qn(kind+" "+id, k, false)
				literal(kind+" "+id+" "+k, v)
			}
		}
	}
	for kind, req := range provRequired {
		for id, rec := range doc[kind] {
			for _, k := range req.keys {
				if _, ok := rec[k]; !ok {
					errorf("%s %s lacks %s", kind, id, k)
				}
			}
			for k, v := range rec {
				if !slices.Contains(req.formal, k) {
					if !req.attributes {
						errorf("%s %s: key %s not allowed", kind, id, k)
					}
					continue
				}
				target, ok := provRefs[k]
				if !ok {
					continue
				}
				refs, _ := v.([]any)
				if s, ok := v.(string); ok {
					refs = []any{s}
				}
				if len(refs) == 0 {
					errorf("%s %s: %s is %v", kind, id, k, v)
				}
				for _, ref := range refs {
					if _, ok := doc[target][fmt.Sprint(ref)]; !ok {
						errorf("%s %s: %s %v is no %s", kind, id, k, ref, target)
					}
				}
			}
		}
	}
	return doc, problems
}

// checkPROV fails t on every problem of PROV-JSON document b and returns
// the document decoded.
func checkPROV(t *testing.T, b []byte) map[string]map[string]map[string]any {
	t.Helper()
	doc, problems := provProblems(b)
	for _, p := range problems {
		t.Error(p)
	}
	if doc == nil {
		t.FailNow()
	}
	return doc
}

func TestExportPROVFollowsTheSpec(t *testing.T) {
	tab := testTable(t)
	run := testRun()
	run.Permit = &runrecord.Permit{RunID: "r1", Digest: testDigest, Purpose: "train", Gate: "prod", Generation: 3,
		Approvals: []string{"key-1", "key-2"}, Time: at(0)}
	r, s := showAndConsumed(t, run, tab, at(100), dead, false)
	b, err := ExportPROV(r, tab, s)
	if err != nil {
		t.Fatal(err)
	}
	doc := checkPROV(t, b)

	snap := "snapshot:" + testDigest.Hex()
	if e := doc["entity"][snap]; e == nil || e["pinfs:digest"] != string(testDigest) {
		t.Fatalf("snapshot entity %v", e)
	}
	// Exactly the consumed members, with their version and bytes, used
	// by the run and members of the snapshot.
	used := map[string]bool{}
	for _, u := range doc["used"] {
		if u["prov:activity"] != "run:r1" {
			t.Fatalf("used %v", u)
		}
		used[fmt.Sprint(u["prov:entity"])] = true
	}
	var members []string
	for id := range doc["entity"] {
		if id != snap {
			members = append(members, id)
		}
	}
	slices.Sort(members)
	if fmt.Sprint(members) != "[member:0 member:1 member:2 member:3]" || len(used) != 5 || !used[snap] {
		t.Fatalf("member entities %v, used %v", members, used)
	}
	for _, id := range members {
		if !used[id] {
			t.Errorf("%s not used", id)
		}
	}
	if m := doc["entity"]["member:1"]; m["pinfs:version"] != "cas:"+tab.Digest(1) || m["pinfs:bytes"] != 5000.0 || m["pinfs:full"] != true || m["pinfs:path"] != "a/y.bin" {
		t.Fatalf("member:1 %v", m)
	}
	if m := doc["entity"]["member:0"]; m["pinfs:version"] != "v-x" || m["pinfs:full"] != false {
		t.Fatalf("member:0 %v", m)
	}
	if len(doc["hadMember"]) != 1 {
		t.Fatalf("hadMember %v", doc["hadMember"])
	}
	for _, h := range doc["hadMember"] {
		if h["prov:collection"] != snap || fmt.Sprint(h["prov:entity"]) != "[member:0 member:1 member:2 member:3]" {
			t.Fatalf("hadMember %v", h)
		}
	}
	a := doc["activity"]["run:r1"]
	if a["prov:startTime"] != "2025-03-01T12:00:01Z" || a["prov:endTime"] != "2025-03-01T12:01:00Z" {
		t.Fatalf("activity %v", a)
	}
	// Agents: both hosts and the permit, each associated with the run.
	var agents []string
	for _, w := range doc["wasAssociatedWith"] {
		agents = append(agents, fmt.Sprint(w["prov:agent"]))
	}
	slices.Sort(agents)
	if fmt.Sprint(agents) != "[host:h1 host:h2 permit:r1]" || len(doc["agent"]) != 3 {
		t.Fatalf("associated agents %v, agents %v", agents, doc["agent"])
	}
	if p := doc["agent"]["permit:r1"]; fmt.Sprint(p["pinfs:approvals"]) != "[key-1 key-2]" || p["pinfs:purpose"] != "train" {
		t.Fatalf("permit agent %v", p)
	}

	// The same input gives the same bytes.
	again, _ := ExportPROV(r, tab, s)
	if !bytes.Equal(b, again) {
		t.Fatal("two exports differ")
	}
}

func TestExportPROVOfARunStillGoing(t *testing.T) {
	tab := testTable(t)
	run := &runrecord.Run{RunID: "odd id/with space", Digest: testDigest, Events: []runrecord.Event{event(runrecord.RunStart, 1, "host one", 1)}}
	r, s := showAndConsumed(t, run, tab, at(2), func(*runrecord.Mount) (bool, bool) { return true, true }, false)
	b, err := ExportPROV(r, tab, s)
	if err != nil {
		t.Fatal(err)
	}
	doc := checkPROV(t, b)
	for id, a := range doc["activity"] {
		if _, ok := a["prov:endTime"]; ok || a["prov:startTime"] == nil || id != "run:odd%20id%2Fwith%20space" {
			t.Fatalf("activity %s %v", id, a)
		}
	}
	if len(doc["entity"]) != 1 || doc["hadMember"] != nil {
		t.Fatalf("entities %v, hadMember %v", doc["entity"], doc["hadMember"])
	}
}

// TestCheckPROVFailsOnBrokenDocuments makes sure the structure check can
// fail: each document breaks one rule.
func TestCheckPROVFailsOnBrokenDocuments(t *testing.T) {
	for name, doc := range map[string]string{
		"used without activity":     `{"prefix":{"ex":"http://e/"},"entity":{"ex:e":{}},"used":{"_:u":{"prov:entity":"ex:e"}}}`,
		"undeclared prefix":         `{"prefix":{"ex":"http://e/"},"entity":{"zz:e":{}}}`,
		"reference to nothing":      `{"prefix":{"ex":"http://e/"},"activity":{"ex:a":{}},"used":{"_:u":{"prov:activity":"ex:a","prov:entity":"ex:e"}}}`,
		"hadMember with attributes": `{"prefix":{"ex":"http://e/"},"entity":{"ex:c":{},"ex:e":{}},"hadMember":{"_:m":{"prov:collection":"ex:c","prov:entity":"ex:e","ex:x":1}}}`,
		"blank entity":              `{"prefix":{"ex":"http://e/"},"entity":{"_:e":{}}}`,
		"bad typed literal":         `{"prefix":{"ex":"http://e/"},"entity":{"ex:e":{"prov:type":{"$":"ex:T"}}}}`,
	} {
		if _, problems := provProblems([]byte(doc)); len(problems) == 0 {
			t.Errorf("%s: passed", name)
		}
	}
}
