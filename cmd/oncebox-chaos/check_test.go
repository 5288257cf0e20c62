package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"

	"github.com/oncebox/oncebox/protocol"
)

// cleanInput is a run in which every promise was kept: a charge, a declined
// charge (its payment intent left in requires_payment_method), a refund, a
// mail, a webhook and an op in needs_review without a side effect.
func cleanInput() CheckInput {
	return CheckInput{
		Accepted: map[string]string{
			"k-pi": protocol.ToolPaymentIntent, "k-declined": protocol.ToolPaymentIntent, "k-refund": protocol.ToolRefund,
			"k-mail": protocol.ToolMail, "k-hook": protocol.ToolWebhookPost, "k-review": protocol.ToolWebhookPost,
		},
		Ops: []OpRecord{
			{ID: "op-pi", Key: "k-pi", Tool: protocol.ToolPaymentIntent, Status: statusSucceeded, VendorRef: "pi_1", Amount: ptr(1200)},
			{ID: "op-declined", Key: "k-declined", Tool: protocol.ToolPaymentIntent, Status: statusFailed, Amount: ptr(900)},
			{ID: "op-refund", Key: "k-refund", Tool: protocol.ToolRefund, Status: statusSucceeded, VendorRef: "re_1", Amount: ptr(300)},
			{ID: "op-mail", Key: "k-mail", Tool: protocol.ToolMail, Status: statusSucceeded, VendorRef: "msg1"},
			{ID: "op-hook", Key: "k-hook", Tool: protocol.ToolWebhookPost, Status: statusSucceeded, VendorRef: "ef1"},
			{ID: "op-review", Key: "k-review", Tool: protocol.ToolWebhookPost, Status: statusNeedsReview},
		},
		Objects: []VendorObject{
			{Kind: kindPaymentIntent, ID: "pi_1", OpID: "op-pi", Effect: true, Amount: ptr(1200)},
			{Kind: kindPaymentIntent, ID: "pi_2", OpID: "op-declined", Effect: false, Amount: ptr(900)},
			{Kind: kindRefund, ID: "re_1", OpID: "op-refund", Effect: true, Amount: ptr(300)},
			{Kind: kindMessage, ID: "msg1", OpID: "op-mail", Effect: true},
			{Kind: kindEffect, ID: "ef1", OpID: "op-hook", Effect: true},
		},
		Planned: map[string]Plan{
			"k-pi": {}, "k-declined": {Declined: true}, "k-refund": {}, "k-mail": {}, "k-hook": {}, "k-review": {Blind: true},
		},
	}
}

func ptr(n int64) *int64 { return &n }

func TestCheckClean(t *testing.T) {
	t.Parallel()
	rep := Check(cleanInput())
	require.True(t, rep.OK(), "findings: %v", rep.Findings())
	require.Empty(t, rep.Findings())
	require.Equal(t, []string{"op-review"}, rep.NeedsReview)
	require.Equal(t, 4, rep.Statuses[statusSucceeded])
}

func TestCheckDuplicateAndLoss(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	// A second email for the mail op, and a webhook op that succeeded
	// without any effect at the receiver.
	in.Objects = append(in.Objects[:4:4], VendorObject{Kind: kindMessage, ID: "msg2", OpID: "op-mail", Effect: true})

	rep := Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Duplicates, 1)
	require.Equal(t, "op-mail", rep.Duplicates[0].OpID)
	require.Contains(t, rep.Duplicates[0].What, "2 side effects")
	require.Len(t, rep.Lost, 1)
	require.Equal(t, "op-hook", rep.Lost[0].OpID)
	require.Contains(t, rep.Lost[0].What, "no side effect")
}

func TestCheckLostKinds(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Accepted["k-missing"] = protocol.ToolWebhookPost
	in.Ops = append(in.Ops, OpRecord{ID: "op-stuck", Key: "k-stuck", Tool: protocol.ToolMail, Status: "unknown"})
	in.Accepted["k-stuck"] = protocol.ToolMail

	rep := Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Lost, 2)
	require.Equal(t, "op-stuck", rep.Lost[0].OpID)
	require.Contains(t, rep.Lost[0].What, "not settled")
	require.Equal(t, "k-missing", rep.Lost[1].Key)
	require.Contains(t, rep.Lost[1].What, "not stored")
}

