package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/oncebox/oncebox/protocol"
)

// Op statuses the check knows about.
const (
	statusSucceeded   = "succeeded"
	statusFailed      = "failed"
	statusNeedsReview = "needs_review"
	statusRejected    = "rejected"
	statusAwaiting    = "awaiting_approval"
)

// OpRecord is one op as oncebox stored it (a row of oncebox_op).
type OpRecord struct {
	// ID is the op id, the value vendor objects carry under oncebox_op.
	ID string
	// Key is the idempotency key.
	Key string
	// Tool is the tool name, such as "stripe.payment_intent".
	Tool string
	// Status is the op's status.
	Status string
	// VendorRef is the vendor object oncebox recorded as the op's outcome; empty
	// when none was recorded.
	VendorRef string
	// ResultRef is the id the op's stored result names, for an upstream MCP tool's
	// op the worker settled (its CallToolResult's structuredContent.id), where
	// VendorRef stays empty; "" otherwise.
	ResultRef string
	// Amount is the op's args.amount, for the tools that carry one; nil
	// otherwise.
	Amount *int64
	// Tenant is the op's tenant (its label, such as "a").
	Tenant string
}

// VendorObject is one object a fake vendor holds, read from the fake's own
// records, never from oncebox.
type VendorObject struct {
	// Kind is what the object is: "stripe.payment_intent", "stripe.refund",
	// "sendgrid.message", "webhook.effect", "mcp.mail" or "mcpio.mail".
	Kind string
	// ID is the vendor's id (pi_..., re_..., X-Message-Id, effect id, mail id).
	ID string
	// OpID is the object's oncebox_op tag; empty when it has none.
	OpID string
	// Effect is true when the object is a side effect that counts: every
	// refund, message and webhook effect, but only a succeeded payment intent
	// (a declined confirmation leaves a payment intent in
	// requires_payment_method behind, which charged nobody).
	Effect bool
	// Conflict is true when the object carries the marker of a conflicting
	// payload, which oncebox must have refused.
	Conflict bool
	// Amount is the object's amount in the currency's minor unit, for
	// payment intents and refunds; nil for the others.
	Amount *int64
	// Detail is a short description for the report.
	Detail string
	// Account is the vendor account that holds the object, for a vendor that keeps
	// objects per account (Stripe: the Connect account id, or platformAccount); ""
	// for the others, whose objects no account check concerns.
	Account string
}

// Plan is what the harness planned for one idempotency key, before sending it.
type Plan struct {
	// Declined is set for a payment with a card the vendor declines: the only
	// op the workload expects to end failed.
	Declined bool
	// Blind is set for a webhook to the target whose lookup path answers 404:
	// the only op the workload expects may end in needs_review.
	Blind bool
	// Decision is, for an op of the gated tool, what the harness does once the op
	// awaits approval: decisionApprove, decisionReject, or "" (it is left waiting).
	Decision string
	// Compensate is set for a composite op whose last step the receiver refuses for
	// good: the op must fail, its charge refunded once (checkComposite).
	Compensate bool
}

// CheckInput is everything the check compares.
type CheckInput struct {
	// Accepted are the idempotency keys the API accepted (202 or 200), with
	// the tool the harness asked for.
	Accepted map[string]string
	// Ops are the tenant's ops as oncebox stored them.
	Ops []OpRecord
	// Objects are every object the fake vendors hold.
	Objects []VendorObject
	// ConflictsAccepted are keys whose conflicting payload the API accepted
	// instead of answering 422.
	ConflictsAccepted []string
	// Planned is what the harness planned for each key it sent.
	Planned map[string]Plan
	// Double202 are keys the API answered 202 (a new op) more than once.
	Double202 []string
	// Refused are the ids of ops a fake vendor records refusing without acting (the
	// MCP upstream's isError answers, drawn by its faults): each may end failed.
	Refused map[string]bool
	// Approved are the keys of gated ops the harness approved (its approval answered,
	// or answered as already past); Rejected those it rejected.
	Approved, Rejected map[string]bool
	// Ungated are gated keys with the statuses the API answered them with before any
	// decision, when that was not awaiting_approval.
	Ungated map[string][]string
	// Garbled counts, by op id, the calls of the op the HTTP upstream answered with
	// garbage; Malformed, the attempts oncebox recorded as answered with something
	// that is no JSON-RPC message. GarbageSeen says the upstream garbled any call.
	Garbled, Malformed map[string]int
	GarbageSeen        bool
	// AccountTenant maps each tenant's vendor account to the tenant: an object on an
	// account belongs to an op of that tenant, and an object on an account no tenant
	// has belongs to none.
	AccountTenant map[string]string
	// BrokenSessions counts the HTTP upstream's sessions the serve logs say ended on an
	// answer the SDK's client could not decode: garbage oncebox let through, which
	// fails every call in flight on the session.
	BrokenSessions int
	// Uncut are the calls an oversized answer reached whole (hostile.go): not cut at
	// max_result_bytes.
	Uncut []string
	// PeakRSS is the highest peak resident memory of a serve process; RSSBound the most
	// it may be (0: not checked).
	PeakRSS, RSSBound int64
	// CRM is the CRM's record (crm.go): its ops are checked by checkCRM alone.
	CRM CRMInput
	// Audit are the audit log's problems (audit.go: audit.CheckOps on every op of the
	// run, and entries left unsealed), one sentence each.
	Audit []string
}

