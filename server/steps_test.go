package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// checkoutCatalog is a composite shop.checkout (charge, receipt mail, webhook) over
// three fake targets, the charge compensated by a refund.
func checkoutCatalog(pay, mail, hooks string) string {
	return `
targets:
  pay: {base_url: ` + pay + `, lookup_path: /_lookup}
  mail: {base_url: ` + mail + `, lookup_path: /_lookup}
  hooks: {base_url: ` + hooks + `, lookup_path: /_lookup}
tools:
  pay.charge:
    description: Charge a card.
    class: write
    target: pay
    path: /charges
    input_schema: {type: object, properties: {amount: {type: integer}, customer: {type: string}}, required: [amount, customer]}
  pay.refund:
    description: Refund a charge.
    class: write
    target: pay
    path: /refunds
    input_schema: {type: object, properties: {charge: {type: string}}, required: [charge]}
  mail.receipt:
    description: Mail a receipt.
    class: write
    target: mail
    path: /mails
    input_schema: {type: object, properties: {to: {type: string}, charge: {type: string}}, required: [to]}
  hooks.order_paid:
    description: Tell the shop an order is paid.
    class: write
    target: hooks
    path: /events
    input_schema: {type: object, properties: {order: {type: string}}, required: [order]}
  shop.checkout:
    description: Check an order out.
    input_schema:
      type: object
      properties: {order: {type: string}, amount: {type: integer}, customer: {type: string}, email: {type: string}}
      required: [order, amount, customer]
    steps:
      - name: charge
        tool: pay.charge
        args: {amount: {$from: /call/amount}, customer: {$from: /call/customer}}
        compensate:
          tool: pay.refund
          args: {charge: {$from: /steps/charge/vendor_ref}}
      - name: receipt
        tool: mail.receipt
        when: /call/email
        args: {to: {$from: /call/email}, charge: {$from: /steps/charge/vendor_ref}}
      - name: notify
        tool: hooks.order_paid
        args: {order: {$from: /call/order}}
`
}

type checkoutEnv struct {
	base, token     string
	pay, mail, hook *fakewebhook.Server
	tenants         *tenant.Store
	pool            *pgxpool.Pool
}

func checkoutServer(t *testing.T) checkoutEnv {
	t.Helper()
	return checkoutServerOf(t, func(c string) string { return c })
}

// checkoutServerOf is checkoutServer on the catalog edit makes of checkoutCatalog.
func checkoutServerOf(t *testing.T, edit func(string) string) checkoutEnv {
	t.Helper()
	return checkoutServerOfConfig(t, edit, func(*server.Config) {})
}

// checkoutServerOfConfig is checkoutServerOf with the server's configuration adjusted.
func checkoutServerOfConfig(t *testing.T, edit func(string) string, adjust func(*server.Config)) checkoutEnv {
	t.Helper()
	e := checkoutEnv{pay: fakewebhook.New(fakewebhook.Config{}), mail: fakewebhook.New(fakewebhook.Config{}),
		hook: fakewebhook.New(fakewebhook.Config{})}
	var urls []string
	for _, f := range []*fakewebhook.Server{e.pay, e.mail, e.hook} {
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, edit(checkoutCatalog(urls[0], urls[1], urls[2])))
	cfg.ReconcileInterval = time.Second
	cfg.WebhookTimeout = 2 * time.Second
	cfg.WebhookLookupLag = 3 * time.Second
	cfg.Queues["webhook"] = dispatch.QueueConfig{MaxWorkers: 5, JobTimeout: 3 * time.Second}
	adjust(&cfg)
	_, e.base = runServer(t, context.Background(), cfg)
	var err error
	e.tenants = tenant.NewStore(pool)
	e.pool = pool
	_, e.token, err = e.tenants.Create(context.Background(), "acme")
	require.NoError(t, err)
	return e
}

// settle polls the parent op under key until it is settled.
func (e checkoutEnv) settle(t *testing.T, key string) protocol.Op {
	t.Helper()
	var op protocol.Op
	require.Eventually(t, func() bool {
		status, body := getJSON(t, e.base, e.token, "/v1/ops/"+key)
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &op))
		return protocol.Status(op.Status).Settled()
	}, 30*time.Second, 100*time.Millisecond)
	return op
}