func TestCheckDeclinedPaymentIntentIsNoCharge(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	// Two declined payment intents for a failed op charge nobody.
	in.Objects = append(in.Objects, VendorObject{Kind: kindPaymentIntent, ID: "pi_3", OpID: "op-declined", Effect: false})
	require.True(t, Check(in).OK())

	// A succeeded one for a failed op is a side effect oncebox denies.
	in.Objects = append(in.Objects, VendorObject{Kind: kindPaymentIntent, ID: "pi_4", OpID: "op-declined", Effect: true})
	rep := Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Mismatched, 1)
	require.Equal(t, "op-declined", rep.Mismatched[0].OpID)
}

func TestCheckOrphansAndConflicts(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Objects = append(in.Objects,
		VendorObject{Kind: kindEffect, ID: "ef2", OpID: "op-nobody", Effect: true},
		VendorObject{Kind: kindRefund, ID: "re_2", Effect: true},
		VendorObject{Kind: kindMessage, ID: "msg3", OpID: "op-hook", Effect: true},
	)
	in.Objects[0].Conflict = true
	in.ConflictsAccepted = []string{"k-hook"}

	rep := Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Orphans, 3, "unknown op, no tag, and an object of the wrong kind for its op")
	require.Len(t, rep.ConflictLeaks, 2)
	require.Equal(t, "op-pi", rep.ConflictLeaks[0].OpID)
	require.Equal(t, "op-hook", rep.ConflictLeaks[1].OpID)
	require.Empty(t, rep.Duplicates)
}

func TestCheckNeedsReviewWithTwoEffectsIsDuplicate(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Objects = append(in.Objects,
		VendorObject{Kind: kindEffect, ID: "ef4", OpID: "op-review", Effect: true},
		VendorObject{Kind: kindEffect, ID: "ef5", OpID: "op-review", Effect: true},
	)
	rep := Check(in)
	require.Len(t, rep.Duplicates, 1)
	require.Equal(t, "op-review", rep.Duplicates[0].OpID)
}

// TestCheckUnplannedFailureAndReview: a valid mail ended failed (SendGrid's 429
// taken for a refusal) and a payment in needs_review (Stripe's lookups
// unavailable) keep no duplicate and lose nothing, yet break the promise.
func TestCheckUnplannedFailureAndReview(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Ops[3].Status, in.Ops[3].VendorRef = statusFailed, ""
	in.Objects = append(in.Objects[:3:3], in.Objects[4])
	in.Ops[0].Status = statusNeedsReview
	rep := Check(in)
	require.False(t, rep.OK())
	require.Empty(t, rep.Duplicates)
	require.Empty(t, rep.Lost)
	require.Len(t, rep.Unplanned, 2, "%v", rep.Findings())
	require.Equal(t, "op-pi", rep.Unplanned[0].OpID)
	require.Contains(t, rep.Unplanned[0].What, "needs_review")
	require.Equal(t, "op-mail", rep.Unplanned[1].OpID)
	require.Contains(t, rep.Unplanned[1].What, "planned no refusal")
	require.Contains(t, rep.Findings()[0], "UNPLANNED")
}

func TestCheckDouble202(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Double202 = []string{"k-mail"}
	rep := Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Double202, 1)
	require.Equal(t, "op-mail", rep.Double202[0].OpID)
	require.Equal(t, []string{"DOUBLE_202: key=k-mail op=op-mail the API answered 202 (a new op) more than once for this key"}, rep.Findings())
}