// Finding is one violation the check found.
type Finding struct {
	// OpID is the op concerned, when there is one.
	OpID string
	// Key is the idempotency key concerned, when known.
	Key string
	// What says what is wrong.
	What string
}

func (f Finding) String() string {
	var b strings.Builder
	if f.Key != "" {
		fmt.Fprintf(&b, "key=%s ", f.Key)
	}
	if f.OpID != "" {
		fmt.Fprintf(&b, "op=%s ", f.OpID)
	}
	b.WriteString(f.What)
	return b.String()
}

// Report is the result of Check.
type Report struct {
	// Duplicates are ops with more than one side effect at a vendor.
	Duplicates []Finding
	// Lost are accepted ops that are missing or not settled, and succeeded
	// ops without a side effect.
	Lost []Finding
	// Mismatched are failed ops that have a side effect anyway, and succeeded
	// ops whose recorded vendor_ref or amount is not the vendor's object's.
	Mismatched []Finding
	// Unplanned are ops that ended failed without a planned decline, or in
	// needs_review outside the target planned to be blind: a promise broken
	// without a duplicate (a valid request refused, a vendor oncebox stopped
	// asking).
	Unplanned []Finding
	// Double202 are keys answered 202 more than once: two callers were each
	// told they created the op.
	Double202 []Finding
	// Orphans are vendor objects whose tag names no op of the run, or that
	// carry no tag.
	Orphans []Finding
	// ConflictLeaks are conflicting payloads that were accepted or reached a
	// vendor.
	ConflictLeaks []Finding
	// Gate are runs of the gated tool the harness did not approve (or with no op),
	// and gated calls the API did not hold for approval.
	Gate []Finding
	// Contagion are ops of the garbling upstream that another call's garbage took
	// down: in needs_review though none of their calls was garbled, or recorded as
	// answered with garbage more often than the upstream garbled their calls.
	Contagion []Finding
	// Composite are composite ops not terminal after the calm, and steps' ops of no
	// composite op (checkComposite); CompositeFigures their counts.
	Composite        []Finding
	CompositeFigures CompositeFigures
	// WrongAccount are vendor objects on another account than the one of their op's
	// tenant: one tenant's side effect on another's account (or the platform's).
	WrongAccount []Finding
	// CRM are the CRM's findings (checkCRM): a step done again after a TTL purge, a
	// composite op ended wrong, an account closed by another tenant's op.
	CRM []Finding
	// Audit are the audit log's problems: an op without its call entry or with two, a
	// status change recorded twice, a last status not the op's, a chain that does not
	// verify, entries the sealer left unsealed.
	Audit []Finding
	// NeedsReview are the ids of the ops in needs_review.
	NeedsReview []string
	// Statuses counts the ops by status.
	Statuses map[string]int
}

// OK reports whether the run kept every promise.
func (r Report) OK() bool {
	return len(r.Duplicates) == 0 && len(r.Lost) == 0 && len(r.Mismatched) == 0 &&
		len(r.Orphans) == 0 && len(r.ConflictLeaks) == 0 && len(r.Unplanned) == 0 && len(r.Double202) == 0 &&
		len(r.Gate) == 0 && len(r.Contagion) == 0 && len(r.WrongAccount) == 0 && len(r.Composite) == 0 && len(r.CRM) == 0 && len(r.Audit) == 0
}

