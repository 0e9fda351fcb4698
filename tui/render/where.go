package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// Safe is s for a terminal, by the one rule of human output (plans.Shown,
// docs/where.md#values-in-human-output).
func Safe(s string) string { return plans.Shown(s) }

// WhereOptions say how Where draws a report: for `opctl where` (a
// terminal or a pipe) or as the console's detail.
type WhereOptions struct {
	Styles Styles
	// Table draws a table (opctl where: box art on a terminal, tab-separated
	// when piped); nil: aligned columns, the console's.
	Table func(w io.Writer, header []string, rows [][]string) error
	// Console draws the report as the console's detail (docs/tui.md): no
	// head line (the console keeps it above), the steps as a timeline with
	// each status drawn distinctly and their evidence below, the partition
	// as a bar Width columns wide, and the verdict with its explanation.
	Console bool
	Width   int
}

// Where writes where reports for a person: for each, the verdict, then the
// sections STEPS, STATE, KAFKA, FINDINGS, TIMELINE and NEXT (docs/where.md).
// Every value from the evidence is shown through Safe. It is the one
// renderer of the where report: `opctl where` and the console's detail.
func Where(w io.Writer, rs []inspect.Report, o WhereOptions) error {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString("\n" + strings.Repeat("─", 60) + "\n\n")
		}
		Report(&b, r, o)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Report writes one where report into b (Where).
func Report(b *strings.Builder, r inspect.Report, o WhereOptions) {
	v := &whereView{o: o, st: o.Styles}
	v.report(b, r)
}

type whereView struct {
	o  WhereOptions
	st Styles
}

func (v *whereView) section(b *strings.Builder, title string) {
	b.WriteString("\n" + v.st.Title.Render(title) + "\n")
}

func (v *whereView) table(b *strings.Builder, header []string, rows [][]string) {
	if v.o.Table == nil {
		v.alignedTable(b, header, rows)
		return
	}
	var sb strings.Builder
	_ = v.o.Table(&sb, header, rows)
	b.WriteString(sb.String())
}

// alignedTable is a table as the console draws it: columns two spaces
// apart, the header underlined, no box art.
func (v *whereView) alignedTable(b *strings.Builder, header []string, rows [][]string) {
	ws := make([]int, len(header))
	for i, h := range header {
		ws[i] = ansi.StringWidth(h)
	}
	for _, r := range rows {
		for i, c := range r {
			ws[i] = max(ws[i], ansi.StringWidth(c))
		}
	}
	line := func(cells []string) string {
		var l strings.Builder
		for i, c := range cells {
			l.WriteString(c)
			if i < len(cells)-1 {
				l.WriteString(strings.Repeat(" ", ws[i]-ansi.StringWidth(c)+2))
			}
		}
		return "  " + l.String()
	}
	b.WriteString(v.st.Header.Render(line(header)) + "\n")
	for _, r := range rows {
		b.WriteString(line(r) + "\n")
	}
}