func TestCheckVendorRefAndAmountMismatch(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Ops[4].VendorRef = "ef-other"
	in.Ops[2].Amount = ptr(301)
	rep := Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Mismatched, 2, "%v", rep.Findings())
	require.Equal(t, "op-refund", rep.Mismatched[0].OpID)
	require.Contains(t, rep.Mismatched[0].What, "amount 301")
	require.Equal(t, "op-hook", rep.Mismatched[1].OpID)
	require.Contains(t, rep.Mismatched[1].What, "vendor_ref")
}

// TestCheckUpstreamMCPOps: an upstream MCP op settled by the worker names its mail in
// its stored result (vendor_ref empty), one settled by a lookup in vendor_ref; a failed
// one is planned only when the upstream records refusing it, and has no mail.
func TestCheckUpstreamMCPOps(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Accepted["k-m1"], in.Accepted["k-m2"], in.Accepted["k-m3"] = toolMCP, toolMCP, toolMCP
	in.Planned["k-m1"], in.Planned["k-m2"], in.Planned["k-m3"] = Plan{}, Plan{}, Plan{}
	in.Ops = append(in.Ops,
		OpRecord{ID: "op-m1", Key: "k-m1", Tool: toolMCP, Status: statusSucceeded, ResultRef: "mail_1"},
		OpRecord{ID: "op-m2", Key: "k-m2", Tool: toolMCP, Status: statusSucceeded, VendorRef: "mail_2", ResultRef: "mail_2"},
		OpRecord{ID: "op-m3", Key: "k-m3", Tool: toolMCP, Status: statusFailed})
	in.Objects = append(in.Objects,
		VendorObject{Kind: kindMCPMail, ID: "mail_1", OpID: "op-m1", Effect: true},
		VendorObject{Kind: kindMCPMail, ID: "mail_2", OpID: "op-m2", Effect: true})
	in.Refused = map[string]bool{"op-m3": true}
	rep := Check(in)
	require.True(t, rep.OK(), "findings: %v", rep.Findings())

	// Not refused by the upstream: the failure is unplanned.
	in.Refused = nil
	rep = Check(in)
	require.Len(t, rep.Unplanned, 1, "%v", rep.Findings())
	require.Equal(t, "op-m3", rep.Unplanned[0].OpID)

	// A result naming another mail, and a second mail for one op.
	in.Refused = map[string]bool{"op-m3": true}
	in.Ops[len(in.Ops)-3].ResultRef = "mail_9"
	in.Objects = append(in.Objects, VendorObject{Kind: kindMCPMail, ID: "mail_3", OpID: "op-m2", Effect: true})
	rep = Check(in)
	require.Len(t, rep.Mismatched, 1, "%v", rep.Findings())
	require.Contains(t, rep.Mismatched[0].What, `a result naming "mail_9"`)
	require.Len(t, rep.Duplicates, 1)
	require.Equal(t, "op-m2", rep.Duplicates[0].OpID)

	// A failed op whose mail the upstream holds.
	in = cleanInput()
	in.Accepted["k-m3"], in.Planned["k-m3"] = toolMCP, Plan{}
	in.Ops = append(in.Ops, OpRecord{ID: "op-m3", Key: "k-m3", Tool: toolMCP, Status: statusFailed})
	in.Objects = append(in.Objects, VendorObject{Kind: kindMCPMail, ID: "mail_1", OpID: "op-m3", Effect: true})
	in.Refused = map[string]bool{"op-m3": true}
	rep = Check(in)
	require.Len(t, rep.Mismatched, 1, "%v", rep.Findings())
	require.Contains(t, rep.Mismatched[0].What, "failed but the vendor holds a side effect")
}

