package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// taskClient is a 2026-07-28 MCP client that declares the tasks extension
// (io.modelcontextprotocol/tasks) in each request's capabilities, written by hand:
// no Go or TypeScript SDK here implements the extension yet.
type taskClient struct {
	t     *testing.T
	base  string
	token string
	tasks bool
	id    atomic.Int64
}

// rpc sends one JSON-RPC request to /mcp and returns its result, or its error.
func (c *taskClient) rpc(method string, params map[string]any) (result, rpcErr map[string]any) {
	c.t.Helper()
	caps := map[string]any{}
	if c.tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "tasks-test", "version": "1"}, "io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		require.Equal(c.t, http.StatusOK, resp.StatusCode, b.String())
	}
	var raw []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				raw = []byte(d)
				break
			}
		}
	} else {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		raw = b.Bytes()
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	require.NoError(c.t, json.Unmarshal(raw, &msg), string(raw))
	return msg.Result, msg.Error
}

// call calls a tool and returns its result.
func (c *taskClient) call(tool string, args map[string]any) map[string]any {
	c.t.Helper()
	res, rpcErr := c.rpc("tools/call", map[string]any{"name": tool, "arguments": args})
	require.Nil(c.t, rpcErr)
	return res
}

// get is tasks/get; it requires success.
func (c *taskClient) get(taskID string) map[string]any {
	c.t.Helper()
	res, rpcErr := c.rpc("tasks/get", map[string]any{"taskId": taskID})
	require.Nil(c.t, rpcErr)
	require.Equal(c.t, "complete", res["resultType"])
	require.Equal(c.t, taskID, res["taskId"])
	return res
}

// until polls tasks/get until the task has status.
func (c *taskClient) until(taskID, status string) map[string]any {
	c.t.Helper()
	var res map[string]any
	require.Eventually(c.t, func() bool { res = c.get(taskID); return res["status"] == status }, 15*time.Second, 100*time.Millisecond,
		"task %s never reached %s", taskID, status)
	return res
}

// resultText is the text of a completed task's tool result.
func resultText(t *testing.T, task map[string]any) string {
	t.Helper()
	result, ok := task["result"].(map[string]any)
	require.True(t, ok, "a completed task carries its result: %v", task)
	return result["content"].([]any)[0].(map[string]any)["text"].(string)
}

