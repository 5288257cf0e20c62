package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncebox/oncebox/doors/console"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// runLookup is `oncebox lookup --tenant T TERM`: everything support needs about the op
// TERM names (its key, op id, vendor reference such as pi_… or a SendGrid message id,
// a payment's charge ch_…), with the payment it is or refunds and every refund of
// that payment, or the list of the ops of the conversation TERM. It only reads.
func runLookup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lookup", flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant name")
	asJSON := fs.Bool("json", false, "print JSON")
	cfg, logger, err := parseServerArgsFor(fs, args, showOnly(cellSettings))
	if err != nil {
		return err
	}
	if err := inTenantCell(ctx, &cfg, *tenantName); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &exitError{code: 2, err: errors.New("usage: oncebox lookup --tenant T KEY|OP_ID|VENDOR_REF|CHARGE|CONVERSATION")}
	}
	srv, err := offline(ctx, cfg, logger, true)
	if err != nil {
		return err
	}
	defer srv.Close()
	tid, err := tenantID(ctx, srv, *tenantName)
	if err != nil {
		return err
	}
	ops, err := srv.Outbox().Find(ctx, tid, fs.Arg(0), lookupMaxListed)
	if err != nil {
		return err
	}
	switch len(ops) {
	case 0:
		return fmt.Errorf("tenant %q has no op whose key, op id, vendor reference or conversation is %q", *tenantName, fs.Arg(0))
	case 1:
	default:
		return printFound(os.Stdout, ops, *asJSON)
	}
	op := ops[0]
	h, err := srv.Outbox().History(ctx, tid, op.ID)
	if err != nil {
		return err
	}
	evs, err := srv.Events().ForOp(ctx, op.Vendor, op.ID)
	if err != nil {
		return err
	}
	rel, err := srv.Outbox().Related(ctx, tid, op)
	if err != nil {
		return err
	}
	// A refund's amount against its payment, whether it names it by PaymentIntent or
	// by charge (the console does the same).
	pay := console.RelatedPayment(srv.Outbox().Tools(), rel)
	if pay == nil || rel.PaymentRef == "" {
		if pay, err = srv.Outbox().PaymentOf(ctx, tid, op.Tool, op.Args); err != nil {
			return err
		}
	}
	lk := lookupView{op: op, h: h, evs: evs, rel: rel}
	lk.amount, lk.args = console.OpMoney(srv.Outbox().Tools(), op, pay)
	if err := printLookup(os.Stdout, lk, *asJSON); err != nil {
		return err
	}
	if !*asJSON {
		printRelated(os.Stdout, srv.Outbox().Tools(), op, rel)
	}
	return nil
}

// lookupView is everything `oncebox lookup` prints of one op.
type lookupView struct {
	op           *outbox.Op
	h            *outbox.History
	evs          []vendorevents.Event
	rel          *outbox.Related
	amount, args string
}

// printRelated prints the payment the op is or refunds and every refund asked for of
// it, to answer "was I refunded twice?".
func printRelated(w io.Writer, reg *outbox.Registry, op *outbox.Op, rel *outbox.Related) {
	if rel == nil {
		return
	}
	fmt.Fprintf(w, "\npayment and refunds:\n")
	switch {
	case rel.Payment != nil:
		amount, _ := console.OpMoney(reg, rel.Payment, nil)
		fmt.Fprintf(w, "  payment  %s  %s  %s  %s\n", rel.Payment.Key, rel.Payment.VendorRef, amount, console.StatusWords(string(rel.Payment.Status)))
	default:
		fmt.Fprintf(w, "  payment  %s: oncebox did not make it; its amount and refunds made outside oncebox are not in its records\n", rel.PaymentRef)
	}
	done := 0
	for _, rf := range rel.Refunds {
		amount := console.RefundAmount(reg, rf, rel.Payment)
		this := ""
		if rf.ID == op.ID {
			this = "  (this op)"
		}
		if rf.Status == protocol.StatusSucceeded {
			done++
		}
		fmt.Fprintf(w, "  refund   %s  %s  %s  %s%s\n", rf.Key, cmp.Or(rf.VendorRef, "-"), amount, console.StatusWords(string(rf.Status)), this)
	}
	fmt.Fprintf(w, "  %d refund(s) asked for of this payment, %d done\n", len(rel.Refunds), done)
}

// lookupMaxListed is how many ops of a conversation lookup lists.
const lookupMaxListed = 200