// gatedInput is cleanInput with three ops of the gated tool: one approved and run
// once, one rejected, one left waiting.
func gatedInput() CheckInput {
	in := cleanInput()
	for _, k := range []string{"k-g1", "k-g2", "k-g3"} {
		in.Accepted[k] = toolGated
	}
	in.Planned["k-g1"], in.Planned["k-g2"], in.Planned["k-g3"] = Plan{Decision: decisionApprove}, Plan{Decision: decisionReject}, Plan{}
	in.Ops = append(in.Ops,
		OpRecord{ID: "op-g1", Key: "k-g1", Tool: toolGated, Status: statusSucceeded, ResultRef: "wipe_1"},
		OpRecord{ID: "op-g2", Key: "k-g2", Tool: toolGated, Status: statusRejected},
		OpRecord{ID: "op-g3", Key: "k-g3", Tool: toolGated, Status: statusAwaiting})
	in.Objects = append(in.Objects, VendorObject{Kind: kindMCPWipe, ID: "wipe_1", OpID: "op-g1", Effect: true})
	in.Approved, in.Rejected = map[string]bool{"k-g1": true}, map[string]bool{"k-g2": true}
	return in
}

// TestCheckGate: a gated op runs once, and only when the harness approved it; a
// rejected or waiting op never runs; every gated call awaits approval first.
func TestCheckGate(t *testing.T) {
	t.Parallel()
	rep := Check(gatedInput())
	require.True(t, rep.OK(), "findings: %v", rep.Findings())

	for _, c := range []struct {
		name, op string
	}{{"rejected", "op-g2"}, {"left waiting", "op-g3"}} {
		in := gatedInput()
		in.Objects = append(in.Objects, VendorObject{Kind: kindMCPWipe, ID: "wipe_2", OpID: c.op, Effect: true})
		rep := Check(in)
		require.False(t, rep.OK(), c.name)
		require.Len(t, rep.Gate, 1, "%s: %v", c.name, rep.Findings())
		require.Equal(t, c.op, rep.Gate[0].OpID)
		require.Contains(t, rep.Gate[0].What, "did not approve")
	}

	in := gatedInput()
	in.Objects = append(in.Objects, VendorObject{Kind: kindMCPWipe, ID: "wipe_2", Effect: true})
	rep = Check(in)
	require.Len(t, rep.Gate, 1, "a run with no op: %v", rep.Findings())

	in = gatedInput()
	in.Objects = append(in.Objects, VendorObject{Kind: kindMCPWipe, ID: "wipe_2", OpID: "op-g1", Effect: true})
	rep = Check(in)
	require.Len(t, rep.Duplicates, 1, "an approved op run twice: %v", rep.Findings())

	in = gatedInput()
	in.Ungated = map[string][]string{"k-g3": {"pending"}}
	rep = Check(in)
	require.Len(t, rep.Gate, 1, "answered pending before any decision: %v", rep.Findings())

	// Approved but still waiting; rejected by nobody the harness knows.
	in = gatedInput()
	in.Approved["k-g3"] = true
	in.Rejected = nil
	rep = Check(in)
	require.Len(t, rep.Lost, 1, "%v", rep.Findings())
	require.Equal(t, "op-g3", rep.Lost[0].OpID)
	require.Len(t, rep.Unplanned, 1, "%v", rep.Findings())
	require.Equal(t, "op-g2", rep.Unplanned[0].OpID)
}