// Findings returns every violation, one per line, duplicates and losses first.
func (r Report) Findings() []string {
	var out []string
	add := func(label string, fs []Finding) {
		for _, f := range fs {
			out = append(out, label+": "+f.String())
		}
	}
	add("DUPLICATE", r.Duplicates)
	add("LOST", r.Lost)
	add("WRONG_ACCOUNT", r.WrongAccount)
	add("MISMATCH", r.Mismatched)
	add("ORPHAN", r.Orphans)
	add("CONFLICT", r.ConflictLeaks)
	add("GATE", r.Gate)
	add("CONTAGION", r.Contagion)
	add("COMPOSITE", r.Composite)
	add("CRM", r.CRM)
	add("AUDIT", r.Audit)
	add("UNPLANNED", r.Unplanned)
	add("DOUBLE_202", r.Double202)
	return out
}

// Check compares what oncebox says happened with what the vendors hold: exactly
// one side effect per succeeded op, the one its vendor_ref (or stored result) names
// and of its amount, on its tenant's account; none per failed op, and no failed op but a planned decline or
// a refusal the vendor records; at most
// one per op in needs_review, and none in needs_review but the blind target's;
// every accepted key stored and settled, answered 202 at most once; no object
// without an op, and no conflicting payload executed; no run of the gated tool but
// one per op the harness approved, every gated call held for approval, and no op
// taken down by another call's garbage (checkGate, checkContagion); every composite
// op terminal, and every step's op one of a composite op (checkComposite); and no
// problem in the audit log (in.Audit).
func Check(in CheckInput) Report {
	rep := Report{Statuses: map[string]int{}}

	byID := make(map[string]OpRecord, len(in.Ops))
	byKey := make(map[string]OpRecord, len(in.Ops))
	for _, op := range in.Ops {
		byID[op.ID] = op
		byKey[op.Key] = op
		rep.Statuses[op.Status]++
	}

	// effects counts an op's side effects on every account (two, one on the wrong
	// account, are a duplicate); home, those on its tenant's account (one, on the
	// wrong account, leaves the op's own account without it: lost).
	effects, home := map[string][]VendorObject{}, map[string]int{}
	for _, obj := range in.Objects {
		if obj.Conflict {
			rep.ConflictLeaks = append(rep.ConflictLeaks, Finding{OpID: obj.OpID, Key: byID[obj.OpID].Key,
				What: fmt.Sprintf("a conflicting payload reached the vendor: %s %s %s", obj.Kind, obj.ID, obj.Detail)})
		}
		op, known := byID[obj.OpID]
		switch {
		case obj.OpID == "":
			rep.Orphans = append(rep.Orphans, Finding{What: fmt.Sprintf("%s %s carries no oncebox_op tag %s", obj.Kind, obj.ID, obj.Detail)})
			continue
		case !known:
			rep.Orphans = append(rep.Orphans, Finding{OpID: obj.OpID,
				What: fmt.Sprintf("%s %s is tagged with an op that does not exist %s", obj.Kind, obj.ID, obj.Detail)})
			continue
		case obj.Kind != kindOf(op.Tool):
			rep.Orphans = append(rep.Orphans, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s %s is tagged with an op of tool %s", obj.Kind, obj.ID, op.Tool)})
			continue
		}
		wrong := wrongAccount(in.AccountTenant, obj, op)
		if wrong != nil {
			rep.WrongAccount = append(rep.WrongAccount, *wrong)
		}
		if obj.Effect {
			effects[obj.OpID] = append(effects[obj.OpID], obj)
			if wrong == nil {
				home[obj.OpID]++
			}
		}
	}

	for _, op := range in.Ops {
		if op.Tool == toolComposite {
			// A composite op makes no side effect of its own: its steps' ops do
			// (checkComposite).
			continue
		}
		if isCRMTool(op.Tool) {
			continue // checkCRM, from the CRM's records
		}
		got := effects[op.ID]
		switch {
		case len(got) > 1:
			rep.Duplicates = append(rep.Duplicates, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op in status %s has %d side effects: %s", op.Tool, op.Status, len(got), describe(got))})
		case op.Status == statusSucceeded && len(got) == 0:
			rep.Lost = append(rep.Lost, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op succeeded but the vendor holds no side effect for it", op.Tool)})
		case op.Status == statusSucceeded && home[op.ID] == 0:
			rep.Lost = append(rep.Lost, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op of tenant %s succeeded but its account holds no side effect for it, another does: %s", op.Tool, op.Tenant, describe(got))})
		case op.Status == statusFailed && len(got) == 1:
			rep.Mismatched = append(rep.Mismatched, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op failed but the vendor holds a side effect for it: %s", op.Tool, describe(got))})
		case op.Status == statusSucceeded && len(got) == 1:
			if what := mismatch(op, got[0]); what != "" {
				rep.Mismatched = append(rep.Mismatched, Finding{OpID: op.ID, Key: op.Key, What: what})
			}
		}
		plan, planned := in.Planned[op.Key]
		switch op.Status {
		case statusSucceeded:
		case statusFailed:
			if planned && !plan.Declined && !in.Refused[op.ID] {
				rep.Unplanned = append(rep.Unplanned, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("%s op failed but the workload planned no refusal for it", op.Tool)})
			}
		case statusNeedsReview:
			rep.NeedsReview = append(rep.NeedsReview, op.ID)
			if planned && !plan.Blind {
				rep.Unplanned = append(rep.Unplanned, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("%s op in needs_review, but only the blind webhook target's ops may be: the vendor could have been asked", op.Tool)})
			}
		case statusRejected:
			if op.Tool != toolGated || !in.Rejected[op.Key] {
				rep.Unplanned = append(rep.Unplanned, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("%s op rejected, but the harness did not reject it", op.Tool)})
			}
		case statusAwaiting:
			if _, ok := in.Accepted[op.Key]; ok && (op.Tool != toolGated || in.Approved[op.Key] || in.Rejected[op.Key]) {
				rep.Lost = append(rep.Lost, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("%s op still awaits approval, though the harness decided it or it needs none", op.Tool)})
			}
		default:
			if _, ok := in.Accepted[op.Key]; ok {
				rep.Lost = append(rep.Lost, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("%s op accepted but not settled: status %s", op.Tool, op.Status)})
			}
		}
	}

	keys := make([]string, 0, len(in.Accepted))
	for key := range in.Accepted {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		op, ok := byKey[key]
		switch {
		case !ok:
			rep.Lost = append(rep.Lost, Finding{Key: key, What: fmt.Sprintf("%s op accepted by the API but not stored", in.Accepted[key])})
		case op.Tool != in.Accepted[key]:
			rep.Mismatched = append(rep.Mismatched, Finding{OpID: op.ID, Key: key,
				What: fmt.Sprintf("stored as tool %s, sent as %s", op.Tool, in.Accepted[key])})
		}
	}
	for _, key := range in.ConflictsAccepted {
		rep.ConflictLeaks = append(rep.ConflictLeaks, Finding{Key: key, OpID: byKey[key].ID,
			What: "the same key with another payload was accepted instead of refused with 422"})
	}
	for _, key := range in.Double202 {
		rep.Double202 = append(rep.Double202, Finding{Key: key, OpID: byKey[key].ID,
			What: "the API answered 202 (a new op) more than once for this key"})
	}
	rep.Gate = checkGate(in, byID)
	rep.Contagion = checkContagion(in)
	rep.Composite, rep.CompositeFigures = checkComposite(in, byID)
	rep.CRM = checkCRM(in, byID)
	for _, p := range in.Audit {
		rep.Audit = append(rep.Audit, Finding{What: p})
	}
	slices.Sort(rep.NeedsReview)
	return rep
}

