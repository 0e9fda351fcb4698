package sources

import (
	"slices"
	"time"
)

// Attribution of binlog changes to operations (docs/where.md#binlog-evidence).
//
// Several operations can match one change: the same account debited by the
// same amount inside their windows (a merchant account, a fixed fee). A
// change counts for an operation only as far as no other operation can
// account for it. The changes of one row by one delta are assigned as a
// whole, under three rules:
//
//  1. a change tied by its transaction (binlog.transaction) belongs to the
//     operation its transaction names;
//  2. every claimant with evidence that it was processed owns at least one
//     change;
//  3. a change is an operation's duplicate only after its first change: an
//     operation whose transaction tied a change owns no untied change
//     before it (its first processing wrote the tie).
//
// An operation's count is exact when every such assignment gives it the
// same count; otherwise it lies in [Min, Max] and the step is ambiguous.
// The functions here are pure: reconcile's table-wide scan uses them as
// `opctl where` does.

// Claimant is an operation that may own changes of the row.
type Claimant struct {
	BizID string
	// From and To bound the changes it can own: its earliest timestamp
	// − 1 s and + the step's window (both included). A zero From or To
	// leaves that side open.
	From, To time.Time
	// Processed: evidence that the operation ran (rule 2).
	Processed bool
}

// Claim is one change as attribution weighs it.
type Claim struct {
	Change BinlogChange
	// Open: an operation that is not among the claimants may own it (it
	// lies outside the range whose claimants were all found).
	Open bool
	// ReversedBy is the operation an applied opctl reversal (or an
	// attested manual one) of this change was for: an effect of that
	// operation, undone. It counts for no one and is no one's first
	// change.
	ReversedBy string
}

// CountRange is the fewest and the most changes an operation owns over
// every assignment.
type CountRange struct{ Min, Max int }

// Exact reports whether every assignment gives the same count.
func (c CountRange) Exact() bool { return c.Min == c.Max }

// Assignment is the outcome of AssignChanges.
type Assignment struct {
	// Counts has one entry per claimant, by BizID.
	Counts map[string]CountRange
	// Owners[i] are the claimants that may own claims[i], in claimant
	// order (rules 1 and 3, and their windows); a reversed claim has
	// none.
	Owners [][]string
	// Tied[i] is the claimant claims[i]'s transaction alone names (""
	// when none, or several).
	Tied []string
	// Relaxed says why rule 2 was left out ("" when it was not): the
	// processed claimants cannot all own a change (their evidence
	// contradicts the binlog), or too many compete to weigh it. Counts
	// are then wider, never narrower, than the rule would make them.
	Relaxed string
}

// maxWeighed bounds the claimants and claims whose rule 2 is weighed (a
// matching per claimant): past it the rule is left out.
const maxWeighed = 400

