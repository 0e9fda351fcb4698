// Package inspect turns the evidence read about one operation into steps, a
// timeline, findings and one verdict (docs/verdicts.md). Every function here
// is pure: it takes the plain structs of package sources and does no I/O, so
// each rule is testable with a table of cases and no database. The rules
// form one ordered table (rules.go) whose order is the verdict precedence.
package inspect

// Code names a verdict or a finding (docs/verdicts.md). Verdict codes are
// contract: scripts compare them.
type Code string

// Severity is how urgent a verdict is: ok, watch, action, or none for
// NOT_FOUND.
type Severity string

// Verdict codes, plus three that opctl adds where the contract is silent
// (docs/verdicts.md): READ_ERROR (a MySQL query the verdict needs failed;
// also one finding per failed query), INCOMPLETE and FAILED.
const (
	NotFound            Code = "NOT_FOUND"
	InFlight            Code = "IN_FLIGHT"
	RepairIncomplete    Code = "REPAIR_INCOMPLETE"
	DuplicateEffect     Code = "DUPLICATE_EFFECT"
	UnknownOutcome      Code = "UNKNOWN_OUTCOME"
	WronglySkipped      Code = "WRONGLY_SKIPPED"
	MissingEffect       Code = "MISSING_EFFECT"
	StateBehind         Code = "STATE_BEHIND"
	Stranded            Code = "STRANDED"
	ReadError           Code = "READ_ERROR"
	WillRedeliver       Code = "WILL_REDELIVER"
	Incomplete          Code = "INCOMPLETE"
	CompleteUncommitted Code = "COMPLETE_UNCOMMITTED"
	Failed              Code = "FAILED"
	SkippedOK           Code = "SKIPPED_OK"
	Complete            Code = "COMPLETE"
)

// Finding codes that never become a verdict: they explain what was seen.
const (
	// UnknownStatus: the state row's status is in no list of the config.
	UnknownStatus Code = "UNKNOWN_STATUS"
	// EntityNotFound: a skip was recorded but the entity row is missing.
	EntityNotFound Code = "ENTITY_NOT_FOUND"
	// MessageGone: the message is below the log start (deleted by retention).
	MessageGone Code = "MESSAGE_GONE"
	// Unverified: a remote step with neither intent nor probe; what opctl
	// knows of it comes from the commit alone.
	Unverified Code = "UNVERIFIED_STEP"
)

// Severities.
const (
	SeverityNone   Severity = "—"
	SeverityOK     Severity = "ok"
	SeverityWatch  Severity = "watch"
	SeverityAction Severity = "action"
)

// Precedence returns the verdict codes, highest precedence first: the codes
// of the verdict rules, in the order of the rule table (docs/verdicts.md).
// The verdict of an operation is the first of them among its findings.
func Precedence() []Code {
	out := make([]Code, 0, len(table))
	for _, ru := range table {
		if ru.isVerdict() {
			out = append(out, ru.code)
		}
	}
	return out
}

// IsVerdict reports whether code is a verdict code (not an informational
// finding).
func IsVerdict(code Code) bool { return SeverityOf(code) != "" }

// SeverityOf returns the severity of a verdict code, "" for any other code.
func SeverityOf(code Code) Severity {
	for _, ru := range table {
		if ru.code == code {
			return ru.severity
		}
	}
	return ""
}

// Explanation is what `opctl explain` prints for a verdict.
type Explanation struct {
	Code     Code     `json:"code"`
	Severity Severity `json:"severity"`
	Meaning  string   `json:"meaning"`
	Causes   []string `json:"causes"`
	Safe     []string `json:"safe"`
	Unsafe   []string `json:"unsafe"`
	Repair   string   `json:"repair"`
}

// Explain returns the explanation of a verdict code and whether it exists.
func Explain(code Code) (Explanation, bool) {
	e, ok := explanation(code)
	if ok {
		e.Code = code
		e.Severity = SeverityOf(code)
	}
	return e, ok
}

