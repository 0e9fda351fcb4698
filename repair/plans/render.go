package plans

import (
	"encoding/base64"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Classes of rendered text, for a Colorize function.
const (
	ClassTitle  = "title"  // the plan header
	ClassAdd    = "add"    // + lines: rows or records created
	ClassRemove = "remove" // - lines: effects that stop counting
	ClassChange = "change" // ~ lines: rows changed
	ClassManual = "manual" // ! lines: what the operator does by hand
	ClassGuard  = "guard"  // guards
	ClassDim    = "dim"    // details
)

// RenderOptions style a rendering. The zero value renders plain text.
type RenderOptions struct {
	// Colorize styles one piece of text of a class; nil leaves it plain.
	Colorize func(class, text string) string
}

func (o RenderOptions) c(class, text string) string {
	if o.Colorize == nil {
		return text
	}
	return o.Colorize(class, text)
}

// Render writes the plan as a readable diff, like `terraform plan`: a
// header (pipeline, biz_id, verdict, reason), then each numbered action with
// its guards and what it changes: "~" rows changed from → to, "+" rows and
// records created (with the bound values, the topic, partition and
// headers), "-" effects that stop counting, "!" what the operator does by
// hand. Every value of the plan (it comes from a file, and holds what was
// read from the database and Kafka) is shown through Shown, a text composed
// around such values (a summary, a guard, a note) as a whole: no control
// character reaches the terminal raw.
func Render(w io.Writer, p *Plan, o RenderOptions) error {
	var b strings.Builder
	b.WriteString(o.c(ClassTitle, fmt.Sprintf("Plan %s for %s in pipeline %s", Shown(p.Short()), Shown(p.BizID), Shown(p.Pipeline))) + "\n")
	row := func(k, v string) { fmt.Fprintf(&b, "  %-9s %s\n", k, v) }
	v := Shown(string(p.Verdict))
	if p.Forced {
		v += " (forced with --force)"
	}
	row("verdict", v)
	row("reason", Shown(p.Reason))
	who := Shown(p.Operator)
	if who == "" {
		who = "-"
	}
	row("operator", fmt.Sprintf("%s · created %s", who, p.CreatedAt.UTC().Format("2006-01-02 15:04:05.000 UTC")))
	row("observed", observedLine(p.Observed))
	if p.Attest != "" {
		row("attest", fmt.Sprintf("%q", p.Attest))
	}
	if p.Runbook != "" {
		row("runbook", fmt.Sprintf("%s · run %s", Shown(p.Runbook), Shown(p.RunID)))
	}
	if p.Incident != "" {
		row("incident", Shown(p.Incident))
	}
	n := len(p.Actions)
	fmt.Fprintf(&b, "\nopctl will perform %d action%s; apply re-checks each one's guards first:\n", n, plural(n))
	for _, a := range p.Actions {
		b.WriteString("\n")
		renderAction(&b, p, a, o)
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nNotes:\n")
		for _, x := range p.Notes {
			b.WriteString("  - " + Shown(x) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func observedLine(ob Observed) string {
	var parts []string
	if ob.State.Found {
		s := "state " + Shown(ob.State.Status)
		if ob.State.Version != nil {
			s += fmt.Sprintf(" v%d", *ob.State.Version)
		}
		if ob.State.Owner != "" {
			s += " owner " + Shown(ob.State.Owner)
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "no state row")
	}
	for _, x := range ob.Idempotency {
		parts = append(parts, Shown(x.Key)+" "+Shown(x.Action))
	}
	if ob.Entity != nil && ob.Entity.Found {
		parts = append(parts, "entity "+Shown(ob.Entity.Status))
	}
	for _, s := range ob.Steps {
		parts = append(parts, Shown(s.Name)+" "+Shown(s.Status))
	}
	parts = append(parts, "redelivery "+Shown(string(ob.Redelivery)))
	return strings.Join(parts, " · ")
}

func renderAction(b *strings.Builder, p *Plan, a Action, o RenderOptions) {
	fmt.Fprintf(b, "%s %s\n", o.c(ClassTitle, fmt.Sprintf("%d. [%s]", a.Index, Shown(string(a.Type)))), Shown(a.Summary))
	if len(a.Guards) > 0 {
		gs := make([]string, len(a.Guards))
		for i, g := range a.Guards {
			gs[i] = Shown(g.String())
		}
		b.WriteString("     " + o.c(ClassGuard, "guards: "+strings.Join(gs, " · ")) + "\n")
	}
	line := func(class, sign, text string) {
		b.WriteString("     " + o.c(class, sign+" "+text) + "\n")
	}
	detail := func(text string) { b.WriteString("         " + o.c(ClassDim, text) + "\n") }
	switch {
	case a.State != nil && a.State.Insert:
		sc := a.State
		line(ClassAdd, "+", fmt.Sprintf("%s[%s]", Shown(sc.Table), Shown(p.BizID)))
		detail("status:     " + literal(sc.ToStatus))
		if sc.ToVersion != nil {
			detail(fmt.Sprintf("version:    %d", *sc.ToVersion))
		}
		if sc.MsgID != "" {
			detail("msg_id:     " + literal(sc.MsgID))
		}
		if sc.Partition != nil && sc.Offset != nil {
			detail(fmt.Sprintf("partition:  %d, offset %d", *sc.Partition, *sc.Offset))
		}
		detail("created_at: NOW(3), updated_at: NOW(3)")
	case a.State != nil:
		sc := a.State
		line(ClassChange, "~", fmt.Sprintf("%s[%s]", Shown(sc.Table), Shown(p.BizID)))
		if sc.ReleaseOwner != "" {
			detail("owner:       " + literal(sc.ReleaseOwner) + " → NULL")
			detail("lease_until: → NULL")
		} else {
			detail("status:     " + literal(sc.FromStatus) + " → " + literal(sc.ToStatus))
		}
		if sc.FromVersion != nil && sc.ToVersion != nil {
			detail(fmt.Sprintf("version:    %d → %d (CAS on %d)", *sc.FromVersion, *sc.ToVersion, *sc.FromVersion))
		}
		detail("updated_at: → NOW(3)")
	case a.Reverse != nil:
		rs := a.Reverse
		line(ClassRemove, "-", fmt.Sprintf("%s row %s stops counting as an effect: %s", Shown(a.Step), Shown(rs.Identity), imageText(rs.Row)))
		for _, st := range rs.Statements {
			sign, class := "~", ClassChange
			if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(st)), "INSERT") {
				sign, class = "+", ClassAdd
			}
			line(class, sign, Shown(oneLine(st)))
			if _, names, err := config.NamedParams(st); err == nil && len(names) > 0 {
				detail(bindingsText(names, p.BizID, rs.Row))
			}
		}
	case a.Flip != nil:
		f := a.Flip
		if f.Delete {
			line(ClassRemove, "-", fmt.Sprintf("%s[%s]", Shown(f.Table), Shown(f.Key)))
			detail("deleted while its action is " + literal(f.From) + "; the whole row is kept in the audit (before_image)")
			break
		}
		line(ClassChange, "~", fmt.Sprintf("%s[%s]", Shown(f.Table), Shown(f.Key)))
		detail("action: " + literal(f.From) + " → " + literal(f.To) + " (CAS on " + literal(f.From) + ")")
	case a.Publish != nil:
		ps := a.Publish
		line(ClassAdd, "+", fmt.Sprintf("message → %s partition %d (%s)", Shown(ps.Topic), ps.Partition, Shown(ps.PartitionRule)))
		detail("key:     " + bytesShown(ps.Key))
		val := bytesShown(ps.Value)
		if ps.Copy && ps.Source != nil {
			val += fmt.Sprintf("   (copy of %s partition %d offset %d)", Shown(ps.Source.Topic), ps.Source.Partition, ps.Source.Offset)
		} else if !ps.Copy {
			val += "   (replay record: the original could not be read)"
		}
		detail("value:   " + val)
		detail("headers: " + headersText(ps.Headers) + ", " + HeaderPlan + "=" + Shown(p.ID))
	case a.Compensate != nil:
		cs := a.Compensate
		line(ClassAdd, "+", fmt.Sprintf("POST %s   (Idempotency-Key %s:%d)", Shown(sources.RedactURL(cs.URL)), Shown(p.Short()), a.Index))
		if cs.RequestID != "" {
			line(ClassRemove, "-", fmt.Sprintf("%s call %s stops counting as an effect (compensated)", Shown(a.Step), Shown(cs.RequestID)))
		}
		if cs.ProbeCount != nil {
			detail(fmt.Sprintf("%s effects at the downstream: %d → %d", Shown(a.Step), *cs.ProbeCount, *cs.ProbeCount-1))
		}
	case a.Redrive != nil:
		rs := a.Redrive
		line(ClassAdd, "+", fmt.Sprintf("POST %s   (Idempotency-Key %s:%d)", Shown(sources.RedactURL(rs.URL)), Shown(p.Short()), a.Index))
		if rs.ProbeCount != nil {
			detail(fmt.Sprintf("%s effects at the downstream: %d → %d", Shown(a.Step), *rs.ProbeCount, *rs.ProbeCount+1))
		}
	case a.Manual != nil:
		line(ClassManual, "!", "by hand: "+Shown(a.Manual.Instructions))
		line(ClassManual, "!", fmt.Sprintf("attested: %q", a.Manual.Attest))
	}
	if len(a.Attested) > 0 && a.Reverse == nil && a.Compensate == nil {
		ids := make([]string, 0, len(a.Attested))
		for id := range a.Attested {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			what := Shown(id)
			if id == "*" {
				what = "its effect"
			}
			switch out := a.Attested[id]; out {
			case "compensated", "reversed":
				line(ClassRemove, "-", fmt.Sprintf("%s %s stops counting as an effect (%s)", Shown(a.Step), what, out))
			default:
				line(ClassChange, "~", fmt.Sprintf("%s %s: unknown → %s", Shown(a.Step), what, Shown(out)))
			}
		}
	}
}

// oneLine collapses a statement's whitespace.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// literal is s as a quoted literal ('DONE', Quote), or by Shown's rule
// ("DONE\r") when s has a rune that is not printable.
func literal(s string) string {
	if !printable(s) {
		return Shown(s)
	}
	return Quote(s)
}

func imageText(im Image) string {
	parts := make([]string, len(im))
	for i, f := range im {
		v := "NULL"
		if f.Value != nil {
			v = Shown(*f.Value)
		}
		parts[i] = Shown(f.Name) + " " + v
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func bindingsText(names []string, bizID string, row Image) string {
	seen := map[string]bool{}
	var parts []string
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		v := "?"
		if n == "biz_id" {
			v = literal(bizID)
		} else if x, ok := row.Get(n); ok {
			if x == nil {
				v = "NULL"
			} else {
				v = Shown(*x)
			}
		}
		parts = append(parts, ":"+n+" = "+v)
	}
	return strings.Join(parts, ", ")
}

// bytesShown is a record's key or value for a person: Shown of its bytes
// as text (a key with an ESC or an invalid byte is a quoted Go string, still
// recognisable), the first 300 bytes of a longer one, (null) for none.
func bytesShown(b []byte) string {
	if b == nil {
		return "(null)"
	}
	if len(b) <= 300 {
		return Shown(string(b))
	}
	n := 300
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return Shown(string(b[:n])) + fmt.Sprintf("…(%d bytes)", len(b))
}

// BytesText shows a key or value as text when it is printable UTF-8, else
// as base64 (the audit's after_image of a republish).
func BytesText(b []byte) string {
	if b == nil {
		return "(null)"
	}
	if printable(string(b)) {
		s := string(b)
		if len(s) > 300 {
			s = s[:300] + fmt.Sprintf("…(%d bytes)", len(b))
		}
		return s
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

func headersText(h map[string]string) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = Shown(k) + "=" + Shown(h[k])
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}