// TestCheckContagion: while the upstream garbles, an op none of whose calls was
// garbled must not end in needs_review, and no op is recorded as garbled more often
// than the upstream garbled it; the garbled op itself may retry and succeed.
func TestCheckContagion(t *testing.T) {
	t.Parallel()
	in := gatedInput()
	in.Accepted["k-m1"], in.Planned["k-m1"] = toolMCP, Plan{}
	in.Ops = append(in.Ops, OpRecord{ID: "op-m1", Key: "k-m1", Tool: toolMCP, Status: statusSucceeded, ResultRef: "mail_1"})
	in.Objects = append(in.Objects, VendorObject{Kind: kindMCPMail, ID: "mail_1", OpID: "op-m1", Effect: true})
	in.GarbageSeen, in.Garbled, in.Malformed = true, map[string]int{"op-g1": 1}, map[string]int{"op-g1": 1}
	rep := Check(in)
	require.True(t, rep.OK(), "findings: %v", rep.Findings())

	in.Malformed["op-m1"] = 1
	rep = Check(in)
	require.Len(t, rep.Contagion, 1, "%v", rep.Findings())
	require.Equal(t, "op-m1", rep.Contagion[0].OpID)

	delete(in.Malformed, "op-m1")
	in.Ops[len(in.Ops)-1].Status = statusNeedsReview
	in.Objects = in.Objects[:len(in.Objects)-1]
	rep = Check(in)
	require.Len(t, rep.Contagion, 1, "%v", rep.Findings())
	require.Contains(t, rep.Contagion[0].What, "another call's garbage")
	require.Len(t, rep.Unplanned, 1, "still unplanned, as before")

	// Every op settled, but a session ended on garbage the SDK's client was given.
	in = gatedInput()
	in.GarbageSeen, in.BrokenSessions = true, 2
	rep = Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Contagion, 1, "%v", rep.Findings())
	require.Contains(t, rep.Contagion[0].What, "ended 2 times")

	// An oversized answer not cut, and a serve process's memory past the bound.
	in = gatedInput()
	in.PeakRSS, in.RSSBound = 200<<20, 256<<20
	require.True(t, Check(in).OK(), "under the bound")
	in.PeakRSS, in.Uncut = 700<<20, []string{"serve-1: HTTP 200, 65536 bytes"}
	rep = Check(in)
	require.Len(t, rep.Contagion, 2, "%v", rep.Findings())
	require.Contains(t, rep.Contagion[0].What, "not cut at max_result_bytes: serve-1")
	require.Contains(t, rep.Contagion[1].What, "reached 700 MiB, past 256 MiB")
}

