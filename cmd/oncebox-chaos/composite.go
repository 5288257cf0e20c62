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

// stepKeyPrefix begins the key of every step's op (outbox.StepKey).
const stepKeyPrefix = "~step/"

// compositeOn reports whether the run has the composite tool: not in a rolling upgrade,
// whose first processes run a release that knows no steps.
func (h *harness) compositeOn() bool { return h.cfg.UpgradeFrom == "" }

// compositeCatalog is the composite tool's entry in the catalog's tools, or "".
func (h *harness) compositeCatalog() string {
	if !h.compositeOn() {
		return ""
	}
	return fmt.Sprintf(`tools:
  %s:
    description: Charge the order, mail the receipt, tell the shop.
    input_schema:
      type: object
      properties: {amount: {type: integer}, email: {type: string}, subject: {type: string}, path: {type: string}}
      required: [amount, email, subject, path]
    steps:
      - name: charge
        tool: %s
        args: {amount: {$from: /call/amount}, currency: usd, payment_method: pm_card_visa, confirm: true,
          description: {$from: /call/subject}, metadata: {chaos: original}}
        compensate:
          tool: %s
          args: {payment_intent: {$from: /steps/charge/vendor_ref}, reason: requested_by_customer, metadata: {chaos: original}}
      - name: receipt
        tool: %s
        args: {from: {email: chaos@example.com}, to: [{email: {$from: /call/email}}], subject: {$from: /call/subject}, text: your receipt}
      - name: notify
        tool: %s
        args: {target: %s, path: {$from: /call/path}, body: {subject: {$from: /call/subject}}}
`, toolComposite, protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolMail, protocol.ToolWebhookPost, webhookTarget)
}

// compositeArgs are the composite tool's arguments for item i under key.
func compositeArgs(i int, key string, amount int) map[string]any {
	return map[string]any{"amount": amount, "email": fmt.Sprintf("buyer%d@example.com", i),
		"subject": "chaos " + key, "path": fmt.Sprintf("/orders/%d", i)}
}

// CompositeFigures are the composite ops' counts of the summary line.
type CompositeFigures struct {
	// Ops are the composite tool's (parent) ops; Terminal those succeeded, failed or in
	// needs_review.
	Ops, Terminal int
	// Children are the steps' ops of those parents, Compensations the ones among them
	// that undo a step (~step/<id>/undo.<step>).
	Children, Compensations int
}

// checkComposite finds the composite ops that are not terminal (a parent pending after
// the calm: its run stuck), and steps' ops whose parent is no composite op of the run
// (a step's op the runner did not make). A step's side effects are counted by Check,
// as any op's.
func checkComposite(in CheckInput, byID map[string]OpRecord) ([]Finding, CompositeFigures) {
	var out []Finding
	var fig CompositeFigures
	for _, op := range in.Ops {
		switch {
		case op.Tool == toolComposite:
			fig.Ops++
			switch op.Status {
			case statusSucceeded, statusFailed, statusNeedsReview:
				fig.Terminal++
			default:
				out = append(out, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("composite op not terminal after the calm: status %s", op.Status)})
			}
		case strings.HasPrefix(op.Key, stepKeyPrefix):
			parentID, step, _ := strings.Cut(strings.TrimPrefix(op.Key, stepKeyPrefix), "/")
			if parent, ok := byID[parentID]; !ok || parent.Tool != toolComposite {
				out = append(out, Finding{OpID: op.ID, Key: op.Key,
					What: fmt.Sprintf("%s op under a step's key whose parent is no composite op of the run", op.Tool)})
				continue
			}
			fig.Children++
			if strings.HasPrefix(step, "undo.") {
				fig.Compensations++
			}
		}
	}
	return out, fig
}

// String is the figures as the summary line prints them.
func (f CompositeFigures) String() string {
	return fmt.Sprintf("composite_ops=%d composite_terminal=%d composite_children=%d compensations=%d",
		f.Ops, f.Terminal, f.Children, f.Compensations)
}