func (v *whereView) report(b *strings.Builder, r inspect.Report) {
	if !v.o.Console {
		fmt.Fprintf(b, "%s\n", Head(v.st, r))
		fmt.Fprintf(b, "  %s\n", Safe(r.Verdict.Summary))
	}
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
	if v.o.Console {
		v.timeline(b, r)
	} else {
		for _, s := range r.Steps {
			rows = append(rows, []string{fmt.Sprint(s.Index), Safe(s.Name), s.Kind, string(s.Status), fmt.Sprint(s.EvidenceCount), stepDetail(s)})
		}
		v.table(b, []string{"#", "STEP", "KIND", "STATUS", "EFFECTS", "EVIDENCE"}, rows)
	}

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

	if v.o.Console {
		v.kafkaPanel(b, r.Kafka)
	} else {
		v.section(b, "KAFKA")
	}
	b.WriteString(kafkaLine(r.Kafka) + "\n")
	fmt.Fprintf(b, "redelivery: %s\n", v.st.Bold.Render(string(r.Kafka.Redelivery)))
	if v.o.Console {
		v.verdict(b, r)
	}

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

// Head is a report's head line: the id, the pipeline and the verdict
// with its severity.
func Head(st Styles, r inspect.Report) string {
	pipeline := Safe(r.Pipeline)
	if pipeline == "" {
		pipeline = "(no pipeline)"
	}
	return fmt.Sprintf("%s  %s  %s", st.Bold.Render(Safe(r.BizID)), pipeline,
		st.Severity(r.Verdict.Severity, string(r.Verdict.Code)+" ("+string(r.Verdict.Severity)+")"))
}

// timeline draws the steps one per line, each status with its own mark,
// and below them each step's evidence (the console's STEPS).
func (v *whereView) timeline(b *strings.Builder, r inspect.Report) {
	n := len(r.Steps)
	for i, s := range r.Steps {
		link := "├─"
		if i == n-1 {
			link = "└─"
		}
		fmt.Fprintf(b, " %s %s %d. %-14s %-7s effects %d%s\n", link, v.stepMark(s.Status), s.Index, Safe(s.Name), s.Kind, s.EvidenceCount, reachedNote(s))
	}
	var rows [][]string
	for _, s := range r.Steps {
		if d := stepDetail(s); d != "-" {
			rows = append(rows, []string{Safe(s.Name), d})
		}
	}
	if len(rows) > 0 {
		v.section(b, "EVIDENCE")
		v.table(b, []string{"STEP", "EVIDENCE"}, rows)
	}
}

// stepMark is how the timeline draws a step's status: each distinct.
func (v *whereView) stepMark(s inspect.StepStatus) string {
	switch s {
	case inspect.StepApplied:
		return v.st.Applied.Render("● applied   ")
	case inspect.StepAbsent:
		return v.st.Absent.Render("○ absent    ")
	case inspect.StepDuplicated:
		return v.st.Duplicated.Render("◉ DUPLICATED")
	case inspect.StepUnknown:
		return v.st.Unknown.Render("? UNKNOWN   ")
	case inspect.StepAhead:
		return v.st.Ahead.Render("» AHEAD     ")
	}
	return fmt.Sprintf("%-12s", s)
}

func reachedNote(s inspect.StepView) string {
	if s.Error != "" {
		return "  error: " + Safe(s.Error)
	}
	if s.Reached != nil && !*s.Reached && s.Status == inspect.StepAhead {
		return "  (the state row has not reached it)"
	}
	return ""
}

// kafkaPanel is the console's KAFKA title and the message's partition as
// a bar.
func (v *whereView) kafkaPanel(b *strings.Builder, k inspect.KafkaView) {
	title := "KAFKA  " + Safe(k.Topic)
	if k.Partition != nil {
		title += fmt.Sprintf(" partition %d", *k.Partition)
	}
	v.section(b, title)
	if k.LogStart != nil && k.LogEnd != nil {
		b.WriteString("  " + KafkaBar(*k.LogStart, *k.LogEnd, k.Committed, k.Offset, v.o.Width-8) + "\n")
		b.WriteString("  " + v.st.Dim.Render("[ log start · C committed · M message · * both · ] log end") + "\n")
	}
}

// KafkaBar is a partition w wide: [ at the log start, ] at the log end, C
// the committed offset, M the message (* when they meet).
func KafkaBar(start, end int64, committed, msg *int64, w int) string {
	w = min(max(w, 12), 64)
	inner := w - 2
	bar := []rune(strings.Repeat("─", inner))
	span := end - start
	at := func(off int64) int {
		if span <= 0 {
			return 0
		}
		i := int((off - start) * int64(inner-1) / span)
		return min(max(i, 0), inner-1)
	}
	put := func(off *int64, r rune) {
		if off == nil || *off < start || *off > end {
			return
		}
		i := at(*off)
		if bar[i] != '─' && bar[i] != r {
			r = '*'
		}
		bar[i] = r
	}
	put(committed, 'C')
	put(msg, 'M')
	return "[" + string(bar) + "]"
}

// verdict is the console's VERDICT: the code, its summary and what it
// means (opctl explain).
func (v *whereView) verdict(b *strings.Builder, r inspect.Report) {
	v.section(b, "VERDICT")
	b.WriteString(v.st.Severity(r.Verdict.Severity, string(r.Verdict.Code)) + "  " + Safe(r.Verdict.Summary) + "\n")
	if e, ok := inspect.Explain(r.Verdict.Code); ok {
		b.WriteString(e.Meaning + "\n")
		if e.Repair != "" {
			b.WriteString(v.st.Dim.Render("repair: ") + e.Repair + "\n")
		}
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