// wrongAccount returns the finding of obj, held on an account, when op (the op its
// tag names) is not of the tenant whose account that is; nil when it is, or when
// obj is of a vendor without accounts.
func wrongAccount(accountTenant map[string]string, obj VendorObject, op OpRecord) *Finding {
	if obj.Account == "" || accountTenant == nil {
		return nil
	}
	owner, ok := accountTenant[obj.Account]
	if ok && owner == op.Tenant {
		return nil
	}
	want := "none"
	for acct, t := range accountTenant {
		if t == op.Tenant {
			want = acct
		}
	}
	holder := "no tenant's"
	if ok {
		holder = "tenant " + owner + "'s"
	}
	return &Finding{OpID: op.ID, Key: op.Key,
		What: fmt.Sprintf("%s %s on %s (%s account) tagged with op %s of tenant %s, whose account is %s %s",
			obj.Kind, obj.ID, obj.Account, holder, op.ID, op.Tenant, want, obj.Detail)}
}

// checkGate finds the gated tool's runs the harness did not approve: each run must
// carry the op id of an op whose approval the harness had answered (a second run of
// an approved op is a duplicate, found above); and the gated calls the API answered
// with another status than awaiting_approval before any decision.
func checkGate(in CheckInput, byID map[string]OpRecord) []Finding {
	var out []Finding
	for _, obj := range in.Objects {
		if obj.Kind != kindMCPWipe || !obj.Effect {
			continue
		}
		op, known := byID[obj.OpID]
		switch {
		case !known:
			out = append(out, Finding{OpID: obj.OpID, What: fmt.Sprintf("the gated tool ran (%s %s) for no op of the run: no approval could have been given", obj.ID, obj.Detail)})
		case !in.Approved[op.Key]:
			out = append(out, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("the gated tool ran (%s %s) for an op the harness did not approve (status %s, rejected by the harness: %t)", obj.ID, obj.Detail, op.Status, in.Rejected[op.Key])})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(in.Ungated)) {
		out = append(out, Finding{Key: key,
			What: fmt.Sprintf("a call of the gated tool was answered %v before any decision, not awaiting_approval", in.Ungated[key])})
	}
	return out
}

