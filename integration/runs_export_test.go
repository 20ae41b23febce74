package integration

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinfs/pinfs/verify/b3"
)

// checkExports checks run export in both formats against the report of
// run show --json and the consumed set the test expects.
func (c *runsCase) checkExports(t *testing.T, runID string, rep showReport, want consumedWant) {
	t.Helper()
	var prov map[string]any
	out := c.pinfsRun(t, 0, "export", runID, "--format", "prov").stdout
	if err := json.Unmarshal([]byte(out), &prov); err != nil {
		t.Fatalf("run export --format prov is not JSON: %v\n%s", err, out)
	}
	checkPROVJSON(t, prov)
	c.checkPROVContent(t, prov, runID, want)

	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			BuildDefinition struct {
				ResolvedDependencies []struct {
					Name   string            `json:"name"`
					URI    string            `json:"uri"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Metadata struct {
					InvocationID string `json:"invocationId"`
				} `json:"metadata"`
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	out = c.pinfsRun(t, 0, "export", runID, "--format", "intoto").stdout
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("run export --format intoto is not JSON: %v\n%s", err, out)
	}
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" ||
		len(st.Subject) != 1 || st.Subject[0].Name != "pinfs-run:"+runID || !hex64.MatchString(st.Subject[0].Digest["sha256"]) ||
		st.Predicate.RunDetails.Metadata.InvocationID != runID {
		t.Errorf("in-toto statement: want _type Statement/v1, SLSA provenance v1, one subject pinfs-run:%s with a sha256, invocation %s:\n%s", runID, runID, out)
	}
	deps := map[string]bool{}
	for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
		deps[d.Digest["sha256"]] = true
	}
	manifest, set := strings.TrimPrefix(c.f.digest, "sha256:"), strings.TrimPrefix(rep.Consumed.Digest, "sha256:")
	if !deps[manifest] || !deps[set] || manifest == set {
		t.Errorf("in-toto resolvedDependencies lack the manifest digest %s or the consumed set digest %s:\n%s", manifest, set, out)
	}
}

// provRelations are PROV-JSON's relations with the keys their records
// must have, from the JSON schema of the W3C submission
// (https://www.w3.org/submissions/prov-json/); closed ones take no other
// keys.
var provRelations = map[string]struct {
	required []string
	closed   bool
}{
	"wasGeneratedBy":         {required: []string{"prov:entity"}},
	"used":                   {required: []string{"prov:activity"}},
	"wasStartedBy":           {required: []string{"prov:activity"}},
	"wasEndedBy":             {required: []string{"prov:activity"}},
	"wasInformedBy":          {required: []string{"prov:informed", "prov:informant"}},
	"wasInvalidatedBy":       {required: []string{"prov:entity"}},
	"wasDerivedFrom":         {required: []string{"prov:generatedEntity", "prov:usedEntity"}},
	"wasAttributedTo":        {required: []string{"prov:entity", "prov:agent"}},
	"wasAssociatedWith":      {required: []string{"prov:activity"}},
	"actedOnBehalfOf":        {required: []string{"prov:delegate", "prov:responsible"}},
	"wasInfluencedBy":        {required: []string{"prov:influencer", "prov:influencee"}},
	"specializationOf":       {required: []string{"prov:specificEntity", "prov:generalEntity"}, closed: true},
	"alternateOf":            {required: []string{"prov:alternate1", "prov:alternate2"}, closed: true},
	"hadMember":              {required: []string{"prov:collection", "prov:entity"}, closed: true},
	"mentionOf":              {required: []string{"prov:specificEntity", "prov:generalEntity", "prov:bundle"}, closed: true},
	"hadDictionaryMember":    {required: []string{"prov:dictionary", "prov:key-entity-set"}, closed: true},
	"derivedByInsertionFrom": {required: []string{"prov:after", "prov:before", "prov:key-entity-set"}},
	"derivedByRemovalFrom":   {required: []string{"prov:after", "prov:before", "prov:key-set"}},
}

// provRefs are the relation keys whose value names an element, and the
// kind of element it must be in this document.
var provRefs = map[string]string{
	"prov:entity": "entity", "prov:activity": "activity", "prov:agent": "agent",
	"prov:generatedEntity": "entity", "prov:usedEntity": "entity", "prov:collection": "entity",
	"prov:informed": "activity", "prov:informant": "activity", "prov:delegate": "agent", "prov:responsible": "agent",
	"prov:specificEntity": "entity", "prov:generalEntity": "entity", "prov:alternate1": "entity", "prov:alternate2": "entity",
	"prov:trigger": "entity", "prov:starter": "activity", "prov:ender": "activity", "prov:plan": "entity",
}

// checkPROVJSON checks doc's structure against PROV-JSON: known
// top-level keys; declared prefixes that map to absolute IRIs; every
// identifier, attribute name and qualified-name value under a declared
// prefix (or prov, xsd, and _ for a relation's blank id); relation
// records with their required keys, referring to elements of the right
// kind; literal attribute values; date-times where PROV wants them.
func checkPROVJSON(t *testing.T, doc map[string]any) {
	t.Helper()
	prefixes, _ := doc["prefix"].(map[string]any)
	for p, iri := range prefixes {
		u, err := url.Parse(fmt.Sprint(iri))
		if !regexp.MustCompile(`^[a-zA-Z0-9_\-]+$`).MatchString(p) || err != nil || !u.IsAbs() {
			t.Errorf("prefix %q: %v is not an absolute IRI", p, iri)
		}
	}
	qname := func(where, s string, blankOK bool) {
		pre, _, ok := strings.Cut(s, ":")
		switch {
		case !ok:
			if _, ok := prefixes["default"]; !ok {
				t.Errorf("%s: %q has no prefix and no default namespace is declared", where, s)
			}
		case pre == "prov" || pre == "xsd" || pre == "_" && blankOK || prefixes[pre] != nil:
		default:
			t.Errorf("%s: %q uses the undeclared prefix %q", where, s, pre)
		}
	}
	elements := map[string]map[string]any{}
	for _, kind := range []string{"entity", "activity", "agent"} {
		m, ok := doc[kind].(map[string]any)
		if !ok {
			t.Errorf("PROV-JSON without %q: %v", kind, doc[kind])
		}
		elements[kind] = m
		for id, rec := range m {
			qname(kind, id, false)
			attrs, ok := rec.(map[string]any)
			if !ok {
				t.Errorf("%s %s: %v is not an object", kind, id, rec)
			}
			for k, v := range attrs {
				qname(kind+" "+id, k, false)
				checkLiteral(t, kind+" "+id+" "+k, v, qname)
			}
			for _, k := range []string{"prov:startTime", "prov:endTime"} {
				if v, ok := attrs[k]; ok {
					checkTime(t, kind+" "+id+" "+k, v)
				}
			}
		}
	}
	for key, v := range doc {
		if key == "prefix" || key == "entity" || key == "activity" || key == "agent" || key == "bundle" {
			continue
		}
		rel, ok := provRelations[key]
		if !ok {
			t.Errorf("PROV-JSON has the unknown top-level key %q", key)
			continue
		}
		m, _ := v.(map[string]any)
		for id, r := range m {
			qname(key, id, true)
			recs, ok := r.([]any) // several records may share an id
			if !ok {
				recs = []any{r}
			}
			for _, r := range recs {
				rec, _ := r.(map[string]any)
				for _, k := range rel.required {
					if _, ok := rec[k]; !ok {
						t.Errorf("%s %s lacks the required %s: %v", key, id, k, rec)
					}
				}
				for k, val := range rec {
					qname(key+" "+id, k, false)
					if kind, ok := provRefs[k]; ok {
						refs, ok := val.([]any) // hadMember's prov:entity may be a list
						if !ok {
							refs = []any{val}
						}
						for _, ref := range refs {
							s, _ := ref.(string)
							qname(key+" "+id+" "+k, s, false)
							if _, ok := elements[kind][s]; !ok {
								t.Errorf("%s %s: %s %v is no %s of the document", key, id, k, ref, kind)
							}
						}
					} else if k == "prov:time" {
						checkTime(t, key+" "+id, val)
					} else if rel.closed && !slices.Contains(rel.required, k) {
						t.Errorf("%s %s: key %s is not allowed there", key, id, k)
					} else {
						checkLiteral(t, key+" "+id+" "+k, val, qname)
					}
				}
			}
		}
	}
}

// checkLiteral checks that v is a PROV-JSON literal: a string, number or
// boolean, a typed value {"$", "type"[, "lang"]} whose type is a
// qualified name, or a list of those.
func checkLiteral(t *testing.T, where string, v any, qname func(where, s string, blankOK bool)) {
	t.Helper()
	switch v := v.(type) {
	case string, float64, bool:
	case []any:
		for _, x := range v {
			if _, ok := x.([]any); ok {
				t.Errorf("%s: a list inside a list", where)
			}
			checkLiteral(t, where, x, qname)
		}
	case map[string]any:
		typ, ok := v["type"].(string)
		_, hasValue := v["$"]
		if !ok || !hasValue {
			t.Errorf("%s: typed literal %v needs \"$\" and \"type\"", where, v)
		}
		qname(where, typ, false)
		for k := range v {
			if k != "$" && k != "type" && k != "lang" {
				t.Errorf("%s: typed literal %v has key %q", where, v, k)
			}
		}
	default:
		t.Errorf("%s: %v is not a literal", where, v)
	}
}

// checkTime checks that v is an RFC 3339 date-time, plain or typed.
func checkTime(t *testing.T, where string, v any) {
	t.Helper()
	if m, ok := v.(map[string]any); ok {
		v = m["$"]
	}
	s, _ := v.(string)
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		t.Errorf("%s: %v is not a date-time", where, v)
	}
}

// values returns the string values of an element's attributes.
func values(rec any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			walk(v["$"])
		}
	}
	if m, ok := rec.(map[string]any); ok {
		for _, v := range m {
			walk(v)
		}
	}
	return out
}

// checkPROVContent checks what the PROV document says: the run is the one
// activity, the snapshot is an entity, every consumed member is an entity
// with its digest and version that the run used, no other member is one,
// and this host is an agent associated with the run.
func (c *runsCase) checkPROVContent(t *testing.T, doc map[string]any, runID string, want consumedWant) {
	t.Helper()
	acts, _ := doc["activity"].(map[string]any)
	var run string
	for id, rec := range acts {
		if strings.Contains(id, runID) {
			run = id
			if m, _ := rec.(map[string]any); m["prov:startTime"] == nil {
				t.Errorf("activity %s has no prov:startTime: %v", id, rec)
			}
		}
	}
	if len(acts) != 1 || run == "" {
		t.Fatalf("PROV activities %v: want exactly the run %s", acts, runID)
	}
	has := func(rec any, s string) bool { return slices.Contains(values(rec), s) }
	entities, _ := doc["entity"].(map[string]any)
	snapshot := false
	byDigest := map[string]string{} // member digest -> entity id
	for id, rec := range entities {
		member := false
		for p := range c.f.data {
			if d := b3.Of(c.f.data[p]).String(); has(rec, d) {
				byDigest[d], member = id, true
			}
		}
		for _, v := range append(values(rec), id) {
			snapshot = snapshot || !member && strings.Contains(v, strings.TrimPrefix(c.f.digest, "sha256:"))
		}
	}
	if !snapshot {
		t.Errorf("no PROV entity names the snapshot %s: %v", c.f.digest, entities)
	}
	used := map[string]bool{}
	uses, _ := doc["used"].(map[string]any)
	for _, u := range uses {
		if m, _ := u.(map[string]any); m["prov:activity"] == run {
			used[fmt.Sprint(m["prov:entity"])] = true
		}
	}
	for p := range c.f.data {
		id, ok := byDigest[b3.Of(c.f.data[p]).String()]
		_, consumed := want[p]
		switch {
		case consumed && (!ok || !has(entities[id], c.f.vers[p]) || !used[id]):
			t.Errorf("consumed member %s: entity %q (of %v) with version %s, used by %s: %t", p, id, entities, c.f.vers[p], run, used[id])
		case !consumed && ok:
			t.Errorf("member %s, which the run never read, is entity %s", p, id)
		}
	}
	host, _ := os.Hostname()
	agents, _ := doc["agent"].(map[string]any)
	assoc, _ := doc["wasAssociatedWith"].(map[string]any)
	found := false
	for _, a := range assoc {
		m, _ := a.(map[string]any)
		ag, _ := m["prov:agent"].(string)
		found = found || m["prov:activity"] == run && (strings.Contains(ag, host) || has(agents[ag], host))
	}
	if !found {
		t.Errorf("no wasAssociatedWith of %s with an agent for host %s: %v %v", run, host, agents, assoc)
	}
}

// checkReplay replays runID: it passes, then fails once the pinned
// version of a consumed member is deleted, and --all also names a member
// the run never read.
func (c *runsCase) checkReplay(t *testing.T, runID string, want consumedWant) {
	t.Helper()
	replay := func(code int, extra ...string) string {
		t.Helper()
		r := c.pinfsRun(t, code, append([]string{"replay", runID, "--store", c.f.store}, extra...)...)
		return r.stdout
	}
	var total int64
	for p := range want {
		total += int64(len(c.f.data[p]))
	}
	if out := replay(0); !lineWith(out, runID, fmt.Sprintf("%d members", len(want)), strconv.FormatInt(total, 10)) {
		t.Errorf("run replay does not say that %d members (%d bytes) were reproduced:\n%s", len(want), total, out)
	}
	consumedGone, neverRead := "train/mid.bin", "train/shards/s-00.txt"
	if _, ok := want[consumedGone]; !ok {
		t.Fatalf("%s is not consumed: the check below would prove nothing", consumedGone)
	}
	if _, ok := want[neverRead]; ok {
		t.Fatalf("%s was read: the check below would prove nothing", neverRead)
	}
	for _, p := range []string{consumedGone, neverRead} {
		c.f.s.DeleteVersion(t, "data", "ds/"+p, c.f.vers[p])
	}
	out := replay(1)
	if !lineWith(out, "version_missing", consumedGone) || strings.Contains(out, neverRead) ||
		!lineWith(out, fmt.Sprintf("1 of %d", len(want))) {
		t.Errorf("run replay after deleting the pinned version of %s: want it named with version_missing, and only it:\n%s", consumedGone, out)
	}
	out = replay(1, "--all")
	if !lineWith(out, "version_missing", consumedGone) || !lineWith(out, "version_missing", neverRead) ||
		!lineWith(out, fmt.Sprintf("2 of %d", len(c.f.data))) {
		t.Errorf("run replay --all: want %s and %s named with version_missing:\n%s", consumedGone, neverRead, out)
	}
}
