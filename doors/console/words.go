package console

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/steps"
	"github.com/oncebox/oncebox/vendorapi"
)

// tokenActor matches an actor recorded for an API token (tenant.Principal.Actor):
// "acme token 11 (approver)", then the token's person, then " (cli)" when the CLI
// recorded it.
var tokenActor = regexp.MustCompile(`^\S+ token (\d+) \(([a-z]+)\)(?: (.+?))?( \(cli\))?$`)

// ActorName names who did something in people's words, once: the token's person
// when it has one ("alice@example.com (approver)"), else the token ("approver token
// 11"); oncebox's own actors by what they are.
func ActorName(actor string) string {
	if m := tokenActor.FindStringSubmatch(actor); m != nil {
		s := m[2] + " token " + m[1]
		if m[3] != "" {
			s = m[3] + " (" + m[2] + ")"
		}
		if m[4] != "" {
			s += ", from the CLI"
		}
		return s
	}
	switch actor {
	case "worker":
		return "oncebox"
	case "reconciler":
		return "oncebox's reconciler"
	case "steps":
		return "oncebox's step runner"
	case "expiry":
		return "oncebox (the wait ran out)"
	case "purge":
		return "oncebox (retention)"
	case "agent":
		return "the agent"
	}
	if name, ok := strings.CutPrefix(actor, "cli:"); ok {
		return name + ", from the CLI"
	}
	return actor
}

// StatusWords says an op's status in people's words: "waiting to be sent" for
// pending.
func StatusWords(st string) string {
	switch protocol.Status(st) {
	case protocol.StatusAwaitingApproval:
		return "waiting for approval"
	case protocol.StatusRejected:
		return "rejected: not sent"
	case protocol.StatusPending:
		return "waiting to be sent"
	case protocol.StatusDispatching:
		return "being sent"
	case protocol.StatusSucceeded:
		return "done"
	case protocol.StatusFailed:
		return "failed: not done"
	case protocol.StatusUnknown:
		return "sent, answer not known yet"
	case protocol.StatusNeedsReview:
		return "waiting for a person to check"
	case steps.NotRun:
		return "not run yet"
	}
	return strings.ReplaceAll(st, "_", " ")
}

// outcomeWords says what a dispatch attempt's outcome means.
func outcomeWords(outcome string) string {
	switch outcome {
	case "succeeded":
		return "done"
	case "retryable":
		return "not now (oncebox tries again)"
	case "permanent":
		return "refused for good"
	case "unknown":
		return "no clear answer: it may or may not have happened"
	case "unanswered":
		return "no answer (oncebox tries again under the same key)"
	case "":
		return "no answer yet"
	}
	return outcome
}

// OpMoney is what a lookup shows of a money op (its tool has an Amount): its amount
// in words, against its payment for a refund (pay, from Outbox.PaymentOf; nil
// otherwise), and its arguments as the redaction rules allow ("" when its tool
// redacts them). Both are "" for an op that moves no money. The console and `oncebox
// lookup` show the same.
func OpMoney(reg *outbox.Registry, op *outbox.Op, pay *outbox.Payment) (amount, args string) {
	tool, ok := reg.Lookup(op.Tool)
	if !ok || tool.Amount == nil {
		return "", ""
	}
	if tool.Redact == nil {
		args = compactJSON(op.Args)
	}
	n, cur, has := tool.Amount(op.Args)
	switch {
	case pay != nil:
		amount = pay.Describe(n, has)
	case has:
		amount = money.Format(n, cur)
	}
	return amount, args
}

// RefundAmount is the amount of a refund listed under its payment, in the payment's
// currency (a refund's arguments name none): "all that was left" for a refund without
// an amount. payment may be nil (a payment oncebox did not make).
func RefundAmount(reg *outbox.Registry, refund, payment *outbox.Op) string {
	tool, ok := reg.Lookup(refund.Tool)
	if !ok || tool.Amount == nil {
		return ""
	}
	n, cur, has := tool.Amount(refund.Args)
	if !has {
		return "all that was left"
	}
	if cur == "" && payment != nil {
		if pt, ok := reg.Lookup(payment.Tool); ok && pt.Amount != nil {
			_, cur, _ = pt.Amount(payment.Args)
		}
	}
	return money.Format(n, cur)
}

// RelatedPayment is the payment of rel as a refund's amount is described against
// (outbox.Payment): its amount and what its succeeded refunds took, whether they
// named it by its PaymentIntent or by its charge; nil when oncebox did not make it.
func RelatedPayment(reg *outbox.Registry, rel *outbox.Related) *outbox.Payment {
	if rel == nil || rel.Payment == nil {
		return nil
	}
	pt, ok := reg.Lookup(rel.Payment.Tool)
	if !ok || pt.Amount == nil {
		return nil
	}
	p := &outbox.Payment{Ref: rel.Payment.VendorRef}
	if p.Amount, p.Currency, p.Known = pt.Amount(rel.Payment.Args); !p.Known {
		return nil
	}
	for _, rf := range rel.Refunds {
		tool, ok := reg.Lookup(rf.Tool)
		if !ok || tool.Amount == nil || rf.Status != protocol.StatusSucceeded {
			continue
		}
		n, _, has := tool.Amount(rf.Args)
		if !has {
			n = p.Amount // a full refund: nothing was left after it
		}
		p.Refunded = min(p.Refunded+n, p.Amount)
	}
	return p
}