func getJSON(t *testing.T, base, token, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&b)
	return resp.StatusCode, string(b)
}

const checkoutCall = `{"tool":"shop.checkout","args":{"order":"o-1","amount":1200,"customer":"cus_1","email":"a@example.com"}}`

// TestStepsCheckoutEachSideEffectOnce: a checkout posted twice, then again while it
// runs, makes one charge, one mail and one webhook; the parent succeeds with its
// steps' ops listed, the receipt built from the charge's vendor ref; the same key with
// another payload is 422 and makes nothing.
func TestStepsCheckoutEachSideEffectOnce(t *testing.T) {
	t.Parallel()
	e := checkoutServer(t)
	for range 3 {
		status, body := postJSON(t, e.base, e.token, "/v1/ops", "checkout-1", checkoutCall)
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, status, body)
	}
	op := e.settle(t, "checkout-1")
	require.Equal(t, "succeeded", op.Status, op)
	require.Len(t, op.Steps, 3)
	for _, s := range op.Steps {
		require.Equal(t, "succeeded", s.Status, s)
		require.Equal(t, "~step/"+op.ID+"/"+s.Name, s.Key)
	}
	status, body := postJSON(t, e.base, e.token, "/v1/ops", "checkout-1", checkoutCall)
	require.Equal(t, http.StatusOK, status, body)
	status, body = postJSON(t, e.base, e.token, "/v1/ops", "checkout-1",
		`{"tool":"shop.checkout","args":{"order":"o-1","amount":9900,"customer":"cus_1"}}`)
	require.Equal(t, http.StatusUnprocessableEntity, status, body)
	time.Sleep(time.Second)
	require.Equal(t, 1, e.pay.EffectCount())
	require.Equal(t, 1, e.mail.EffectCount())
	require.Equal(t, 1, e.hook.EffectCount())
	var mail struct{ Charge string }
	require.NoError(t, json.Unmarshal(e.mail.Effects()[0].Body, &mail))
	require.Equal(t, e.pay.Effects()[0].ID, mail.Charge, "the receipt names the charge's vendor ref")
}

// TestStepsRefusedStepIsCompensatedOnce: the mail target refuses the receipt (a 4xx):
// the charge is refunded once, the webhook never sent, the parent failed with state
// compensated and its steps listed with the refund.
func TestStepsRefusedStepIsCompensatedOnce(t *testing.T) {
	t.Parallel()
	e := checkoutServer(t)
	e.mail.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultReject, Status: 422})
	status, body := postJSON(t, e.base, e.token, "/v1/ops", "checkout-2", checkoutCall)
	require.Equal(t, http.StatusAccepted, status, body)
	op := e.settle(t, "checkout-2")
	require.Equal(t, "failed", op.Status, op)
	var failure struct {
		FailedStep string `json:"failed_step"`
	}
	require.NoError(t, json.Unmarshal(op.Error, &failure))
	require.Equal(t, "receipt", failure.FailedStep)
	require.JSONEq(t, `"compensated"`, string(mustField(t, op.Error, "state")))
	names := []string{}
	for _, s := range op.Steps {
		names = append(names, s.Name+"="+s.Status)
	}
	require.Equal(t, []string{"charge=succeeded", "receipt=failed", "notify=not_run", "undo.charge=succeeded"}, names)
	time.Sleep(time.Second)
	effects := e.pay.Effects()
	require.Len(t, effects, 2, "one charge, one refund")
	require.Equal(t, "/refunds", effects[1].Path)
	require.JSONEq(t, `{"charge":"`+effects[0].ID+`"}`, string(effects[1].Body))
	require.Zero(t, e.hook.EffectCount())
}