// printFound lists the ops a lookup found (a conversation's), newest first.
func printFound(w io.Writer, ops []*outbox.Op, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"ops": ops})
	}
	fmt.Fprintf(w, "%d ops (oncebox lookup KEY for one of them):\n", len(ops))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tKEY\tTOOL\tSTATUS\tVENDOR REF\tCONVERSATION")
	for _, op := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", op.CreatedAt.Format(time.RFC3339), op.Key, op.Tool, op.Status, op.VendorRef, op.ConversationID)
	}
	return tw.Flush()
}

func printLookup(w io.Writer, lk lookupView, asJSON bool) error {
	op, h, evs := lk.op, lk.h, lk.evs
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"op": op, "fingerprint": op.Fingerprint.String(), "trace_id": op.TraceID(),
			"attempts": h.Attempts, "events": h.Events, "identity_matches": h.Matches, "vendor_events": evs,
			"amount": lk.amount, "related": lk.rel})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "op\t%s\n", op.ID)
	fmt.Fprintf(tw, "key\t%s\n", op.Key)
	fmt.Fprintf(tw, "tool\t%s (vendor %s)\n", op.Tool, op.Vendor)
	fmt.Fprintf(tw, "status\t%s (%s)\n", op.Status, console.StatusWords(string(op.Status)))
	if lk.amount != "" {
		fmt.Fprintf(tw, "amount\t%s\n", lk.amount)
	}
	if lk.args != "" {
		fmt.Fprintf(tw, "arguments\t%s\n", lk.args)
	}
	fmt.Fprintf(tw, "fingerprint\t%s\n", op.Fingerprint)
	fmt.Fprintf(tw, "vendor key\t%s (generation %d)\n", op.VendorKey, op.Generation)
	fmt.Fprintf(tw, "vendor ref\t%s\n", op.VendorRef)
	fmt.Fprintf(tw, "conversation\t%s\n", op.ConversationID)
	fmt.Fprintf(tw, "tool call\t%s\n", op.ToolCallID)
	fmt.Fprintf(tw, "trace id\t%s\n", op.TraceID())
	fmt.Fprintf(tw, "created\t%s\n", op.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "updated\t%s\n", op.UpdatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "expires\t%s\n", op.ExpiresAt.Format(time.RFC3339))
	if len(op.Result) > 0 {
		fmt.Fprintf(tw, "result\t%s\n", op.Result)
	}
	if len(op.Error) > 0 {
		fmt.Fprintf(tw, "error\t%s\n", op.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nattempts (%d):\n", len(h.Attempts))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTARTED\tTOOK\tOUTCOME\tVENDOR REF\tERROR")
	for _, a := range h.Attempts {
		took := "running"
		if a.FinishedAt != nil {
			took = a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.StartedAt.Format(time.RFC3339), took, a.Outcome, a.VendorRef, a.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndecisions (%d):\n", len(h.Events))
	for _, e := range h.Events {
		fmt.Fprintf(w, "  %s  %s  (by %s)\n", e.At.Format(time.RFC3339), console.DecisionSentence(op, e), console.ActorName(e.Actor))
	}
	if len(h.Matches) > 0 {
		// MCP calls matched to the op by its tool's identity fields, not executed.
		fmt.Fprintf(w, "\nidentity matches (%d):\n", len(h.Matches))
		for _, m := range h.Matches {
			differed := "not known (redacted)"
			if m.Differed != nil {
				differed = strings.Join(m.Differed, ", ")
			}
			fmt.Fprintf(w, "  %s  differed: %s  conversation %s  fingerprint %s\n", m.At.Format(time.RFC3339), differed,
				m.ConversationID, m.Fingerprint)
		}
	}
	// Everything in causal order, as the console shows it.
	fmt.Fprintf(w, "\ntimeline:\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range console.Timeline(op, h, evs) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.At.Format("2006-01-02T15:04:05.000Z07:00"), e.Who, e.What, e.Notes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// What the vendor pushed about the op's objects (Stripe webhooks, SendGrid events).
	printEvents(w, evs)
	return nil
}

// printEvents lists what the vendor pushed about the op's objects; an unconfirmed event
// (the op has no vendor_ref yet: nothing proves the object is the op's) says so.
func printEvents(w io.Writer, evs []vendorevents.Event) {
	fmt.Fprintf(w, "\nvendor events (%d):\n", len(evs))
	for _, e := range evs {
		unconfirmed := ""
		if e.Unconfirmed {
			unconfirmed = "  unconfirmed: the op's object is not known yet"
		}
		fmt.Fprintf(w, "  %s  %s  %s %s  %s  (received %s)%s\n", e.OccurredAt.Format(time.RFC3339), e.Type, e.ObjectType, e.ObjectID,
			e.Status, e.ReceivedAt.Format(time.RFC3339), unconfirmed)
	}
}
