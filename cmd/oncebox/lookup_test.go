package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// TestLookupAnswersWasIChargedTwice runs `oncebox lookup` as a child process on an op
// that needed two attempts, and checks it prints what support needs.
func TestLookupAnswersWasIChargedTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	ob := newCRMOutbox(t, pool, srv.URL, outbox.Config{RetryBackoff: func(int) time.Duration { return 50 * time.Millisecond }})
	require.NoError(t, ob.Start(ctx))
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })

	fake.InjectFault(fakewebhook.Fault{Kind: fakewebhook.Fault409})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "order-7", Tool: protocol.ToolWebhookPost,
		Args: json.RawMessage(`{"target":"crm","path":"/charge","body":{"amount":700}}`), ConversationID: "conv-1"})
	require.NoError(t, err)
	op, err := ob.Wait(ctx, tn.ID, "order-7", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusSucceeded, op.Status)

	cmd, out := startChild(t, "lookup --tenant acme order-7", "DATABASE_URL="+dbtest.ConnString(t, pool),
		"STRIPE_API_KEY=", "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS=")
	text, err := io.ReadAll(out)
	require.NoError(t, err)
	require.NoError(t, cmd.Wait())
	for _, want := range []string{
		res.Op.ID, "order-7", "webhook.post", "succeeded", res.Op.Fingerprint.String(), res.Op.VendorKey,
		op.VendorRef, "conv-1", "attempts (2):", "retryable", "conflict_in_use",
	} {
		require.Contains(t, string(text), want)
	}
	require.Len(t, fake.EffectsFor(res.Op.ID), 1)
	require.Regexp(t, `timeline:\n\s+\S+\s+the agent\s+asked for`, string(text), "the timeline starts with the creation")

	// The same op by its op id and by its vendor reference; a conversation of two ops
	// lists them.
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "STRIPE_API_KEY=", "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS="}
	for _, term := range []string{res.Op.ID, op.VendorRef} {
		out, errOut, code := runCLI(t, "lookup --tenant acme "+term, env...)
		require.Zero(t, code, errOut)
		require.Regexp(t, `key\s+order-7\n`, out, "lookup %s", term)
	}
	_, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "order-8", Tool: protocol.ToolWebhookPost,
		Args: json.RawMessage(`{"target":"crm","path":"/charge","body":{"amount":800}}`), ConversationID: "conv-1"})
	require.NoError(t, err)
	list, errOut, code := runCLI(t, "lookup --tenant acme conv-1", env...)
	require.Zero(t, code, errOut)
	require.Contains(t, list, "2 ops")
	require.Regexp(t, `(?s)order-8.*order-7`, list, "newest first")
	_, errOut, code = runCLI(t, "lookup --tenant acme nothing-here", env...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `has no op whose key, op id, vendor reference or conversation is "nothing-here"`)
}

// newCRMOutbox returns an Outbox on pool whose webhook tool reaches the target "crm" at
// baseURL; cfg sets everything else.
func newCRMOutbox(t *testing.T, pool *pgxpool.Pool, baseURL string, cfg outbox.Config) *outbox.Outbox {
	return newGatedCRMOutbox(t, pool, baseURL, cfg, nil)
}

// newGatedCRMOutbox is newCRMOutbox with a governance gate whose default approval
// policy is policy.
func newGatedCRMOutbox(t *testing.T, pool *pgxpool.Pool, baseURL string, cfg outbox.Config, policy governance.ApprovalPolicy) *outbox.Outbox {
	t.Helper()
	v, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{"crm": {BaseURL: baseURL}}})
	require.NoError(t, err)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}})...)
	require.NoError(t, err)
	cfg.Pool, cfg.Tools, cfg.Vendors = pool, reg, []vendorapi.Vendor{v}
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg, Approvals: policy})
	require.NoError(t, err)
	cfg.Gate = gov
	ob, err := outbox.New(cfg)
	require.NoError(t, err)
	return ob
}

// TestLookupPrintsVendorEvents checks that support sees what the vendor pushed about
// the op's objects, in text and in JSON.
func TestLookupPrintsVendorEvents(t *testing.T) {
	t.Parallel()
	op := &outbox.Op{ID: "op-1", Key: "order-8", Tool: protocol.ToolMail, Vendor: "sendgrid", Status: protocol.StatusSucceeded}
	evs := []vendorevents.Event{{Vendor: "sendgrid", Type: "bounce", ObjectType: "message", ObjectID: "msg-1", Status: "bounced",
		OccurredAt: time.Unix(1700000000, 0).UTC(), ReceivedAt: time.Unix(1700000005, 0).UTC()}}
	var text strings.Builder
	require.NoError(t, printLookup(&text, lookupView{op: op, h: &outbox.History{}, evs: evs}, false))
	require.Contains(t, text.String(), "vendor events (1):")
	require.Contains(t, text.String(), "bounce  message msg-1  bounced")
	var js strings.Builder
	require.NoError(t, printLookup(&js, lookupView{op: op, h: &outbox.History{}, evs: evs}, true))
	require.Contains(t, js.String(), `"object_id": "msg-1"`)

	// An event of an op whose object is not known yet says it is unconfirmed.
	evs[0].Unconfirmed = true
	text.Reset()
	require.NoError(t, printLookup(&text, lookupView{op: op, h: &outbox.History{}, evs: evs}, false))
	require.Contains(t, text.String(), "unconfirmed: the op's object is not known yet")
	js.Reset()
	require.NoError(t, printLookup(&js, lookupView{op: op, h: &outbox.History{}, evs: evs}, true))
	require.Contains(t, js.String(), `"unconfirmed": true`)
}

// TestLookupPrintsTheTraceID: support finds the op's trace from its key.
func TestLookupPrintsTheTraceID(t *testing.T) {
	t.Parallel()
	op := &outbox.Op{ID: "op-1", Key: "order-9", Tool: protocol.ToolWebhookPost, Vendor: "webhook", Status: protocol.StatusSucceeded,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	var text strings.Builder
	require.NoError(t, printLookup(&text, lookupView{op: op, h: &outbox.History{}, evs: nil}, false))
	require.Regexp(t, `trace id\s+4bf92f3577b34da6a3ce929d0e0e4736\n`, text.String())
	var js strings.Builder
	require.NoError(t, printLookup(&js, lookupView{op: op, h: &outbox.History{}, evs: nil}, true))
	require.Contains(t, js.String(), `"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"`)
}
