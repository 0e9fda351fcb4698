package sources

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The assignment rules with the worked examples of docs/where.md#binlog-evidence.
func TestAssignChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// c is a change at second s, tied to the operations tx names.
	c := func(seq, s int, tx ...string) Claim {
		return Claim{Change: BinlogChange{GTID: fmt.Sprintf("0-1-%d", seq), At: at(s), TxKeys: tx}}
	}
	open := func(cl Claim) Claim { cl.Open = true; return cl }
	reversed := func(cl Claim, by string) Claim { cl.ReversedBy = by; return cl }
	// op is an operation whose window is [s-1, s+600].
	op := func(biz string, s int, processed bool) Claimant {
		return Claimant{BizID: biz, From: at(s - 1), To: at(s + 600), Processed: processed}
	}
	cases := []struct {
		name      string
		claims    []Claim
		claimants []Claimant
		want      string // biz min-max, in claimant order
		owners    string // owners of each claim
		relaxed   bool
	}{
		{"one operation, one change", []Claim{c(5, 1)}, []Claimant{op("A", 0, true)}, "A 1-1", "A", false},
		{"one operation debited twice: a duplicate", []Claim{c(5, 1), c(6, 30)}, []Claimant{op("A", 0, true)}, "A 2-2", "A;A", false},
		{"two operations, the same account and amount, once each", []Claim{c(5, 1), c(6, 2)},
			[]Claimant{op("A", 0, true), op("B", 1, true)}, "A 1-1 B 1-1", "A,B;A,B", false},
		{"two operations, three changes: whose duplicate is unknown", []Claim{c(5, 1), c(6, 2), c(7, 3)},
			[]Claimant{op("A", 0, true), op("B", 1, true)}, "A 1-2 B 1-2", "A,B;A,B;A,B", false},
		{"the other operation not known to have run: it may own both", []Claim{c(5, 1), c(6, 2)},
			[]Claimant{op("A", 0, true), op("B", 1, false)}, "A 1-2 B 0-1", "A,B;A,B", false},
		{"tied to this one; the untied one is the other's, which ran", []Claim{c(5, 1, "A"), c(6, 2)},
			[]Claimant{op("A", 0, true), op("B", 1, true)}, "A 1-1 B 1-1", "A;A,B", false},
		{"tied to this one, then its redelivery untied: a duplicate", []Claim{c(5, 1, "A"), c(6, 40)},
			[]Claimant{op("A", 0, true)}, "A 2-2", "A;A", false},
		{"an untied change before this one's tied one is not its duplicate", []Claim{c(5, 1), c(6, 2, "A")},
			[]Claimant{op("A", 0, true)}, "A 1-1", ";A", false},
		{"... it is the other's, processed without a tie", []Claim{c(5, 1), c(6, 2, "A")},
			[]Claimant{op("A", 0, true), op("B", 0, true)}, "A 1-1 B 1-1", "B;A", false},
		{"tied to an operation that is not a claimant: no one's here", []Claim{c(5, 1, "Z"), c(6, 2)},
			[]Claimant{op("A", 0, true)}, "A 1-1", ";A", false},
		{"tied to two operations", []Claim{c(5, 1, "A", "B")},
			[]Claimant{op("A", 0, false), op("B", 0, false)}, "A 0-1 B 0-1", "A,B", false},
		{"windows: only the middle change is shared", []Claim{c(5, 2), c(6, 400), c(7, 900)},
			[]Claimant{op("A", 0, true), op("B", 300, true)}, "A 1-2 B 1-2", "A;A,B;B", false},
		{"windows: the other one owns its own change, this one's is certain", []Claim{c(5, 2), c(6, 900)},
			[]Claimant{op("A", 0, true), op("B", 500, true)}, "A 1-1 B 1-1", "A;B", false},
		{"a change opctl reversed counts for no one", []Claim{c(5, 1), reversed(c(6, 2), "A")},
			[]Claimant{op("A", 0, true)}, "A 1-1", "A;", false},
		{"a reversed duplicate leaves one change each", []Claim{c(5, 1), c(6, 2), reversed(c(7, 3), "A")},
			[]Claimant{op("A", 0, true), op("B", 1, true)}, "A 1-1 B 1-1", "A,B;A,B;", false},
		{"others not all known (open): a single change is this one's, which ran", []Claim{open(c(5, 1))},
			[]Claimant{op("A", 0, true)}, "A 1-1", "A", false},
		{"others not all known (open): two changes may be one each", []Claim{open(c(5, 1)), open(c(6, 2))},
			[]Claimant{op("A", 0, true)}, "A 1-2", "A;A", false},
		{"others not all known, this one not known to have run", []Claim{open(c(5, 1))},
			[]Claimant{op("A", 0, false)}, "A 0-1", "A", false},
		{"two processed operations, one change: the evidence contradicts the binlog", []Claim{c(5, 1)},
			[]Claimant{op("A", 0, true), op("B", 0, true)}, "A 0-1 B 0-1", "A,B", true},
		{"before this one's window", []Claim{c(5, -5)}, []Claimant{op("A", 0, false)}, "A 0-0", "", false},
		{"processed, but no change it can own: the evidence contradicts the binlog", []Claim{c(5, -5)}, []Claimant{op("A", 0, true)}, "A 0-0", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := AssignChanges(tc.claims, tc.claimants)
			var got []string
			for _, x := range tc.claimants {
				cr := a.Counts[x.BizID]
				got = append(got, fmt.Sprintf("%s %d-%d", x.BizID, cr.Min, cr.Max))
			}
			var owners []string
			for _, o := range a.Owners {
				owners = append(owners, strings.Join(o, ","))
			}
			if strings.Join(got, " ") != tc.want || strings.Join(owners, ";") != tc.owners || (a.Relaxed != "") != tc.relaxed {
				t.Fatalf("counts %v owners %q relaxed %q; want %s owners %q relaxed %v", got, strings.Join(owners, ";"), a.Relaxed, tc.want, tc.owners, tc.relaxed)
			}
		})
	}
}