// TestMCPTasks (issue 45, item 4): a client that declares the tasks extension gets a
// task (the op) for a side-effecting call; tasks/get reports working→completed with
// the result; a refund that waits for approval is input_required with the console
// link as a URL elicitation, is approved by a person, then completed; tasks/cancel
// cancels a refund still waiting (Stripe records no refund for it) and says it is too
// late for a sent payment; another tenant's agent does not find the tasks; a new
// server on the same database still answers them; one side effect each. A client
// that does not declare the extension gets the tool result, as before.
func TestMCPTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startWith(t, func(c *server.Config) { c.PublicURL = "http://oncebox.test" })
	c := &taskClient{t: t, base: e.base, token: e.agent, tasks: true}

	plain := (&taskClient{t: t, base: e.base, token: e.agent}).call("stripe_payment_intent",
		map[string]any{"amount": 700, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true})
	require.NotEqual(t, "task", plain["resultType"], "no extension declared, no task: %v", plain)
	require.Contains(t, plain["content"].([]any)[0].(map[string]any)["text"], "Done")

	created := c.call("stripe_payment_intent", map[string]any{"amount": 9000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true})
	require.Equal(t, "task", created["resultType"], "%v", created)
	payTask := created["taskId"].(string)
	require.Contains(t, []any{"working", "completed"}, created["status"])
	require.NotEmpty(t, created["createdAt"])
	done := c.until(payTask, "completed")
	require.Contains(t, resultText(t, done), "Done")
	require.Len(t, e.stripe.PaymentIntents(), 3, "the setup's payment, the plain one and the task's")
	var payRef string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT vendor_ref FROM oncebox_op WHERE id = $1`, payTask).Scan(&payRef))

	created = c.call("stripe_refund", map[string]any{"payment_intent": payRef, "amount": 3000})
	require.Equal(t, "task", created["resultType"], "%v", created)
	refundTask := created["taskId"].(string)
	waiting := c.until(refundTask, "input_required")
	link := "http://oncebox.test/console/approvals?op=" + refundTask
	require.Contains(t, waiting["statusMessage"], link)
	input := waiting["inputRequests"].(map[string]any)["approval-"+refundTask].(map[string]any)
	require.Equal(t, "elicitation/create", input["method"])
	require.Equal(t, map[string]any{"mode": "url", "url": link, "message": "Approve or reject this refund in the oncebox console."}, input["params"])
	res, rpcErr := c.rpc("tasks/update", map[string]any{"taskId": refundTask, "inputResponses": map[string]any{"approval-" + refundTask: map[string]any{"action": "accept"}}})
	require.Nil(t, rpcErr)
	require.Equal(t, "complete", res["resultType"])
	require.Equal(t, "input_required", c.get(refundTask)["status"], "nothing an agent sends approves")
	require.Empty(t, e.stripe.Refunds())

	var key string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT idempotency_key FROM oncebox_op WHERE id = $1`, refundTask).Scan(&key))
	approve, _ := http.NewRequest(http.MethodPost, e.base+"/v1/ops/"+key+"/approve", strings.NewReader(`{"reason":"asked in the chat"}`))
	approve.Header.Set("Authorization", "Bearer "+e.approver)
	approve.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(approve)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resultText(t, c.until(refundTask, "completed")), "Done")
	require.Len(t, e.stripe.Refunds(), 1)

	created = c.call("stripe_refund", map[string]any{"payment_intent": payRef, "amount": 2000})
	cancelTask := created["taskId"].(string)
	c.until(cancelTask, "input_required")
	res, rpcErr = c.rpc("tasks/cancel", map[string]any{"taskId": cancelTask})
	require.Nil(t, rpcErr)
	require.Equal(t, "complete", res["resultType"])
	require.Equal(t, "cancelled", c.get(cancelTask)["status"])
	_, rpcErr = c.rpc("tasks/cancel", map[string]any{"taskId": payTask})
	require.NotNil(t, rpcErr, "a sent payment cannot be cancelled")
	require.EqualValues(t, -32012, rpcErr["code"])
	require.Contains(t, rpcErr["message"], "too late to cancel")
	require.Equal(t, "completed", c.get(payTask)["status"])

	_, other, err := tenant.NewStore(e.pool).Create(ctx, "other")
	require.NoError(t, err)
	stranger := &taskClient{t: t, base: e.base, token: other, tasks: true}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		for _, id := range []string{payTask, refundTask, "not-a-task"} {
			_, rpcErr = stranger.rpc(method, map[string]any{"taskId": id})
			require.NotNil(t, rpcErr)
			require.Contains(t, rpcErr["message"], "task not found", "%s %s", method, id)
		}
	}

	restarted := restart(t, e)
	again := &taskClient{t: t, base: restarted, token: e.agent, tasks: true}
	require.Contains(t, resultText(t, again.get(payTask)), "Done")
	require.Contains(t, resultText(t, again.get(refundTask)), "Done")
	require.Equal(t, "cancelled", again.get(cancelTask)["status"])
	require.Len(t, e.stripe.PaymentIntents(), 3)
	require.Len(t, e.stripe.Refunds(), 1, "one refund: the cancelled one was never sent")
}

// restart starts a second server on e's database (as after a restart) and returns its
// base URL.
func restart(t *testing.T, e *env) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := server.Defaults()
	cfg.DatabaseURL = dbtest.ConnString(t, e.pool)
	cfg.Addr = "127.0.0.1:0"
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_console", "http://127.0.0.1:1"
	cfg.RefundApprovalAbove = 1000
	cfg.PublicURL = "http://oncebox.test"
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + addr.String()
}