// TestStepsUnknownStepFoundByReconciler: the webhook's answer is lost after it acted;
// the reconciler finds it through the lookup path, and the parent succeeds with one
// webhook.
func TestStepsUnknownStepFoundByReconciler(t *testing.T) {
	t.Parallel()
	e := checkoutServer(t)
	e.hook.InjectFault(fakewebhook.Fault{Kind: fakewebhook.FaultDropAfterEffect})
	status, body := postJSON(t, e.base, e.token, "/v1/ops", "checkout-3", checkoutCall)
	require.Equal(t, http.StatusAccepted, status, body)
	op := e.settle(t, "checkout-3")
	require.Equal(t, "succeeded", op.Status, op)
	require.Equal(t, 1, e.hook.EffectCount())
	require.Equal(t, 1, e.pay.EffectCount())
}

// TestStepsReservedKeyRefused: a caller's key may not forge a step's.
func TestStepsReservedKeyRefused(t *testing.T) {
	t.Parallel()
	e := checkoutServer(t)
	status, body := postJSON(t, e.base, e.token, "/v1/ops", "~step/x/charge", `{"tool":"pay.charge","args":{"amount":1,"customer":"c"}}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Zero(t, e.pay.EffectCount())
}

// TestMCPMintedKeysReservedOverHTTP (issue 42, item 4): an HTTP caller may not use a key
// of the shapes the MCP server mints (mcp_…, mcpw_…): another agent of the tenant could
// plant an op under a conversation's future key. 400 invalid-idempotency-key, rule
// reserved; nothing recorded or sent. Reading such a key's op over HTTP stays allowed.
func TestMCPMintedKeysReservedOverHTTP(t *testing.T) {
	t.Parallel()
	e := checkoutServer(t)
	for _, key := range []string{"mcp_0123456789abcdef0123456789abcdef0123456789abcdef", "mcpw_0123_x"} {
		status, body := postJSON(t, e.base, e.token, "/v1/ops", key, `{"tool":"pay.charge","args":{"amount":1,"customer":"c"}}`)
		require.Equal(t, http.StatusBadRequest, status, body)
		var p map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		require.Equal(t, "https://oncebox.dev/problems/invalid-idempotency-key", p["type"])
		require.Equal(t, "reserved", p["rule"])
		require.Contains(t, p["detail"], "keeps for the keys its MCP server mints")
		status, _ = getJSON(t, e.base, e.token, "/v1/ops/"+key)
		require.Equal(t, http.StatusNotFound, status)
	}
	status, body := postJSON(t, e.base, e.token, "/v1/ops", "MCP_mine", `{"tool":"pay.charge","args":{"amount":1,"customer":"c"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	require.Eventually(t, func() bool { return e.pay.EffectCount() == 1 }, 20*time.Second, 50*time.Millisecond)
}

func mustField(t *testing.T, doc json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(doc, &m))
	return m[name]
}

// TestStepsRejectedApprovalIsCompensatedOnce: the receipt needs an approval, and an
// approver rejects it while the run waits: the charge is refunded once, no mail and no
// webhook are sent, and the parent failed with state compensated; a second rejection
// changes nothing.
func TestStepsRejectedApprovalIsCompensatedOnce(t *testing.T) {
	t.Parallel()
	e := checkoutServerOf(t, func(c string) string {
		return strings.Replace(c, "    target: mail\n", "    target: mail\n    approval: {mode: always}\n", 1)
	})
	approver, err := e.tenants.NewTokenWithRole(context.Background(), "acme", tenant.RoleApprover)
	require.NoError(t, err)
	status, body := postJSON(t, e.base, e.token, "/v1/ops", "checkout-4", checkoutCall)
	require.Equal(t, http.StatusAccepted, status, body)
	var parent protocol.Op
	require.NoError(t, json.Unmarshal([]byte(body), &parent))
	receipt := "/v1/ops/" + url.PathEscape("~step/"+parent.ID+"/receipt")
	require.Eventually(t, func() bool {
		status, body := getJSON(t, e.base, e.token, receipt)
		return status == http.StatusOK && strings.Contains(body, `"status":"awaiting_approval"`)
	}, 20*time.Second, 100*time.Millisecond, "the receipt's op waits for approval")
	require.Equal(t, 1, e.pay.EffectCount(), "the charge was made before the receipt")
	status, body = postJSON(t, e.base, approver, receipt+"/reject", "", `{"reason":"wrong address"}`)
	require.Equal(t, http.StatusOK, status, body)

	op := e.settle(t, "checkout-4")
	require.Equal(t, "failed", op.Status, op)
	require.JSONEq(t, `"compensated"`, string(mustField(t, op.Error, "state")))
	require.JSONEq(t, `"receipt"`, string(mustField(t, op.Error, "failed_step")))
	names := []string{}
	for _, s := range op.Steps {
		names = append(names, s.Name+"="+s.Status)
	}
	require.Equal(t, []string{"charge=succeeded", "receipt=rejected", "notify=not_run", "undo.charge=succeeded"}, names)
	status, body = postJSON(t, e.base, approver, receipt+"/reject", "", `{"reason":"again"}`)
	require.Less(t, status, 500, body)
	time.Sleep(time.Second)
	effects := e.pay.Effects()
	require.Len(t, effects, 2, "one charge, one refund")
	require.Equal(t, "/refunds", effects[1].Path)
	require.JSONEq(t, `{"charge":"`+effects[0].ID+`"}`, string(effects[1].Body))
	require.Zero(t, e.mail.EffectCount())
	require.Zero(t, e.hook.EffectCount())
}

// TestStepsCheckoutOverMCP: an SDK client's tools/list shows the composite tool as a
// write tool whose description names its steps in order; called twice with the same
// arguments, it makes one charge, one mail and one webhook, and the second call is
// answered as a replay of the succeeded op, its result listing the steps.
func TestStepsCheckoutOverMCP(t *testing.T) {
	t.Parallel()
	e := checkoutServer(t)
	ctx := context.Background()
	cs := mcpSession(t, e.base, e.token)
	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var tool *mcp.Tool
	for _, x := range list.Tools {
		if x.Name == "shop_checkout" {
			tool = x
		}
	}
	require.NotNil(t, tool, "tools: %v", list.Tools)
	require.Equal(t, "shop.checkout", tool.Annotations.Title)
	require.False(t, tool.Annotations.ReadOnlyHint)
	require.True(t, strings.HasPrefix(tool.Description, "Check an order out. Steps, each done once, in order: charge (pay.charge), then "+
		"receipt (mail.receipt), then notify (hooks.order_paid)."), tool.Description)

	args := map[string]any{"order": "o-9", "amount": 700, "customer": "cus_9", "email": "b@example.com"}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shop_checkout", Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	require.Eventually(t, func() bool {
		return e.pay.EffectCount() == 1 && e.mail.EffectCount() == 1 && e.hook.EffectCount() == 1
	}, 30*time.Second, 100*time.Millisecond)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "shop_checkout", Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	answer, ok := res.StructuredContent.(map[string]any)
	require.True(t, ok, "%+v", res)
	require.Equal(t, true, answer["replayed"], answer)
	require.Equal(t, "succeeded", answer["status"], answer)
	require.Len(t, answer["result"].(map[string]any)["steps"], 3, "the settled result lists the steps")
	time.Sleep(time.Second)
	require.Equal(t, 1, e.pay.EffectCount())
	require.Equal(t, 1, e.mail.EffectCount())
	require.Equal(t, 1, e.hook.EffectCount())
}