// TestBrokenSessionsFromTheServeLogs: only the HTTP upstream's sessions that ended on
// an answer the SDK could not decode are counted; a loosening refused is counted apart.
func TestBrokenSessionsFromTheServeLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := `time=2026-12-01T19:53:27.002Z level=WARN msg="upstream session ended; opening it again" upstream=mcp error="sending \"tools/call\": failed to decode response: unmarshaling jsonrpc message: unexpected EOF"
time=2026-12-01T19:53:21.339Z level=WARN msg="upstream session ended; opening it again" upstream=mcp error="the session ended"
time=2026-12-01T19:53:37.504Z level=WARN msg="upstream session ended; opening it again" upstream=mcpio error="failed to decode response"
time=2026-12-01T19:53:38.000Z level=WARN msg="upstream session ended; opening it again" upstream=mcp error="calling \"tools/call\": unsupported content type \"\""
time=2026-12-01T19:53:39.000Z level=WARN msg="upstream session ended; opening it again" upstream=mcp error="malformed event: SSE event exceeded 16777216 bytes without terminating"
time=2026-12-01T19:53:40.000Z level=ERROR msg="upstream tool mcp.wipe_mailbox would go from unsafe to write: refused, it keeps its definition in force (restart oncebox to loosen a tool)"
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "serve-0.log"), []byte(log), 0o600))
	h := &harness{logDir: dir}
	require.Equal(t, 3, h.brokenSessions())
	require.Equal(t, 1, h.loosenings())
}

// twoTenantInput is cleanInput with its Stripe ops split between two tenants, each on
// its own Connect account: the charge is tenant a's, the refund and the declined
// charge tenant b's.
func twoTenantInput() CheckInput {
	in := cleanInput()
	in.AccountTenant = map[string]string{accountA: "a", accountB: "b"}
	tenant := map[string]string{"op-pi": "a", "op-declined": "b", "op-refund": "b"}
	for i := range in.Ops {
		in.Ops[i].Tenant = "a"
		if t, ok := tenant[in.Ops[i].ID]; ok {
			in.Ops[i].Tenant = t
		}
	}
	for i, o := range in.Objects {
		switch o.Kind {
		case kindPaymentIntent, kindRefund:
			in.Objects[i].Account = accountA
			if tenant[o.OpID] == "b" {
				in.Objects[i].Account = accountB
			}
		}
	}
	return in
}

func TestCheckWrongAccount(t *testing.T) {
	t.Parallel()
	rep := Check(twoTenantInput())
	require.True(t, rep.OK(), "findings: %v", rep.Findings())

	// Tenant a's charge made on tenant b's account: on the wrong account, and lost on
	// its own.
	in := twoTenantInput()
	in.Objects[0].Account = accountB
	rep = Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.WrongAccount, 1)
	require.Equal(t, "op-pi", rep.WrongAccount[0].OpID)
	require.Contains(t, rep.WrongAccount[0].What, "pi_1 on acct_chaosB (tenant b's account) tagged with op op-pi of tenant a, whose account is acct_chaosA")
	require.Contains(t, rep.Findings(), "WRONG_ACCOUNT: key=k-pi op=op-pi "+rep.WrongAccount[0].What)
	require.Len(t, rep.Lost, 1)
	require.Equal(t, "op-pi", rep.Lost[0].OpID)
	require.Contains(t, rep.Lost[0].What, "its account holds no side effect")
	require.Empty(t, rep.Duplicates)

	// The same charge on both accounts: a duplicate across accounts, and one on the
	// wrong account; not lost.
	in = twoTenantInput()
	in.Objects = append(in.Objects, VendorObject{Kind: kindPaymentIntent, ID: "pi_9", OpID: "op-pi", Effect: true, Amount: ptr(1200), Account: accountB})
	rep = Check(in)
	require.Len(t, rep.WrongAccount, 1)
	require.Contains(t, rep.WrongAccount[0].What, "pi_9 on acct_chaosB")
	require.Len(t, rep.Duplicates, 1)
	require.Equal(t, "op-pi", rep.Duplicates[0].OpID)
	require.Empty(t, rep.Lost)

	// Tenant b's refund on the platform, an account no tenant has; and a declined
	// payment intent (no effect) on the wrong account still counts as wrong.
	in = twoTenantInput()
	in.Objects[1].Account = accountA
	in.Objects[2].Account = platformAccount
	rep = Check(in)
	require.Len(t, rep.WrongAccount, 2)
	require.Contains(t, rep.WrongAccount[0].What, "pi_2 on acct_chaosA (tenant a's account) tagged with op op-declined of tenant b")
	require.Contains(t, rep.WrongAccount[1].What, "re_1 on platform (no tenant's account) tagged with op op-refund of tenant b, whose account is acct_chaosB")
	require.Len(t, rep.Lost, 1)
	require.Equal(t, "op-refund", rep.Lost[0].OpID)

	// Objects of vendors without accounts are never checked: cleanInput's mail and
	// webhook carry no account.
	require.Equal(t, "", in.Objects[3].Account)
}

// compositeInput is cleanInput with a composite op that succeeded (a charge, a mail, a
// webhook, each an op under its step's key with its one side effect) and one that failed
// with its charge refunded.
func compositeInput() CheckInput {
	in := cleanInput()
	in.Accepted["k-shop"], in.Accepted["k-shop2"] = toolComposite, toolComposite
	in.Planned["k-shop"], in.Planned["k-shop2"] = Plan{}, Plan{Compensate: true}
	in.Ops = append(in.Ops,
		OpRecord{ID: "p1", Key: "k-shop", Tool: toolComposite, Status: statusSucceeded},
		OpRecord{ID: "c1", Key: "~step/p1/charge", Tool: protocol.ToolPaymentIntent, Status: statusSucceeded, VendorRef: "pi_c1"},
		OpRecord{ID: "m1", Key: "~step/p1/receipt", Tool: protocol.ToolMail, Status: statusSucceeded, VendorRef: "msg_c1"},
		OpRecord{ID: "w1", Key: "~step/p1/notify", Tool: protocol.ToolWebhookPost, Status: statusSucceeded, VendorRef: "ef_c1"},
		OpRecord{ID: "p2", Key: "k-shop2", Tool: toolComposite, Status: statusFailed},
		OpRecord{ID: "c2", Key: "~step/p2/charge", Tool: protocol.ToolPaymentIntent, Status: statusSucceeded, VendorRef: "pi_c2"},
		OpRecord{ID: "m2", Key: "~step/p2/receipt", Tool: protocol.ToolMail, Status: statusFailed},
		OpRecord{ID: "u2", Key: "~step/p2/undo.charge", Tool: protocol.ToolRefund, Status: statusSucceeded, VendorRef: "re_c2"})
	in.Objects = append(in.Objects,
		VendorObject{Kind: kindPaymentIntent, ID: "pi_c1", OpID: "c1", Effect: true},
		VendorObject{Kind: kindMessage, ID: "msg_c1", OpID: "m1", Effect: true},
		VendorObject{Kind: kindEffect, ID: "ef_c1", OpID: "w1", Effect: true},
		VendorObject{Kind: kindPaymentIntent, ID: "pi_c2", OpID: "c2", Effect: true},
		VendorObject{Kind: kindRefund, ID: "re_c2", OpID: "u2", Effect: true})
	return in
}

// TestCheckComposite: composite ops, terminal, with their steps' side effects once each,
// pass and are counted; a parent still pending, a second refund for a compensation, a
// second charge for a step, a step's op of no composite op, and a parent whose end
// contradicts its plan are findings.
func TestCheckComposite(t *testing.T) {
	t.Parallel()
	rep := Check(compositeInput())
	require.True(t, rep.OK(), "findings: %v", rep.Findings())
	require.Equal(t, CompositeFigures{Ops: 2, Terminal: 2, Children: 6, Compensations: 1, Planned: 1, Compensated: 1}, rep.CompositeFigures)
	require.Equal(t, "composite_ops=2 composite_terminal=2 composite_children=6 compensations=1 composite_planned_failures=1 composite_compensated=1",
		rep.CompositeFigures.String())

	for name, c := range map[string]struct {
		change func(in *CheckInput)
		key    string
	}{
		"planned to fail, succeeded": {func(in *CheckInput) { in.Ops[len(in.Ops)-4].Status = statusSucceeded }, "k-shop2"},
		"failed, charge not refunded": {func(in *CheckInput) {
			in.Ops[len(in.Ops)-1].Status = statusNeedsReview
			in.Objects = in.Objects[:len(in.Objects)-1]
		}, "k-shop2"},
		"failed, no refund op": {func(in *CheckInput) {
			in.Ops, in.Objects = in.Ops[:len(in.Ops)-1], in.Objects[:len(in.Objects)-1]
		}, "k-shop2"},
		"planned to succeed, failed": {func(in *CheckInput) { in.Planned["k-shop2"] = Plan{} }, "k-shop2"},
		"planned to succeed, undid its charge": {func(in *CheckInput) {
			in.Ops = append(in.Ops, OpRecord{ID: "u1", Key: "~step/p1/undo.charge", Tool: protocol.ToolRefund, Status: statusSucceeded, VendorRef: "re_c1"})
			in.Objects = append(in.Objects, VendorObject{Kind: kindRefund, ID: "re_c1", OpID: "u1", Effect: true})
		}, "k-shop"},
	} {
		in := compositeInput()
		c.change(&in)
		rep := Check(in)
		require.Len(t, rep.Composite, 1, "%s: %v", name, rep.Findings())
		require.Equal(t, c.key, rep.Composite[0].Key, name)
	}

	in := compositeInput()
	in.Ops[len(in.Ops)-8].Status = "pending"
	rep = Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Composite, 1)
	require.Equal(t, "k-shop", rep.Composite[0].Key)
	require.Contains(t, rep.Findings()[0], "COMPOSITE: ")
	require.Equal(t, 1, rep.CompositeFigures.Ops-rep.CompositeFigures.Terminal)

	in = compositeInput()
	in.Objects = append(in.Objects,
		VendorObject{Kind: kindRefund, ID: "re_c2b", OpID: "u2", Effect: true},
		VendorObject{Kind: kindPaymentIntent, ID: "pi_c1b", OpID: "c1", Effect: true})
	rep = Check(in)
	require.Len(t, rep.Duplicates, 2, "a step's op and a compensation are ops as any other")
	require.ElementsMatch(t, []string{"~step/p1/charge", "~step/p2/undo.charge"}, []string{rep.Duplicates[0].Key, rep.Duplicates[1].Key})

	in = compositeInput()
	in.Ops = append(in.Ops, OpRecord{ID: "x", Key: "~step/op-hook/notify", Tool: protocol.ToolWebhookPost, Status: statusSucceeded})
	in.Objects = append(in.Objects, VendorObject{Kind: kindEffect, ID: "ef_x", OpID: "x", Effect: true})
	rep = Check(in)
	require.Len(t, rep.Composite, 1)
	require.Equal(t, "~step/op-hook/notify", rep.Composite[0].Key)
}

// crmInput is a clean run of the CRM: a note-then-wipe with one note and one wipe, an
// account of tenant a, and one of tenant b closed by b.
func crmInput() CheckInput {
	return CheckInput{
		Ops: []OpRecord{
			{ID: "op-p1", Key: "k-p1", Tool: toolNoteThenWipe, Status: statusSucceeded, Tenant: "a"},
			{ID: "op-oa", Key: "k-oa", Tool: toolOpen, Status: statusSucceeded, Tenant: "a"},
			{ID: "op-ob", Key: "k-ob", Tool: toolOpen, Status: statusNeedsReview, Tenant: "b"},
			{ID: "op-cb", Key: "k-cb", Tool: toolClose, Status: statusSucceeded, Tenant: "b"},
		},
		CRM: CRMInput{On: true, Effects: []fakewebhook.Effect{
			{ID: "fx_1", OpID: "op-n1", Path: "/notes/k-p1"},
			{ID: "fx_2", OpID: "op-w1", Path: "/wipes/k-p1"},
			{ID: "fx_3", OpID: "op-oa", Path: "/blind/accounts"},
			{ID: "fx_4", OpID: "op-ob", Path: "/blind/accounts"},
			{ID: "fx_5", OpID: "op-cb", Path: "/blind/accounts/fx_4/close"},
		}},
	}
}

// TestCheckCRM: a note made again after its op was purged, and an account of tenant a
// closed by an op of tenant b, are CRM findings; a close of an account nobody opened
// (a wrong ref) is not.
func TestCheckCRM(t *testing.T) {
	t.Parallel()
	rep := Check(crmInput())
	require.True(t, rep.OK(), "findings: %v", rep.Findings())

	in := crmInput()
	in.CRM.Effects = append(in.CRM.Effects, fakewebhook.Effect{ID: "fx_6", OpID: "op-n2", Path: "/notes/k-p1"})
	rep = Check(in)
	require.Len(t, rep.CRM, 2, "a note made twice: %v", rep.Findings())
	require.Contains(t, rep.CRM[0].What+rep.CRM[1].What, "2 times")
	require.Contains(t, rep.CRM[0].What+rep.CRM[1].What, "2 notes and 1 wipes")

	in = crmInput()
	in.Ops = append(in.Ops, OpRecord{ID: "op-cx", Key: "k-cx", Tool: toolClose, Status: statusSucceeded, Tenant: "b"})
	in.CRM.Effects = append(in.CRM.Effects, fakewebhook.Effect{ID: "fx_6", OpID: "op-cx", Path: "/blind/accounts/fx_3/close"})
	rep = Check(in)
	require.Len(t, rep.CRM, 1, "b closed a's account: %v", rep.Findings())
	require.Contains(t, rep.CRM[0].What, "CROSS_TENANT")

	in = crmInput()
	in.Ops = append(in.Ops, OpRecord{ID: "op-cw", Key: "k-cw", Tool: toolClose, Status: statusSucceeded, Tenant: "b"})
	in.CRM.Effects = append(in.CRM.Effects, fakewebhook.Effect{ID: "fx_6", OpID: "op-cw", Path: "/blind/accounts/eff_nobody1/close"})
	rep = Check(in)
	require.True(t, rep.OK(), "a wrong ref acts on nobody's account: %v", rep.Findings())
}