// checkContagion finds the ops of the garbling upstream that another call's garbage
// took down: the garbage answer's own call may fail and be retried or reconciled, but
// an op none of whose calls was garbled must not end in needs_review while the
// upstream garbles, and oncebox must not record more garbage answers for an op than
// the upstream sent it.
func checkContagion(in CheckInput) []Finding {
	var out []Finding
	if in.BrokenSessions > 0 {
		out = append(out, Finding{What: fmt.Sprintf("the upstream's session ended %d times on an answer that could not be decoded: garbage reached the SDK's client, and every call in flight on the session lost its answer", in.BrokenSessions)})
	}
	for _, u := range in.Uncut {
		out = append(out, Finding{What: "an oversized answer of the upstream was not cut at max_result_bytes: " + u})
	}
	if in.RSSBound > 0 && in.PeakRSS > in.RSSBound {
		out = append(out, Finding{What: fmt.Sprintf("a serve process's peak resident memory reached %d MiB, past %d MiB: an upstream's answer was read whole", in.PeakRSS>>20, in.RSSBound>>20)})
	}
	for _, op := range in.Ops {
		if op.Tool != toolMCP && op.Tool != toolGated {
			continue
		}
		if op.Status == statusNeedsReview && in.GarbageSeen && in.Garbled[op.ID] == 0 {
			out = append(out, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op in needs_review while the upstream garbled answers, none of them its own: another call's garbage took it down", op.Tool)})
		}
		if n := in.Malformed[op.ID]; n > in.Garbled[op.ID] {
			out = append(out, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op has %d attempts recorded as answered with garbage, but the upstream garbled %d of its calls: another call's garbage was taken for its answer", op.Tool, n, in.Garbled[op.ID])})
		}
	}
	return out
}

// mismatch says how a succeeded op's record differs from the one object the
// vendor holds for it, or returns "".
func mismatch(op OpRecord, obj VendorObject) string {
	switch {
	case op.VendorRef == "" && op.ResultRef != "" && op.ResultRef != obj.ID:
		return fmt.Sprintf("%s op succeeded with a result naming %q, but the vendor's object is %s", op.Tool, op.ResultRef, obj.ID)
	case op.VendorRef != obj.ID && (op.VendorRef != "" || op.ResultRef == ""):
		return fmt.Sprintf("%s op succeeded with vendor_ref %q, but the vendor's object is %s", op.Tool, op.VendorRef, obj.ID)
	case op.Amount != nil && obj.Amount != nil && *op.Amount != *obj.Amount:
		return fmt.Sprintf("%s op asked for amount %d, but the vendor's object %s has %d", op.Tool, *op.Amount, obj.ID, *obj.Amount)
	case op.Amount != nil && obj.Amount == nil:
		return fmt.Sprintf("%s op asked for amount %d, but the vendor's object %s carries none", op.Tool, *op.Amount, obj.ID)
	}
	return ""
}

// kindOf returns the kind of vendor object a tool creates.
func kindOf(tool string) string {
	switch tool {
	case protocol.ToolPaymentIntent:
		return kindPaymentIntent
	case protocol.ToolRefund:
		return kindRefund
	case protocol.ToolMail:
		return kindMessage
	case protocol.ToolWebhookPost:
		return kindEffect
	case toolMCP:
		return kindMCPMail
	case toolMCPStdio:
		return kindMCPStdioMail
	case toolGated:
		return kindMCPWipe
	}
	return ""
}

func describe(objs []VendorObject) string {
	parts := make([]string, 0, len(objs))
	for _, o := range objs {
		parts = append(parts, strings.TrimSpace(o.Kind+" "+o.ID+" "+o.Detail))
	}
	return strings.Join(parts, "; ")
}