// purgedStepEnv is checkoutServerOf with the purge every 300 ms, the charge kept for one
// second once settled, and the receipt waiting for approval: the charge's op is expired
// long before anyone decides the receipt.
func purgedStepEnv(t *testing.T) (checkoutEnv, string) {
	t.Helper()
	e := checkoutServerOfConfig(t, func(c string) string {
		c = strings.Replace(c, "    path: /charges\n", "    path: /charges\n    ttl: 1s\n", 1)
		return strings.Replace(c, "    target: mail\n", "    target: mail\n    approval: {mode: always}\n", 1)
	}, func(cfg *server.Config) { cfg.PurgeInterval = 300 * time.Millisecond })
	approver, err := e.tenants.NewTokenWithRole(context.Background(), "acme", tenant.RoleApprover)
	require.NoError(t, err)
	return e, approver
}

// waitPastTheChargesTTL starts checkout key and waits until its receipt awaits approval
// and the purge has had several chances at the settled charge's op.
func (e checkoutEnv) waitPastTheChargesTTL(t *testing.T, key string) (receipt string) {
	t.Helper()
	status, body := postJSON(t, e.base, e.token, "/v1/ops", key, checkoutCall)
	require.Equal(t, http.StatusAccepted, status, body)
	var parent protocol.Op
	require.NoError(t, json.Unmarshal([]byte(body), &parent))
	receipt = "/v1/ops/" + url.PathEscape("~step/"+parent.ID+"/receipt")
	require.Eventually(t, func() bool {
		status, body := getJSON(t, e.base, e.token, receipt)
		return status == http.StatusOK && strings.Contains(body, `"status":"awaiting_approval"`)
	}, 20*time.Second, 100*time.Millisecond, "the receipt's op waits for approval")
	// The purge looks at an op a minute after its expires_at (opstate's purgeSlack): the
	// charge's op is made to have settled, and expired, two minutes ago, so that a dozen
	// purges (300 ms) find it due.
	tag, err := e.pool.Exec(context.Background(), `UPDATE oncebox_op SET created_at = created_at - interval '2 minutes',
		updated_at = updated_at - interval '2 minutes', expires_at = expires_at - interval '2 minutes'
		WHERE idempotency_key = $1 AND status = 'succeeded'`, "~step/"+parent.ID+"/charge")
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the charge's op settled")
	time.Sleep(4 * time.Second)
	require.Equal(t, 1, e.pay.EffectCount(), "the charge was made once, and not again while the receipt waits")
	return receipt
}