// AssignChanges assigns claims (changes of one row by one delta, in binlog
// order) to claimants and returns every claimant's count range and every
// claim's possible owners.
func AssignChanges(claims []Claim, claimants []Claimant) Assignment {
	out := Assignment{Counts: map[string]CountRange{}, Owners: make([][]string, len(claims)), Tied: make([]string, len(claims))}
	idx := map[string]int{}
	for i, c := range claimants {
		if _, dup := idx[c.BizID]; !dup {
			idx[c.BizID] = i
		}
	}
	// Each claimant's first change tied to it alone (rule 3).
	firstTie := map[string]int{}
	for i, c := range claims {
		if c.ReversedBy == "" && len(c.Change.TxKeys) > 0 && allSame(c.Change.TxKeys) {
			out.Tied[i] = c.Change.TxKeys[0]
			if _, ok := firstTie[out.Tied[i]]; !ok {
				firstTie[out.Tied[i]] = i
			}
		}
	}
	// Possible owners (rules 1, 3 and the windows); open: an operation
	// that is not a claimant may own the claim.
	open := make([]bool, len(claims))
	for i, c := range claims {
		if c.ReversedBy != "" {
			continue
		}
		open[i] = c.Open
		if len(c.Change.TxKeys) > 0 {
			for _, k := range dedupe(c.Change.TxKeys) {
				if _, ok := idx[k]; ok {
					out.Owners[i] = append(out.Owners[i], k)
				} else {
					open[i] = true // tied to an operation that is not a claimant
				}
			}
			slices.SortFunc(out.Owners[i], func(a, b string) int { return idx[a] - idx[b] })
			continue
		}
		for _, x := range claimants {
			if !within(c.Change.At, x.From, x.To) || slices.Contains(out.Owners[i], x.BizID) {
				continue
			}
			if f, ok := firstTie[x.BizID]; ok && f > i {
				continue // before its first (tied) change: not its duplicate
			}
			out.Owners[i] = append(out.Owners[i], x.BizID)
		}
	}

	forced := map[string]int{}
	var free []int // claims more than one claimant, or one and maybe another
	for i, o := range out.Owners {
		switch {
		case len(o) == 1 && !open[i]:
			forced[o[0]]++
		case len(o) >= 1:
			free = append(free, i)
		}
	}
	var needy []string
	seen := map[string]bool{}
	for _, x := range claimants {
		if x.Processed && forced[x.BizID] == 0 && !seen[x.BizID] {
			needy = append(needy, x.BizID)
		}
		seen[x.BizID] = true
	}
	weigh := len(needy) > 0
	switch {
	case len(claimants) > maxWeighed || len(free) > maxWeighed:
		weigh, out.Relaxed = false, "too many operations compete for these changes to weigh which of them were processed"
	case weigh && matching(needy, free, out.Owners, nil) < len(needy):
		weigh, out.Relaxed = false, "the operations with evidence that they were processed cannot each own one of these changes: their evidence contradicts the binlog"
	}
	for x := range seen {
		owns := 0 // free claims x may own
		mine := map[int]bool{}
		for _, i := range free {
			if slices.Contains(out.Owners[i], x) {
				owns++
				mine[i] = true
			}
		}
		cr := CountRange{Min: forced[x], Max: forced[x] + owns}
		if weigh {
			others := slices.DeleteFunc(slices.Clone(needy), func(y string) bool { return y == x })
			if len(others) < len(needy) {
				cr.Min++ // x itself is processed and owns no change for certain
			}
			// The others take as few of x's claims as they can.
			cr.Max -= len(others) - matching(others, free, out.Owners, mine)
		}
		out.Counts[x] = cr
	}
	return out
}

// matching is the size of a maximum matching of the operations left to the
// claims free (each operation one claim it may own, each claim one
// operation), leaving out the claims in skip: Kuhn's augmenting paths.
func matching(left []string, free []int, owners [][]string, skip map[int]bool) int {
	adj := make([][]int, len(left))
	for li, x := range left {
		for fi, i := range free {
			if !skip[i] && slices.Contains(owners[i], x) {
				adj[li] = append(adj[li], fi)
			}
		}
	}
	match := make([]int, len(free)) // free index → left index + 1
	var try func(li int, seen []bool) bool
	try = func(li int, seen []bool) bool {
		for _, fi := range adj[li] {
			if seen[fi] {
				continue
			}
			seen[fi] = true
			if match[fi] == 0 || try(match[fi]-1, seen) {
				match[fi] = li + 1
				return true
			}
		}
		return false
	}
	n := 0
	for li := range left {
		if try(li, make([]bool, len(free))) {
			n++
		}
	}
	return n
}

// within reports whether t is in [from, to], a zero bound open.
func within(t, from, to time.Time) bool {
	return (from.IsZero() || !t.Before(from)) && (to.IsZero() || !t.After(to))
}

func allSame(s []string) bool {
	for _, x := range s[1:] {
		if x != s[0] {
			return false
		}
	}
	return true
}

func dedupe(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
