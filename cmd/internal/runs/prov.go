package runs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pinfs/pinfs/cmd/internal/consumed"
	"github.com/pinfs/pinfs/cmd/internal/runrecord"
	"github.com/pinfs/pinfs/verify"
)

// PROV-JSON namespaces. A member's QName is member:<index>, in a namespace
// of the snapshot's own (the index means nothing without the table).
const (
	nsProv     = "http://www.w3.org/ns/prov#"
	nsXSD      = "http://www.w3.org/2001/XMLSchema#"
	nsPinfs    = "https://pinfs.dev/ns#"
	nsRun      = "https://pinfs.dev/run/"
	nsSnapshot = "https://pinfs.dev/snapshot/sha256/"
	nsHost     = "https://pinfs.dev/host/"
	nsPermit   = "https://pinfs.dev/permit/"
)

// ExportPROV returns the run of report r as a W3C PROV-JSON document
// (https://www.w3.org/submissions/prov-json/), given the run's consumed
// set s and the member table t of its snapshot:
//
//   - entities: the snapshot (a prov:Collection, snapshot:<hex>) and every
//     member the run consumed (member:<index>), with its path, id, digest,
//     version, source, size, bytes read and whether it was read in full;
//   - activity: the run (run:<id>), from its first mount's start to its
//     last mount's end (no end while it has not ended);
//   - agents: each host that mounted the run (host:<name>) and, when the
//     run was admitted, its permit (permit:<id>) with the approvals;
//   - relations: the run used the snapshot and each member; each member is
//     a member of the snapshot (hadMember); the run was associated with
//     each host and with the permit.
//
// Every QName's prefix is declared in "prefix"; relations have blank ids
// (_:u1, ...) numbered in a fixed order, and object keys are sorted, so the
// same input always gives the same bytes.
func ExportPROV(r *Report, t *verify.Table, s *consumed.Set) ([]byte, error) {
	if err := s.Check(t.Len()); err != nil {
		return nil, err
	}
	if r.Digest.Hex() == "" {
		return nil, fmt.Errorf("run %s: no snapshot digest to export", r.RunID)
	}
	run := "run:" + qLocal(r.RunID)
	snap := "snapshot:" + r.Digest.Hex()
	doc := map[string]map[string]any{
		"prefix": {
			"prov": nsProv, "xsd": nsXSD, "pinfs": nsPinfs, "run": nsRun,
			"snapshot": nsSnapshot, "host": nsHost, "permit": nsPermit,
			"member": nsSnapshot + r.Digest.Hex() + "/member/",
		},
		"entity":            {},
		"activity":          {},
		"agent":             {},
		"used":              {},
		"wasAssociatedWith": {},
		"hadMember":         {},
	}
	rel := func(kind, prefix string, v map[string]any) {
		doc[kind]["_:"+prefix+strconv.Itoa(len(doc[kind])+1)] = v
	}

	doc["entity"][snap] = map[string]any{
		"prov:type":     []any{qname("prov:Collection"), qname("pinfs:Snapshot")},
		"pinfs:digest":  string(r.Digest),
		"pinfs:members": t.Len(),
	}
	rel("used", "u", map[string]any{"prov:activity": run, "prov:entity": snap})
	var members []any
	for _, m := range memberReports(s, t, nil) {
		id := "member:" + strconv.Itoa(m.Index)
		e := map[string]any{
			"prov:type":     qname("pinfs:Member"),
			"prov:label":    m.Path,
			"pinfs:path":    m.Path,
			"pinfs:id":      m.ID,
			"pinfs:digest":  m.Digest,
			"pinfs:version": m.Version,
			"pinfs:source":  m.Source,
			"pinfs:size":    m.Size,
			"pinfs:bytes":   m.Bytes,
			"pinfs:full":    m.Full,
		}
		if m.Split != "" {
			e["pinfs:split"] = m.Split
		}
		doc["entity"][id] = e
		members = append(members, id)
		rel("used", "u", map[string]any{"prov:activity": run, "prov:entity": id})
	}
	if len(members) > 0 {
		rel("hadMember", "m", map[string]any{"prov:collection": snap, "prov:entity": members})
	}

	act := map[string]any{
		"prov:type":       qname("pinfs:Run"),
		"prov:label":      r.RunID,
		"pinfs:state":     r.State,
		"pinfs:consumed":  r.Consumed.Digest,
		"pinfs:bytes":     r.Consumed.Bytes,
		"pinfs:integrity": integrityCount(r),
	}
	if start, end, ok := span(r); ok {
		act["prov:startTime"] = start.UTC().Format(timeLayout)
		if !end.IsZero() {
			act["prov:endTime"] = end.UTC().Format(timeLayout)
		}
	}
	doc["activity"][run] = act

	var hosts []string
	for _, m := range r.Mounts {
		hosts = append(hosts, m.Host)
	}
	slices.Sort(hosts)
	for _, h := range slices.Compact(hosts) {
		id := "host:" + qLocal(h)
		doc["agent"][id] = map[string]any{"prov:type": qname("pinfs:Host"), "prov:label": h}
		rel("wasAssociatedWith", "a", map[string]any{"prov:activity": run, "prov:agent": id, "prov:role": qname("pinfs:mount")})
	}
	if p := r.Permit; p != nil {
		id := "permit:" + qLocal(r.RunID)
		a := map[string]any{
			"prov:type":                 qname("pinfs:Permit"),
			"pinfs:digest":              string(p.Digest),
			"pinfs:purpose":             p.Purpose,
			"pinfs:tombstone_watermark": p.TombstoneWatermark,
			"pinfs:benchmark_fence":     p.BenchmarkFence,
			"pinfs:time":                map[string]any{"$": p.Time.UTC().Format(timeLayout), "type": "xsd:dateTime"},
		}
		if p.Gate != "" {
			a["pinfs:gate"] = p.Gate
			a["pinfs:generation"] = p.Generation
		}
		if p.Policy != "" {
			a["pinfs:policy"] = string(p.Policy)
		}
		if len(p.Approvals) > 0 {
			ks := make([]any, len(p.Approvals))
			for i, k := range p.Approvals {
				ks[i] = k
			}
			a["pinfs:approvals"] = ks
		}
		doc["agent"][id] = a
		rel("wasAssociatedWith", "a", map[string]any{"prov:activity": run, "prov:agent": id, "prov:role": qname("pinfs:admission")})
	}
	for k, v := range doc {
		if len(v) == 0 {
			delete(doc, k)
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("run %s: encode PROV-JSON: %w", r.RunID, err)
	}
	return append(b, '\n'), nil
}

// qname is a PROV-JSON literal of type prov:QUALIFIED_NAME.
func qname(q string) map[string]any { return map[string]any{"$": q, "type": "prov:QUALIFIED_NAME"} }

// qLocal makes s the local part of a QName: letters, digits, '.', '-' and
// '_' stay, every other byte is written %XX, as PROV-N allows.
func qLocal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// span returns when the run started (its first mount) and ended (its
// last mount's end, zero unless the run ended); ok is false without mounts.
func span(r *Report) (start, end time.Time, ok bool) {
	for _, m := range r.Mounts {
		if !ok || m.Start.Before(start) {
			start = m.Start
		}
		ok = true
		if m.End != nil && m.End.After(end) {
			end = *m.End
		}
	}
	if r.State != runrecord.StateEnded {
		end = time.Time{}
	}
	return start, end, ok
}

// integrityCount is the number of integrity events of r.
func integrityCount(r *Report) int64 {
	var n int64
	for _, g := range r.Integrity {
		n += g.Count
	}
	return n
}