// TestStepsPurgeNeverRedoesAStepWhileItsSiblingWaits (issue 42, item 1): a composite
// op's charge settles, its receipt waits for approval past the charge's TTL while the
// purge runs every 300 ms: the charge's op is kept, never enqueued again; once the
// receipt is approved the checkout succeeds with one charge, one mail, one webhook.
func TestStepsPurgeNeverRedoesAStepWhileItsSiblingWaits(t *testing.T) {
	t.Parallel()
	e, approver := purgedStepEnv(t)
	receipt := e.waitPastTheChargesTTL(t, "checkout-p1")
	status, body := postJSON(t, e.base, approver, receipt+"/approve", "", `{"reason":"fine"}`)
	require.Equal(t, http.StatusOK, status, body)
	op := e.settle(t, "checkout-p1")
	require.Equal(t, "succeeded", op.Status, op)
	time.Sleep(time.Second)
	require.Equal(t, 1, e.pay.EffectCount(), "one charge")
	require.Equal(t, 1, e.mail.EffectCount(), "one receipt")
	require.Equal(t, 1, e.hook.EffectCount(), "one webhook")
}

// TestStepsPurgeNeverSkipsACompensation (issue 42, item 1): as above, but the receipt is
// rejected: the charge's op was kept, so its refund runs once and the checkout ends
// compensated (a purged charge was skipped as "not done": compensated without a refund).
func TestStepsPurgeNeverSkipsACompensation(t *testing.T) {
	t.Parallel()
	e, approver := purgedStepEnv(t)
	receipt := e.waitPastTheChargesTTL(t, "checkout-p2")
	status, body := postJSON(t, e.base, approver, receipt+"/reject", "", `{"reason":"wrong address"}`)
	require.Equal(t, http.StatusOK, status, body)
	op := e.settle(t, "checkout-p2")
	require.Equal(t, "failed", op.Status, op)
	require.JSONEq(t, `"compensated"`, string(mustField(t, op.Error, "state")))
	time.Sleep(time.Second)
	effects := e.pay.Effects()
	require.Len(t, effects, 2, "one charge, one refund")
	require.Equal(t, "/refunds", effects[1].Path)
	require.Zero(t, e.mail.EffectCount())
}