// stepLabel names a composite op's step by the caller's key: "checkout-7 › charge"
// for the key "~step/<parent op id>/charge" of the op whose key is checkout-7.
func stepLabel(parentKey, name string) string {
	return parentKey + " › " + name
}

// reviewWords is what a Review item says before any JSON: a headline, what is known,
// what is not, and what to check.
type reviewWords struct {
	Headline, Known, Unknown, Check string
}

// reviewDetail is what explainReview reads of the op's latest event.
type reviewDetail struct {
	Decision string `json:"decision"`
	Error    string `json:"error"`
	Why      string `json:"why"`
	Objects  []struct {
		ID string `json:"id"`
	} `json:"objects"`
	Found []string `json:"found"`
}

// explainReview says why op waits for a person, in a support person's words, from its
// latest event (last; nil when none was recorded) and its stored error.
func explainReview(op *outbox.Op, last *outbox.Event) reviewWords {
	var d reviewDetail
	if last != nil {
		_ = json.Unmarshal(last.Detail, &d)
	}
	vendor, obj := vendorName(op.Vendor), strings.TrimPrefix(objectNoun(op.Tool), "the ")
	search := fmt.Sprintf("Search %s for the idempotency key %s (or the metadata %s = %s).", vendor, op.VendorKey, vendorapi.TagKey, op.ID)
	ids := d.Found
	for _, o := range d.Objects {
		ids = append(ids, o.ID)
	}
	switch {
	case op.NothingSent():
		return reviewWords{Headline: "Nothing was carried out: every request failed before " + vendor + " acted",
			Known:   fmt.Sprintf("oncebox tried %d time(s); %s refused or could not take each request, so nothing happened.", op.Attempts, vendor),
			Unknown: "Nothing: this " + obj + " did not happen.",
			Check:   "Read the last error below; once its cause is fixed, send it again, or mark it failed."}
	case d.Decision == reconcile.Duplicate:
		return reviewWords{Headline: fmt.Sprintf("%s holds %d %ss made for this one op", vendor, len(ids), obj),
			Known:   fmt.Sprintf("%s holds these objects, each tagged with this op: %s.", vendor, strings.Join(ids, ", ")),
			Unknown: "Which of them is the one meant; the others may be charged twice.",
			Check:   fmt.Sprintf("Open each in %s; keep the one that belongs to the order, cancel or refund the others, then resolve as succeeded with the one kept.", vendor)}
	case d.Decision == reconcile.LookupUnavailable || d.Decision == reconcile.LookupFailed:
		return reviewWords{Headline: fmt.Sprintf("We don't know whether this %s happened", obj),
			Known:   fmt.Sprintf("The request went to %s without a clear answer, and oncebox cannot ask %s about it (%s).", vendor, vendor, dash(d.Error)),
			Unknown: fmt.Sprintf("Whether %s carried it out.", vendor),
			Check:   search + " Found: resolve as succeeded with its id. Not found: send it again."}
	case d.Decision == reconcile.NoneReview || d.Decision == reconcile.AttemptsExhausted:
		return reviewWords{Headline: fmt.Sprintf("%s shows no %s for this op", vendor, obj),
			Known:   fmt.Sprintf("oncebox sent it %d time(s) without a clear answer, and %s holds no %s made for it.", op.Attempts, vendor, obj),
			Unknown: fmt.Sprintf("Whether %s still has a request it has not shown yet.", vendor),
			Check:   search + " Not found: send it again (with a new vendor key if the old one failed). Found: resolve as succeeded."}
	case d.Decision == reconcile.JobDiscarded:
		return reviewWords{Headline: "Its sending was cancelled before it finished",
			Known:   "The job that sends this op was cancelled or discarded.",
			Unknown: fmt.Sprintf("Whether a request it made reached %s.", vendor),
			Check:   search + " Then resolve, or send it again."}
	case last != nil && last.Kind == "steps":
		return reviewWords{Headline: "One of its steps needs a person",
			Known: "A step of this composite op is waiting for a person (" + dash(d.Why) + ").", Unknown: "How that step ended.",
			Check: "Open the step from the lookup of this op, settle it, then send this op again."}
	}
	return reviewWords{Headline: fmt.Sprintf("We don't know whether this %s happened", obj),
		Known:   "oncebox could not settle it on its own: " + lastWhy(op, last) + ".",
		Unknown: fmt.Sprintf("Whether %s carried it out.", vendor),
		Check:   search + " Found: resolve as succeeded with its id. Not found: send it again or mark it failed."}
}

// lastWhy is the latest event's sentence, or the op's stored error.
func lastWhy(op *outbox.Op, last *outbox.Event) string {
	if last != nil {
		return DecisionSentence(op, *last)
	}
	var e struct {
		Code, Message string
	}
	_ = json.Unmarshal(op.Error, &e)
	return dash(strings.TrimSpace(e.Message + " " + e.Code))
}

// dash is s, or "—" when s is empty.
func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