// Exhaustive check: on small random inputs, the counts are exactly the
// minimum and maximum over every assignment that satisfies the rules,
// enumerated by brute force.
func TestAssignChangesBruteForce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	seed := uint32(7)
	rnd := func(n int) int {
		seed = seed*1664525 + 1013904223
		return int(seed>>8) % n
	}
	names := []string{"A", "B", "C"}
	for round := range 3000 {
		var claimants []Claimant
		for i := range 1 + rnd(3) {
			s := rnd(20)
			claimants = append(claimants, Claimant{BizID: names[i], From: t0.Add(time.Duration(s) * time.Second), To: t0.Add(time.Duration(s+rnd(20)) * time.Second), Processed: rnd(2) == 0})
		}
		var claims []Claim
		for i := range 1 + rnd(4) {
			cl := Claim{Change: BinlogChange{GTID: fmt.Sprint(i), At: t0.Add(time.Duration(rnd(40)) * time.Second)}, Open: rnd(4) == 0}
			if rnd(4) == 0 {
				cl.Change.TxKeys = []string{names[rnd(3)]}
			}
			claims = append(claims, cl)
		}
		a := AssignChanges(claims, claimants)
		lo, hi, ok := bruteForce(claims, claimants, a.Owners, a.Tied)
		for _, x := range claimants {
			got := a.Counts[x.BizID]
			switch {
			case !ok && a.Relaxed == "":
				t.Fatalf("round %d: no assignment satisfies the rules, but Relaxed is empty (%+v %+v)", round, claims, claimants)
			case ok && (got.Min != lo[x.BizID] || got.Max != hi[x.BizID]):
				t.Fatalf("round %d: %s %d-%d, brute force %d-%d (claims %+v claimants %+v owners %v)", round, x.BizID, got.Min, got.Max, lo[x.BizID], hi[x.BizID], claims, claimants, a.Owners)
			}
		}
	}
}

// bruteForce enumerates every assignment of each claim to one of its
// owners (or to no claimant, when open or ownerless) that gives every
// processed claimant a change, and returns each claimant's fewest and
// most; ok is false when there is none.
func bruteForce(claims []Claim, claimants []Claimant, owners [][]string, tied []string) (lo, hi map[string]int, ok bool) {
	lo, hi = map[string]int{}, map[string]int{}
	choice := make([]string, len(claims))
	var rec func(i int)
	rec = func(i int) {
		if i == len(claims) {
			n := map[string]int{}
			for _, o := range choice {
				if o != "" {
					n[o]++
				}
			}
			for _, x := range claimants {
				if x.Processed && n[x.BizID] == 0 {
					return
				}
			}
			for _, x := range claimants {
				if !ok || n[x.BizID] < lo[x.BizID] {
					lo[x.BizID] = n[x.BizID]
				}
				if !ok || n[x.BizID] > hi[x.BizID] {
					hi[x.BizID] = n[x.BizID]
				}
			}
			ok = true
			return
		}
		opts := owners[i]
		mayBeNone := claims[i].Open || len(opts) == 0 || claims[i].ReversedBy != "" || (len(claims[i].Change.TxKeys) > 0 && tied[i] == "" && !allKnown(claims[i].Change.TxKeys, claimants))
		if len(claims[i].Change.TxKeys) > 0 && !allKnown(claims[i].Change.TxKeys, claimants) {
			mayBeNone = true
		}
		for _, o := range opts {
			choice[i] = o
			rec(i + 1)
		}
		if mayBeNone {
			choice[i] = ""
			rec(i + 1)
		}
	}
	rec(0)
	return lo, hi, ok
}

func allKnown(keys []string, claimants []Claimant) bool {
	for _, k := range keys {
		found := false
		for _, x := range claimants {
			found = found || x.BizID == k
		}
		if !found {
			return false
		}
	}
	return true
}
