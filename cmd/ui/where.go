package ui

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
)

// Where writes where reports for a person: for each, the verdict, then the
// sections STEPS, STATE, KAFKA, FINDINGS, TIMELINE and NEXT (docs/where.md).
// With tty the tables have box art; otherwise they are tab-separated.
// Every value from the evidence is shown through Safe.
func Where(w io.Writer, tty bool, st Styles, rs []inspect.Report) error {
	return WhereFit(w, TableOptions{TTY: tty}, st, rs)
}

// WhereFit is Where with its tables fitted as t says (the terminal's
// width on a terminal; whole values when piped or wide).
func WhereFit(w io.Writer, t TableOptions, st Styles, rs []inspect.Report) error {
	v := &whereView{t: t, st: st}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString("\n" + strings.Repeat("─", 60) + "\n\n")
		}
		v.report(&b, r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type whereView struct {
	t  TableOptions
	st Styles
}

func (v *whereView) section(b *strings.Builder, title string) {
	b.WriteString("\n" + v.st.Title.Render(title) + "\n")
}

func (v *whereView) table(b *strings.Builder, header []string, rows [][]string) {
	var sb strings.Builder
	_ = FitTable(&sb, v.t, header, rows)
	b.WriteString(sb.String())
}

func (v *whereView) report(b *strings.Builder, r inspect.Report) {
	pipeline := Safe(r.Pipeline)
	if pipeline == "" {
		pipeline = "(no pipeline)"
	}
	fmt.Fprintf(b, "%s  %s  %s\n", v.st.Bold.Render(Safe(r.BizID)), pipeline,
		v.st.Severity(r.Verdict.Severity, string(r.Verdict.Code)+" ("+string(r.Verdict.Severity)+")"))
	fmt.Fprintf(b, "  %s\n", Safe(r.Verdict.Summary))
	if r.Partial {
		var why []string
		for _, k := range r.Unread() {
			why = append(why, k+": "+Safe(r.Sources[k]))
		}
		fmt.Fprintf(b, "  %s\n", v.st.Watch.Render("PARTIAL: "+strings.Join(why, "; ")))
	}
	if r.Verdict.Code == inspect.NotFound && len(r.Steps) == 0 {
		v.next(b, r)
		return
	}

	v.section(b, "STEPS")
	rows := [][]string{}
	for _, s := range r.Steps {
		rows = append(rows, []string{fmt.Sprint(s.Index), Safe(s.Name), s.Kind, string(s.Status), fmt.Sprint(s.EvidenceCount), stepDetail(s)})
	}
	v.table(b, []string{"#", "STEP", "KIND", "STATUS", "EFFECTS", "EVIDENCE"}, rows)

	v.section(b, "STATE")
	b.WriteString(stateLine(r) + "\n")
	if len(r.Idempotency) > 0 {
		var parts []string
		for _, x := range r.Idempotency {
			parts = append(parts, Safe(x.Key)+" "+Safe(x.Action))
		}
		fmt.Fprintf(b, "idempotency: %s\n", strings.Join(parts, ", "))
	}
	if r.Entity != nil {
		if r.Entity.Found {
			fmt.Fprintf(b, "entity: %s\n", Safe(r.Entity.Status))
		} else {
			b.WriteString("entity: not found\n")
		}
	}

	v.section(b, "KAFKA")
	b.WriteString(kafkaLine(r.Kafka) + "\n")
	fmt.Fprintf(b, "redelivery: %s\n", v.st.Bold.Render(string(r.Kafka.Redelivery)))

	if len(r.Findings) > 0 {
		v.section(b, "FINDINGS")
		rows = rows[:0]
		for _, f := range r.Findings {
			rows = append(rows, []string{string(f.Code), Safe(f.Step), Safe(f.Detail)})
		}
		v.table(b, []string{"CODE", "STEP", "DETAIL"}, rows)
	}
	if len(r.Timeline) > 0 {
		v.section(b, "TIMELINE")
		rows = rows[:0]
		seconds := false
		for _, e := range r.Timeline {
			at := e.At.Format("2006-01-02 15:04:05.000")
			if e.Resolution == inspect.ResolutionSecond {
				// Never a fake .000: the binlog has whole seconds.
				at, seconds = e.At.Format("2006-01-02 15:04:05"), true
			}
			rows = append(rows, []string{at, Safe(e.Source), Safe(e.What)})
		}
		v.table(b, []string{"AT", "SOURCE", "WHAT"}, rows)
		if seconds {
			b.WriteString("  (binlog times are whole seconds: each is placed after the other events of its second)\n")
		}
	}
	v.next(b, r)
}

func (v *whereView) next(b *strings.Builder, r inspect.Report) {
	if len(r.Verdict.Next) == 0 {
		return
	}
	v.section(b, "NEXT")
	for _, n := range r.Verdict.Next {
		// A line that holds an unprintable rune (an id read from the
		// database) is shown quoted: harmless, not pasteable as it is.
		b.WriteString("  " + Safe(n) + "\n")
	}
}

func stepDetail(s inspect.StepView) string {
	var parts []string
	for _, e := range s.Evidence {
		t := "id " + Safe(inspect.IdentityString(e.Identity()))
		if e.IsBinlogChange() {
			t = binlogChange(e)
		}
		if e.Reversed {
			t += " (reversed)"
		}
		parts = append(parts, t)
	}
	for _, in := range s.Intents {
		t := Safe(in.RequestID) + " " + string(in.Outcome)
		if in.Probe != "" {
			t += " [probe " + Safe(in.Probe) + "]"
		}
		parts = append(parts, t)
	}
	if s.Probe != nil {
		t := "probe " + Safe(s.Probe.Outcome)
		if s.Probe.Count != nil {
			t += fmt.Sprintf(" (count %d)", *s.Probe.Count)
		}
		if s.Probe.Detail != "" {
			t += ": " + Safe(s.Probe.Detail)
		}
		parts = append(parts, t)
	}
	if b := s.Binlog; b != nil {
		parts = append(parts, binlogAttribution(b)...)
	}
	if s.Error != "" {
		parts = append(parts, "error: "+Safe(s.Error))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// binlogChange is a binlog change as a step's detail shows it: "change
// 0-1-42#0 at 2026-12-01 10:00:00 balance 100.00 → 70.00 (message)"
// (docs/where.md#binlog-evidence).
func binlogChange(r inspect.EvidenceRow) string {
	col := func(name string) string {
		v, _ := r.Get(name)
		if t, ok := v.(time.Time); ok {
			return t.Format("2006-01-02 15:04:05")
		}
		return Safe(inspect.IdentityString(v))
	}
	return "change " + col("id") + " at " + col("at") + " " + col("before") + " → " + col("after") + " (" + col("attribution") + ")"
}

// binlogAttribution is what a binlog step's detail says of the other
// operations that may own its changes (docs/where.md#binlog-evidence):
// "count 1 to 2; shared with PAY-2 (message, ran: ...): 0-1-5#0, 0-1-6#0".
func binlogAttribution(b *inspect.BinlogView) []string {
	var out []string
	if b.CountMin != b.CountMax {
		out = append(out, fmt.Sprintf("count %d to %d", b.CountMin, b.CountMax))
	}
	if len(b.Shared) > 0 {
		var who, ids []string
		for _, c := range b.Competitors {
			w := Safe(c.BizID) + " (" + c.Found
			if c.Processed != "" {
				w += ", ran: " + Safe(c.Processed)
			}
			who = append(who, w+")")
		}
		unknown := false
		for _, sc := range b.Shared {
			ids = append(ids, Safe(sc.ID))
			unknown = unknown || sc.Unknown
		}
		if unknown {
			who = append(who, "operations not found")
		}
		out = append(out, "shared with "+strings.Join(who, ", ")+": "+strings.Join(ids, ", "))
	}
	for _, n := range b.Notes {
		out = append(out, "note: "+Safe(n))
	}
	return out
}

func stateLine(r inspect.Report) string {
	s := r.State
	if !s.Found {
		return "no state row"
	}
	out := "status " + Safe(s.Status)
	if s.Version != nil {
		out += fmt.Sprintf(", version %d", *s.Version)
	}
	if s.UpdatedAt != nil {
		out += ", updated " + fmtTS(*s.UpdatedAt)
	}
	switch {
	case s.Owner == "":
		out += ", no owner"
	case s.LeaseActive:
		out += fmt.Sprintf(", owner %s holds the lease until %s", Safe(s.Owner), fmtTS(*s.LeaseUntil))
	case s.LeaseUntil != nil:
		out += fmt.Sprintf(", owner %s, lease expired %s", Safe(s.Owner), fmtTS(*s.LeaseUntil))
	default:
		out += ", owner " + Safe(s.Owner)
	}
	return out
}

func kafkaLine(k inspect.KafkaView) string {
	part, off, com, ls, le := "?", "?", "none", "?", "?"
	if k.Partition != nil {
		part = fmt.Sprint(*k.Partition)
	}
	if k.Offset != nil {
		off = fmt.Sprint(*k.Offset)
	}
	_, unknownCommitted := k.Unknown["committed"]
	if k.Committed != nil {
		com = fmt.Sprint(*k.Committed)
	} else if k.LogStart == nil || unknownCommitted {
		com = "?" // not read: unknown, not "none"
	}
	if k.LogStart != nil {
		ls = fmt.Sprint(*k.LogStart)
	}
	if k.LogEnd != nil {
		le = fmt.Sprint(*k.LogEnd)
	}
	out := fmt.Sprintf("%s partition %s offset %s (%s) · committed %s · log %s..%s", Safe(k.Topic), part, off, k.Located, com, ls, le)
	if k.Lag != nil {
		out += fmt.Sprintf(" · lag %d", *k.Lag)
	}
	if k.GroupLag != nil {
		out += fmt.Sprintf(" · group lag %d", *k.GroupLag)
	}
	if k.GroupState != "" {
		out += " · group " + Safe(k.GroupState)
	}
	if k.PartitionOwner != "" {
		out += " · owner " + Safe(k.PartitionOwner)
	}
	if k.Detail != "" {
		out += "\n" + Safe(k.Detail)
	}
	// The fields a request could not answer, grouped by why.
	var whys []string
	fields := map[string][]string{}
	for _, f := range slices.Sorted(maps.Keys(k.Unknown)) {
		why := k.Unknown[f]
		if _, ok := fields[why]; !ok {
			whys = append(whys, why)
		}
		fields[why] = append(fields[why], f)
	}
	for _, why := range whys {
		out += fmt.Sprintf("\nunknown: %s (%s)", strings.Join(fields[why], ", "), Safe(why))
	}
	return out
}

func fmtTS(t time.Time) string { return t.Format("2006-01-02 15:04:05.000") }