// explanation is what Explain says about a verdict code, but its code and
// severity.
func explanation(code Code) (Explanation, bool) {
	switch code {
	case NotFound:
		return Explanation{
			Meaning: "opctl found no state row, no evidence, no intent, no idempotency record and no message for this id in this pipeline.",
			Causes: []string{
				"a typo in the id, or the wrong pipeline (--pipeline)",
				"the message was never consumed (check the topic with the producer's key)",
				"the rows were deleted by retention (state/idempotency rows shorter-lived than the topic)",
			},
			Safe:   []string{"check the id and the pipeline; run `opctl where <id>` without --pipeline to try every pipeline"},
			Repair: "none: there is nothing to repair",
		}, true
	case InFlight:
		return Explanation{
			Meaning: "a live consumer holds the operation's lease (owner set, lease_until in the future by the database clock): it is being processed right now.",
			Causes: []string{
				"normal processing of a slow operation",
				"the rebalance window: a kicked-out member still believes it owns the operation (seed 001)",
			},
			Safe:   []string{"wait for lease_until and run `opctl where` again", "check the owner is alive (consumer logs, group members)"},
			Unsafe: []string{"any repair while the lease is live: the owner may finish the step you are repairing; `--force` never bypasses a live lease"},
			Repair: "refused until the lease expires",
		}, true
	case DuplicateEffect:
		return Explanation{
			Meaning: "a step's effect exists more than once: two debits, two stock locks, two non-idempotent notifications.",
			Causes: []string{
				"the message was redelivered after the effect but before the offset commit, and the step had no guard (seed 000: broker blip before commitSync)",
				"a remote call timed out at the caller but took effect at the callee, then was retried with a new request id (seed 001)",
			},
			Safe:   []string{"reverse the newest duplicate with `opctl repair plan` (one reversal per extra row)", "for a remote step, compensate through the downstream or record a manual fix with --attest"},
			Unsafe: []string{"replaying the message: it would add a third effect", "deleting evidence rows by hand: the audit would lose the trail"},
			Repair: "local step: reverse (newest duplicate first); remote step: compensate_remote if configured, else manual",
		}, true
	case UnknownOutcome:
		return Explanation{
			Meaning: "a remote call was sent (an intent row exists) but nothing says whether it took effect: no ack, and no conclusive probe.",
			Causes: []string{
				"the consumer died or was rebalanced between the call and the ack",
				"the call timed out at the caller (it may still have succeeded at the callee: seed 001)",
				"the probe endpoint is down or answered something opctl was not told how to read",
			},
			Safe:   []string{"probe the downstream by request id (the plan does it first)", "if there is no probe, ask the downstream team and record the answer with `--action manual --attest`"},
			Unsafe: []string{"replaying the step before the outcome is known: a non-idempotent downstream would act twice"},
			Repair: "probe; applied → advance_state past the step then republish from the next; absent → rewind_state then republish; no probe → manual",
		}, true
	case WronglySkipped:
		return Explanation{
			Meaning: "the consumer recorded SKIPPED for a message whose effect is still due: the entity is not in a cancelling state and the effect is missing.",
			Causes: []string{
				"messages of one key handled out of order after a rebalance: SHIPPED before PAID, so PAID saw SHIPPED != PAID (seed 003)",
				"a skip rule that tests equality of states instead of the entity's lifecycle",
			},
			Safe:   []string{"flip the record SKIPPED → PENDING and republish with opctl-force-effect (the plan does both, guarded)"},
			Unsafe: []string{"deleting the idempotency row by hand: a redelivery could then apply other effects twice"},
			Repair: "flip_skipped (CAS) then republish with opctl-force-effect: <step>",
		}, true
	case MissingEffect:
		return Explanation{
			Meaning: "the state row says a step was done, but the step left no evidence.",
			Causes: []string{
				"the state was advanced outside the effect's transaction",
				"the evidence was deleted or rolled back",
				"the evidence query in opctl.yaml does not match what the consumer writes",
			},
			Safe:   []string{"check the evidence query; then rewind the state to before the step and republish"},
			Unsafe: []string{"advancing further: later steps would build on an effect that does not exist"},
			Repair: "rewind_state to before the step then republish",
		}, true
	case StateBehind:
		return Explanation{
			Meaning: "a step's effect exists but the state row was not advanced past it: a resume from the state row would do the step again.",
			Causes: []string{
				"the consumer died between the effect and the state update (they were not in one transaction)",
				"a naive consumer that writes the state row after the effect",
			},
			Safe:   []string{"advance the state past the applied step (CAS on the version), then republish if not terminal"},
			Unsafe: []string{"letting the message be redelivered first: the step would run twice"},
			Repair: "advance_state; then republish if not terminal",
		}, true
	case Stranded:
		return Explanation{
			Meaning: "the operation is not terminal and Kafka will not deliver its message again: the group committed past it, or the message is no longer retained.",
			Causes: []string{
				"the offset was committed before the steps finished (early commit / auto-commit)",
				"the consumer skipped the message after an error",
				"the offset was reset to latest after offsets expired",
			},
			Safe:   []string{"rewind the state to the first missing step if needed, then republish with opctl-from-step"},
			Unsafe: []string{"resetting the group's offset: every other message after it would be reprocessed"},
			Repair: "rewind_state (if needed) then republish with opctl-plan and opctl-from-step headers",
		}, true
	case RepairIncomplete:
		return Explanation{
			Meaning: "a repair plan of this operation stopped part-way: opctl's audit shows an action left publishing or compensating, or a plan whose later actions never ran after an earlier one took effect. What the operation needs now is that plan finished, not a new one.",
			Causes: []string{
				"Kafka or the downstream failed during the apply (a republish left 'publishing')",
				"the apply was interrupted (Ctrl-C, SIGTERM, a killed pod) between two actions",
				"a later action's guard failed after an earlier action took effect",
			},
			Safe: []string{
				"opctl repair apply PLAN_ID --dry-run, then without --dry-run: the plan is read from the audit, resumes at the first action that did not take effect, and each remaining action's guards decide",
			},
			Unsafe: []string{"a new plan before this one is finished: its guards would be written against a half-repaired state"},
			Repair: "finish the plan: opctl repair apply PLAN_ID",
		}, true
	case ReadError:
		return Explanation{
			Meaning: "a MySQL query opctl needs to judge the operation failed (a step's evidence or intent query, the state, idempotency or audit query, the entity query of a skip): what it would have shown is unknown, so opctl gives no ok or watch verdict and plans no repair. The report is partial (exit 6): sources.mysql and the READ_ERROR findings name each failed query and the server's error.",
			Causes: []string{
				"a typo in a query of opctl.yaml: a column or table that does not exist (Error 1054, 1146)",
				"the schema changed under the configuration (a renamed column, a dropped table)",
				"the read-only user lacks SELECT on a table (Error 1142)",
				"the query did not answer within --timeout, or the server was restarting",
			},
			Safe: []string{
				"read which query failed and why (where names it); fix it in opctl.yaml (each step's evidence or intent, entity.query) or the schema or grant it reads, then run `opctl where` again",
				"`opctl schema check` compares the configured tables and columns with the database",
				"for a timeout: run `opctl where` again, or with a larger --timeout",
			},
			Unsafe: []string{
				"reading what the failed query would have returned as empty: a broken debit query shows no debit, not a missing one, and hides a double debit",
				"repairing by hand from this report: the failed query's rows were not read",
			},
			Repair: "none until every query reads: `opctl repair plan` refuses to plan from a read that failed in part",
		}, true
	case WillRedeliver:
		return Explanation{
			Meaning: "the operation is not terminal and Kafka will deliver its message again (committed offset ≤ message offset, still retained): the consumer's resume decides the outcome.",
			Causes:  []string{"the consumer died or was rebalanced mid-way and has not restarted yet", "the group is lagging"},
			Safe:    []string{"watch: run `opctl where` again after the consumer catches up", "make sure the resume is safe: with an anchored consumer it resumes from the state row"},
			Unsafe:  []string{"republishing now: the message would be processed twice"},
			Repair:  "none while Kafka will redeliver",
		}, true
	case Incomplete:
		return Explanation{
			Meaning: "the operation is not terminal, and opctl cannot tell whether Kafka will deliver it again: the message was not located, Kafka could not be read, or there is no state row to anchor the position.",
			Causes: []string{
				"Kafka unreachable (the verdict is then partial)",
				"no stored partition/offset and no timestamp to search from",
				"an idempotency record in PENDING with no state row",
			},
			Safe:   []string{"fix Kafka access or configure state.partition/state.offset, then run `opctl where` again"},
			Unsafe: []string{"republishing before the position is known: the message may still be redelivered"},
			Repair: "none until the position is known",
		}, true
	case CompleteUncommitted:
		return Explanation{
			Meaning: "the operation is terminal, but the group's offset is not committed past its message: it will be read again.",
			Causes:  []string{"the consumer died after the last step and before the commit (seed 000's broker blip)"},
			Safe:    []string{"nothing, if the consumer acknowledges a redelivered message whose state is terminal (anchored design)", "otherwise watch the redelivery: a naive consumer would redo every unguarded step"},
			Unsafe:  []string{"committing the offset by hand for the whole group"},
			Repair:  "none",
		}, true
	case Failed:
		return Explanation{
			Meaning: "the consumer gave up on the operation: its state is in the configured failed list.",
			Causes:  []string{"a business rejection (insufficient balance) or exhausted retries"},
			Safe:    []string{"read the steps: effects that exist were not rolled back by opctl; decide with the owning team"},
			Repair:  "none automatic; use --action with --force for a specific action",
		}, true
	case SkippedOK:
		return Explanation{
			Meaning: "the consumer skipped the message and the entity is in a cancelling state (refunded, cancelled): the skip was right.",
			Safe:    []string{"nothing to do"},
			Repair:  "none",
		}, true
	case Complete:
		return Explanation{
			Meaning: "the operation is terminal, every step's effect exists exactly once, and the offset is committed past its message.",
			Safe:    []string{"nothing to do"},
			Repair:  "none",
		}, true
	}
	return Explanation{}, false
}
