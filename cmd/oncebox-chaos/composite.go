package main

import (
	"fmt"
	"strings"

	"github.com/oncebox/oncebox/protocol"
)

// toolComposite is the catalog's composite tool (docs/steps.md): a charge, then its
// receipt mailed, then a webhook, the charge refunded when a later step fails for good.
// Each step is an ordinary op under ~step/<parent op id>/<step>, tagged with its own op
// id at the fakes, so Check's one-side-effect-per-op rules cover the steps' ops.
const toolComposite = "chaos.checkout"

// stepKeyPrefix begins the key of every step's op (steps.Key).
const stepKeyPrefix = "~step/"

// compositeOn reports whether the run has the composite tool: not in a rolling upgrade,
// whose first processes run a release that knows no steps.
func (h *harness) compositeOn() bool { return h.cfg.UpgradeFrom == "" }

// compositeCatalog is the composite tool's entry in the catalog's tools, or "".
func (h *harness) compositeCatalog() string {
	if !h.compositeOn() {
		return ""
	}
	return fmt.Sprintf(`  %s:
    description: Charge the order, mail the receipt, tell the shop.
    input_schema:
      type: object
      properties: {amount: {type: integer}, email: {type: string}, subject: {type: string}, path: {type: string}}
      required: [amount, email, subject, path]
    steps:
      - name: charge
        tool: %s
        args: {amount: {$from: /call/amount}, currency: usd, payment_method: pm_card_visa, confirm: true,
          description: {$from: /call/subject}, metadata: {chaos: %s}}
        compensate:
          tool: %s
          args: {payment_intent: {$from: /steps/charge/vendor_ref}, reason: requested_by_customer, metadata: {chaos: original}}
      - name: receipt
        tool: %s
        args: {from: {email: chaos@example.com}, to: [{email: {$from: /call/email}}], subject: {$from: /call/subject}, text: your receipt}
      - name: notify
        tool: %s
        args: {target: %s, path: {$from: /call/path}, body: {subject: {$from: /call/subject}}}
`, toolComposite, protocol.ToolPaymentIntent, stepChargeMarker, protocol.ToolRefund, protocol.ToolMail, protocol.ToolWebhookPost, webhookTarget)
}

// stepChargeMarker is the chaos metadata of a composite op's charge: the refund
// workload leaves such a payment to the step runner, whose compensation refunds it in
// full (a refund of its own could find it refunded already).
const stepChargeMarker = "step"

// refusedPathPrefix begins the notify path of the composite ops planned to fail: the
// fake receiver refuses every POST under it for good (fakewebhook.Config.RefusePrefix),
// after the charge and the mail have acted, so the charge is refunded.
const refusedPathPrefix = "/refused/"

// compensateShare is the share of composite ops planned to fail and be compensated.
const compensateShare = 0.3

// compositeArgs are the composite tool's arguments for item i under key; refused sends
// its notify step where the receiver refuses it.
func compositeArgs(i int, key string, amount int, refused bool) map[string]any {
	path := fmt.Sprintf("/orders/%d", i)
	if refused {
		path = refusedPathPrefix + path[1:]
	}
	return map[string]any{"amount": amount, "email": fmt.Sprintf("buyer%d@example.com", i),
		"subject": "chaos " + key, "path": path}
}

// CompositeFigures are the composite ops' counts of the summary line.
type CompositeFigures struct {
	// Ops are the composite tool's (parent) ops; Terminal those succeeded, failed or in
	// needs_review.
	Ops, Terminal int
	// Children are the steps' ops of those parents, Compensations the ones among them
	// that undo a step (~step/<id>/undo.<step>).
	Children, Compensations int
	// Planned are the parents planned to fail (Plan.Compensate), Compensated those
	// that failed with their charge refunded.
	Planned, Compensated int
}

// checkComposite finds the composite ops that are not terminal (a parent pending after
// the calm: its run stuck), steps' ops whose parent is no composite op of the run (a
// step's op the runner did not make), and parents whose end contradicts their plan:
// one planned to fail (its notify step refused for good) that succeeded, or failed
// with its charge made and not refunded; one planned to succeed that failed or undid a
// step. A step's side effects, the refund's included, are counted by Check, as any
// op's: a compensation that ran twice is a duplicate there.
func checkComposite(in CheckInput, byID map[string]OpRecord) ([]Finding, CompositeFigures) {
	var out []Finding
	var fig CompositeFigures
	steps := map[string]map[string]OpRecord{} // parent op id -> step name -> the step's op
	for _, op := range in.Ops {
		if !strings.HasPrefix(op.Key, stepKeyPrefix) {
			continue
		}
		parentID, step, _ := strings.Cut(strings.TrimPrefix(op.Key, stepKeyPrefix), "/")
		if parent, ok := byID[parentID]; ok && parent.Tool == toolNoteThenWipe {
			continue // the CRM's composite tool: checkCRM
		} else if !ok || parent.Tool != toolComposite {
			out = append(out, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("%s op under a step's key whose parent is no composite op of the run", op.Tool)})
			continue
		}
		fig.Children++
		if strings.HasPrefix(step, "undo.") {
			fig.Compensations++
		}
		if steps[parentID] == nil {
			steps[parentID] = map[string]OpRecord{}
		}
		steps[parentID][step] = op
	}
	for _, op := range in.Ops {
		if op.Tool != toolComposite {
			continue
		}
		fig.Ops++
		switch op.Status {
		case statusSucceeded, statusFailed, statusNeedsReview:
			fig.Terminal++
		default:
			out = append(out, Finding{OpID: op.ID, Key: op.Key,
				What: fmt.Sprintf("composite op not terminal after the calm: status %s", op.Status)})
			continue
		}
		plan, planned := in.Planned[op.Key]
		if !planned {
			continue
		}
		if what := compositeAgainstPlan(op, plan, steps[op.ID], &fig); what != "" {
			out = append(out, Finding{OpID: op.ID, Key: op.Key, What: what})
		}
	}
	return out, fig
}

// compositeAgainstPlan says how a terminal composite op's end contradicts its plan, or
// "" when it does not; it counts the planned failures.
func compositeAgainstPlan(op OpRecord, plan Plan, steps map[string]OpRecord, fig *CompositeFigures) string {
	charge, undo := steps["charge"], steps["undo.charge"]
	if !plan.Compensate {
		switch {
		case op.Status == statusFailed:
			return "composite op failed, but the workload planned no step to fail"
		case undo.ID != "":
			return fmt.Sprintf("composite op in status %s undid its charge (%s), but the workload planned no step to fail", op.Status, undo.Status)
		}
		return ""
	}
	fig.Planned++
	switch op.Status {
	case statusSucceeded:
		return "composite op succeeded, though the receiver refuses its notify step for good"
	case statusFailed:
		if charge.Status == statusSucceeded && undo.Status != statusSucceeded {
			return fmt.Sprintf("composite op failed with its charge made (%s), but the charge's refund is %q", charge.VendorRef, undo.Status)
		}
		fig.Compensated++
	}
	return ""
}

// String is the figures as the summary line prints them.
func (f CompositeFigures) String() string {
	return fmt.Sprintf("composite_ops=%d composite_terminal=%d composite_children=%d compensations=%d composite_planned_failures=%d composite_compensated=%d",
		f.Ops, f.Terminal, f.Children, f.Compensations, f.Planned, f.Compensated)
}
