package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/testlog"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	_, err := api.New(api.Config{})
	require.ErrorContains(t, err, "Config.Outbox is required")
}

func TestPostOpNewThenReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, token := e.newTenant(t, "acme")

	body := `{"tool": "stripe.payment_intent", "args": {"amount": 1000, "currency": "usd"},
		"conversation_id": "conv-1", "tool_call_id": "call-1"}`
	rec := e.post(token, "  order/42 pay ", body)
	require.Equal(t, http.StatusBadRequest, rec.Code, "an inner space is not visible ASCII")

	rec = e.post(token, " order/42-pay ", body)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	require.Equal(t, "/v1/ops/order%2F42-pay", rec.Header().Get("Location"))
	require.Empty(t, rec.Header().Get("Idempotent-Replayed"))
	op := decodeOp(t, rec)
	require.Equal(t, "order/42-pay", op.Key)
	require.Equal(t, "stripe.payment_intent", op.Tool)
	require.Equal(t, "pending", op.Status)
	require.Len(t, op.Fingerprint, 64)
	require.Equal(t, "conv-1", op.ConversationID)
	require.Equal(t, "call-1", op.ToolCallID)
	require.Equal(t, "null", string(op.Result))
	require.Equal(t, "null", string(op.Error))
	for _, ts := range []time.Time{op.CreatedAt, op.UpdatedAt, op.ExpiresAt} {
		require.False(t, ts.IsZero(), "RFC 3339 timestamps (decoded by time.Time)")
	}
	var members map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &members))
	require.NotContains(t, members, "args", "args may be personal and are never shown")

	// Same payload with other white space and key order: a replay.
	replay := e.post(token, "order/42-pay", `{"args": {"currency": "usd", "amount": 1000}, "tool": "stripe.payment_intent",
		"conversation_id": "conv-1", "tool_call_id": "call-1"}`)
	require.Equal(t, http.StatusOK, replay.Code, replay.Body.String())
	require.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	require.Equal(t, "/v1/ops/order%2F42-pay", replay.Header().Get("Location"))
	require.Equal(t, rec.Body.String(), replay.Body.String())

	// The Location is followable.
	get := e.do(req(http.MethodGet, "/v1/ops/order%2F42-pay", token, "", ""))
	require.Equal(t, http.StatusOK, get.Code, get.Body.String())
	require.Equal(t, op.ID, decodeOp(t, get).ID)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", op.ID))
}

func TestPostOpProblems(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.MaxBodyBytes = 4 << 10 })
	_, token := e.newTenant(t, "acme")

	tests := []struct {
		name   string
		req    func() *http.Request
		status int
		slug   string
		field  string
		rule   string
	}{
		{name: "no token", status: 401, slug: "unauthorized",
			req: func() *http.Request { return req("POST", "/v1/ops", "", "k1", paymentBody) }},
		{name: "unknown token", status: 401, slug: "unauthorized",
			req: func() *http.Request { return req("POST", "/v1/ops", "obx_not-a-real-token", "k1", paymentBody) }},
		{name: "basic auth", status: 401, slug: "unauthorized",
			req: func() *http.Request {
				r := req("POST", "/v1/ops", "", "k1", paymentBody)
				r.Header.Set("Authorization", "Basic "+token)
				return r
			}},
		{name: "auth is checked before the key", status: 401, slug: "unauthorized",
			req: func() *http.Request { return req("POST", "/v1/ops", "", "", "{") }},
		{name: "missing key", status: 400, slug: "missing-idempotency-key", rule: "missing",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "", paymentBody) }},
		{name: "key is checked before the body", status: 400, slug: "missing-idempotency-key", rule: "missing",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "", "{") }},
		{name: "blank key", status: 400, slug: "missing-idempotency-key", rule: "missing",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "   ", paymentBody) }},
		{name: "key too long", status: 400, slug: "invalid-idempotency-key", rule: "too_long",
			req: func() *http.Request { return req("POST", "/v1/ops", token, strings.Repeat("k", 256), paymentBody) }},
		{name: "key not visible ASCII", status: 400, slug: "invalid-idempotency-key", rule: "not_visible_ascii",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "a b", paymentBody) }},
		{name: "two keys", status: 400, slug: "invalid-idempotency-key", rule: "repeated",
			req: func() *http.Request {
				r := req("POST", "/v1/ops", token, "k1", paymentBody)
				r.Header.Add("Idempotency-Key", "k2")
				return r
			}},
		{name: "bad wait", status: 400, slug: "invalid-wait", field: "wait",
			req: func() *http.Request { return req("POST", "/v1/ops?wait=soon", token, "k1", paymentBody) }},
		{name: "negative wait", status: 400, slug: "invalid-wait", field: "wait",
			req: func() *http.Request { return req("POST", "/v1/ops?wait=-1", token, "k1", paymentBody) }},
		{name: "text/plain", status: 415, slug: "unsupported-media-type",
			req: func() *http.Request {
				r := req("POST", "/v1/ops", token, "k1", paymentBody)
				r.Header.Set("Content-Type", "text/plain")
				return r
			}},
		{name: "no content type", status: 415, slug: "unsupported-media-type",
			req: func() *http.Request {
				r := req("POST", "/v1/ops", token, "k1", paymentBody)
				r.Header.Del("Content-Type")
				return r
			}},
		{name: "body too large", status: 413, slug: "payload-too-large",
			req: func() *http.Request {
				big := `{"tool": "webhook.post", "args": {"target": "crm", "path": "/x", "body": "` + strings.Repeat("a", 5000) + `"}}`
				return req("POST", "/v1/ops", token, "k1", big)
			}},
		{name: "invalid JSON", status: 400, slug: "invalid-json",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "k1", `{"tool": `) }},
		{name: "not an object", status: 400, slug: "invalid-json",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "k1", `[1, 2]`) }},
		{name: "null body", status: 400, slug: "invalid-json",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "k1", `null`) }},
		{name: "trailing data", status: 400, slug: "invalid-json",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "k1", paymentBody+`{}`) }},
		{name: "unknown top-level member", status: 400, slug: "invalid-json", field: "amount",
			req: func() *http.Request {
				return req("POST", "/v1/ops", token, "k1", `{"tool": "stripe.payment_intent", "amount": 5, "args": {}}`)
			}},
		{name: "tool of the wrong type", status: 400, slug: "invalid-json", field: "tool",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "k1", `{"tool": 7}`) }},
		{name: "unknown tool", status: 400, slug: "unknown-tool", field: "tool",
			req: func() *http.Request {
				return req("POST", "/v1/ops", token, "k1", `{"tool": "stripe.charge", "args": {}}`)
			}},
		{name: "missing tool", status: 400, slug: "unknown-tool", field: "tool",
			req: func() *http.Request { return req("POST", "/v1/ops", token, "k1", `{"args": {}}`) }},
		{name: "invalid amount", status: 400, slug: "invalid-args", field: "args.amount",
			req: func() *http.Request {
				return req("POST", "/v1/ops", token, "k1", `{"tool": "stripe.payment_intent", "args": {"amount": -5, "currency": "usd"}}`)
			}},
		{name: "webhook target not allowed", status: 400, slug: "invalid-args", field: "args.target",
			req: func() *http.Request {
				return req("POST", "/v1/ops", token, "k1", `{"tool": "webhook.post", "args": {"target": "evil", "path": "/x"}}`)
			}},
		{name: "NUL in args", status: 400, slug: "invalid-args", field: "args",
			req: func() *http.Request {
				return req("POST", "/v1/ops", token, "k1", `{"tool": "webhook.post", "args": {"target": "crm", "path": "/x", "body": "a\u0000b"}}`)
			}},
		{name: "args nested too deeply", status: 400, slug: "invalid-args", field: "args",
			req: func() *http.Request {
				deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
				return req("POST", "/v1/ops", token, "k1", `{"tool": "webhook.post", "args": {"target": "crm", "path": "/x", "body": `+deep+`}}`)
			}},
		{name: "conversation id too long", status: 400, slug: "invalid-args", field: "conversation_id",
			req: func() *http.Request {
				return req("POST", "/v1/ops", token, "k1", `{"tool": "stripe.payment_intent", "args": {"amount": 5, "currency": "usd"}, "conversation_id": "`+strings.Repeat("c", 513)+`"}`)
			}},
		{name: "conversation id differs from the header", status: 400, slug: "invalid-args", field: "conversation_id",
			req: func() *http.Request {
				r := req("POST", "/v1/ops", token, "k1", `{"tool": "stripe.payment_intent", "args": {"amount": 5, "currency": "usd"}, "conversation_id": "a"}`)
				r.Header.Set(api.HeaderConversationID, "b")
				return r
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.do(tt.req())
			p := requireProblem(t, rec, tt.status, tt.slug)
			require.Equal(t, tt.field, p.Field)
			require.Equal(t, tt.rule, p.Rule)
			if tt.status == http.StatusUnauthorized {
				require.True(t, strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer"), rec.Header().Get("WWW-Authenticate"))
				require.NotContains(t, rec.Body.String(), token)
			}
			if tt.slug == "unknown-tool" {
				require.Contains(t, p.KnownTools, "stripe.refund")
			}
		})
	}
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"), "no refused request stored an op")
}

func TestPostOpKeyConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, token := e.newTenant(t, "acme")

	first := e.post(token, "k", smallRefundBody)
	require.Equal(t, http.StatusAccepted, first.Code)
	stored := decodeOp(t, first)

	rec := e.post(token, "k", `{"tool": "stripe.refund", "args": {"payment_intent": "pi_123", "amount": 501}}`)
	p := requireProblem(t, rec, http.StatusUnprocessableEntity, "key-conflict")
	require.Equal(t, stored.Fingerprint, p.StoredFingerprint)
	require.Len(t, p.GivenFingerprint, 64)
	require.NotEqual(t, p.StoredFingerprint, p.GivenFingerprint)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job"))
}

func TestPostOpConcurrentIdenticalRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, token := e.newTenant(t, "acme")

	const n = 100
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		replayed int
		ids      = map[string]bool{}
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			rec := e.post(token, "same-key", paymentBody)
			var op opBody
			_ = json.Unmarshal(rec.Body.Bytes(), &op)
			mu.Lock()
			defer mu.Unlock()
			statuses[rec.Code]++
			if rec.Header().Get("Idempotent-Replayed") == "true" {
				replayed++
			}
			ids[op.ID] = true
		})
	}
	close(start)
	wg.Wait()

	require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusOK: n - 1}, statuses)
	require.Equal(t, n-1, replayed)
	require.Len(t, ids, 1)
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"))
	require.Equal(t, 1, dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job"))
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, tokenA := e.newTenant(t, "a")
	_, tokenB := e.newTenant(t, "b")
	approverA := e.newToken(t, "a", tenant.RoleApprover)
	adminA := e.newToken(t, "a", tenant.RoleAdmin)

	recB := e.post(tokenB, "shared", largeRefundBody)
	require.Equal(t, http.StatusAccepted, recB.Code)
	opB := decodeOp(t, recB)
	require.Equal(t, "awaiting_approval", opB.Status)

	missing := e.do(req("GET", "/v1/ops/never-used", tokenA, "", ""))
	requireProblem(t, missing, http.StatusNotFound, "not-found")

	for _, r := range []*http.Request{
		req("GET", "/v1/ops/shared", tokenA, "", ""),
		req("GET", "/v1/ops/shared?history=true&wait=1", tokenA, "", ""),
		req("GET", "/v1/ops/shared", approverA, "", ""),
		req("POST", "/v1/ops/shared/approve", approverA, "", `{"reason": "mine now"}`),
		req("POST", "/v1/ops/shared/reject", approverA, "", ""),
		req("POST", "/v1/ops/shared/approve", adminA, "", ""),
		req("POST", "/v1/ops/shared/resolve", adminA, "", `{"outcome": "failed", "reason": "x"}`),
	} {
		rec := e.do(r)
		requireProblem(t, rec, http.StatusNotFound, "not-found")
		require.Equal(t, missing.Body.String(), rec.Body.String(), "another tenant's key answers exactly as a missing one")
	}

	// A's key of the same name is its own op, with another payload and no conflict.
	recA := e.post(tokenA, "shared", paymentBody)
	require.Equal(t, http.StatusAccepted, recA.Code, recA.Body.String())
	require.NotEqual(t, opB.ID, decodeOp(t, recA).ID)

	getB := e.do(req("GET", "/v1/ops/shared", tokenB, "", ""))
	require.Equal(t, http.StatusOK, getB.Code)
	got := decodeOp(t, getB)
	require.Equal(t, opB.ID, got.ID)
	require.Equal(t, "awaiting_approval", got.Status, "A's approve did not touch B's op")
}

func TestReplayedTerminalAnswerIsByteForByte(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tn, token := e.newTenant(t, "acme")

	tests := []struct {
		key, body, status, column, stored string
	}{
		{key: "pay-ok", body: paymentBody, status: "succeeded", column: "result",
			stored: `{"id":  "pi_9" , "amount":1000,"note":"<&> \u00e9 é",   "nested": [1, 2.50, {"z": null}]}`},
		{key: "refund-declined", body: smallRefundBody, status: "failed", column: "error",
			stored: "{ \"class\": \"permanent\",\n  \"message\": \"charge_already_refunded <b>\" }"},
	}
	for _, tt := range tests {
		rec := e.post(token, tt.key, tt.body)
		require.Equal(t, http.StatusAccepted, rec.Code)
		_, err := e.pool.Exec(context.Background(),
			"UPDATE oncebox_op SET status = $3, "+tt.column+" = $4::json WHERE tenant_id = $1 AND idempotency_key = $2",
			tn.ID, tt.key, tt.status, tt.stored)
		require.NoError(t, err)

		var bodies []string
		for range 2 {
			rec := e.post(token, tt.key, tt.body)
			require.Equal(t, http.StatusOK, rec.Code)
			require.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
			var members map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &members))
			require.Equal(t, tt.stored, string(members[tt.column]), "the stored %s is replayed byte for byte", tt.column)
			require.Equal(t, `"`+tt.status+`"`, string(members["status"]))
			bodies = append(bodies, rec.Body.String())
		}
		require.Equal(t, bodies[0], bodies[1])
	}
}

func TestApproveAndReject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, agent := e.newTenant(t, "acme")
	token := e.newToken(t, "acme", tenant.RoleApprover)
	approver, err := e.tenants.Authenticate(context.Background(), token)
	require.NoError(t, err)
	jobs := func(opID string) int {
		return dbtest.Count(t, e.pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.dispatch' AND args->>'op_id' = $1", opID)
	}

	approveMe := decodeOp(t, e.post(agent, "refund-1", largeRefundBody))
	require.Equal(t, "awaiting_approval", approveMe.Status)
	require.Zero(t, jobs(approveMe.ID))

	rec := e.do(req("POST", "/v1/ops/refund-1/approve", token, "", `{"reason": "customer is right"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	approved := decodeOp(t, rec)
	require.Equal(t, approveMe.ID, approved.ID)
	require.Equal(t, "pending", approved.Status)
	require.Equal(t, 1, jobs(approveMe.ID), "approval inserts the dispatch job")

	hist := decodeOp(t, e.do(req("GET", "/v1/ops/refund-1?history=true", token, "", "")))
	require.NotNil(t, hist.History)
	require.Empty(t, hist.History.Attempts)
	require.Len(t, hist.History.Events, 2)
	require.Equal(t, "held", hist.History.Events[0].Kind, "the first status is an event of its own")
	require.Equal(t, "awaiting_approval", hist.History.Events[0].ToStatus)
	ev := hist.History.Events[1]
	require.Equal(t, "approved", ev.Kind)
	require.Equal(t, "awaiting_approval", ev.FromStatus)
	require.Equal(t, "pending", ev.ToStatus)
	require.Equal(t, fmt.Sprintf("acme token %d (approver)", approver.TokenID), ev.Actor, "the history names the token and its role")
	var detail map[string]any
	require.NoError(t, json.Unmarshal(ev.Detail, &detail))
	require.Equal(t, "customer is right", detail["reason"])
	require.EqualValues(t, approver.TokenID, detail["token_id"], "the history names the token id")
	require.Equal(t, "approver", detail["role"])
	require.Equal(t, approveMe.Fingerprint, detail["fingerprint"], "the approval is bound to the op's fingerprint")
	require.NotEmpty(t, detail["policy_version"])

	rejectMe := decodeOp(t, e.post(agent, "refund-2", strings.Replace(largeRefundBody, "20000", "30000", 1)))
	rec = e.do(req("POST", "/v1/ops/refund-2/reject", token, "", "")) // no body: no reason
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	rejected := decodeOp(t, rec)
	require.Equal(t, "rejected", rejected.Status)
	require.Contains(t, string(rejected.Error), `"rejected"`)
	require.Zero(t, jobs(rejectMe.ID))

	pendingOp := decodeOp(t, e.post(agent, "small", smallRefundBody))
	require.Equal(t, "pending", pendingOp.Status)
	// The same decision again answers 200 and changes nothing; the opposite one, or any
	// decision on an op that never awaited approval, is a conflict.
	for _, tt := range []struct{ path, status string }{
		{"/v1/ops/refund-1/approve", "pending"},
		{"/v1/ops/refund-2/reject", "rejected"},
	} {
		rec := e.do(req("POST", tt.path, token, "", `{"reason": "again"}`))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, tt.status, decodeOp(t, rec).Status, tt.path)
	}
	for _, tt := range []struct{ path, status string }{
		{"/v1/ops/refund-1/reject", "pending"},
		{"/v1/ops/refund-2/approve", "rejected"},
		{"/v1/ops/small/approve", "pending"},
		{"/v1/ops/small/reject", "pending"},
	} {
		p := requireProblem(t, e.do(req("POST", tt.path, token, "", "")), http.StatusConflict, "wrong-state")
		require.Equal(t, tt.status, p.OpStatus, tt.path)
	}
	require.Equal(t, 1, jobs(approveMe.ID), "a second approval inserts no second job")
	require.Equal(t, 2, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1", approveMe.ID), "and records nothing (held, approved)")

	// The optional body is still checked when present.
	decodeOp(t, e.post(agent, "refund-3", strings.Replace(largeRefundBody, "20000", "40000", 1)))
	p := requireProblem(t, e.do(req("POST", "/v1/ops/refund-3/approve", token, "", `{"reason": 5}`)), http.StatusBadRequest, "invalid-json")
	require.Equal(t, "reason", p.Field)
	r := req("POST", "/v1/ops/refund-3/approve", token, "", `{"reason": "x"}`)
	r.Header.Set("Content-Type", "text/plain")
	requireProblem(t, e.do(r), http.StatusUnsupportedMediaType, "unsupported-media-type")
}

func TestWaitReturnsTheSettledOp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tn, token := e.newTenant(t, "acme")

	settle := func(key string) {
		for {
			tag, err := e.pool.Exec(context.Background(),
				`UPDATE oncebox_op SET status = 'succeeded', result = '{"id": "pi_1"}' WHERE tenant_id = $1 AND idempotency_key = $2`, tn.ID, key)
			if err != nil || tag.RowsAffected() == 1 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	go func() { time.Sleep(100 * time.Millisecond); settle("post-wait") }()
	start := time.Now()
	rec := e.post(token, "post-wait", paymentBody) // no wait: answers at once
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	rec = e.do(req("GET", "/v1/ops/post-wait?wait=5s", token, "", ""))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "succeeded", decodeOp(t, rec).Status)
	require.JSONEq(t, `{"id": "pi_1"}`, string(decodeOp(t, rec).Result))
	require.Less(t, time.Since(start), 4*time.Second)

	go settle("post-with-wait")
	rec = e.do(req("POST", "/v1/ops?wait=5", token, "post-with-wait", paymentBody))
	require.Equal(t, http.StatusAccepted, rec.Code, "waiting does not change the status code")
	require.Equal(t, "succeeded", decodeOp(t, rec).Status)

	// A wait that runs out answers the op as it stands; the cap applies.
	capped := newEnvOnPool(t, e.pool, func(c *api.Config) { c.MaxWait = 200 * time.Millisecond })
	start = time.Now()
	rec = capped.do(req("POST", "/v1/ops?wait=1h", token, "never-settles", paymentBody))
	require.Equal(t, http.StatusAccepted, rec.Code)
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 100*time.Millisecond)
	require.Less(t, took, 2*time.Second)

	// An op awaiting approval is settled: no waiting.
	start = time.Now()
	rec = e.do(req("POST", "/v1/ops?wait=30s", token, "needs-approval", largeRefundBody))
	require.Equal(t, "awaiting_approval", decodeOp(t, rec).Status)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestGetOpChecksTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, token := e.newTenant(t, "acme")

	p := requireProblem(t, e.do(req("GET", "/v1/ops/"+strings.Repeat("k", 300), token, "", "")), http.StatusBadRequest, "invalid-idempotency-key")
	require.Equal(t, "too_long", p.Rule)
	p = requireProblem(t, e.do(req("GET", "/v1/ops/a%20b", token, "", "")), http.StatusBadRequest, "invalid-idempotency-key")
	require.Equal(t, "not_visible_ascii", p.Rule)
	requireProblem(t, e.do(req("GET", "/v1/ops/x?wait=forever", token, "", "")), http.StatusBadRequest, "invalid-wait")
	requireProblem(t, e.do(req("GET", "/v1/ops/x", "", "", "")), http.StatusUnauthorized, "unauthorized")
}

func TestHealthzAndOpenAPIAreOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	rec := e.do(req("GET", "/healthz", "", "", ""))
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"ok": true}`, rec.Body.String())

	rec = e.do(req("GET", "/openapi.json", "", "", ""))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, string(api.OpenAPI()), rec.Body.String())

	e.pool.Close()
	rec = e.do(req("GET", "/healthz", "", "", ""))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	rec = e.post("obx_whatever", "k", paymentBody)
	p := requireProblem(t, rec, http.StatusInternalServerError, "internal")
	require.NotContains(t, p.Detail, "closed")
}

func TestLogsNeverCarryTokensOrBodies(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	e := newEnv(t, func(c *api.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	_, token := e.newTenant(t, "acme")
	secretBody := `{"tool": "stripe.payment_intent", "args": {"amount": 1000, "currency": "usd", "description": "secret-description"}}`
	require.Equal(t, http.StatusAccepted, e.post(token, "logged-key", secretBody).Code)
	require.Equal(t, http.StatusUnauthorized, e.post(token+"x", "logged-key", secretBody).Code)

	logs := buf.String()
	require.Contains(t, logs, "http request")
	require.Contains(t, logs, "idempotency_key=logged-key")
	require.Contains(t, logs, "status=202")
	require.Contains(t, logs, `route="POST /v1/ops"`)
	require.NotContains(t, logs, token)
	require.NotContains(t, logs, "secret-description")
}

// TestEndWaitsAnswersLongPollsAtOnce: at shutdown, a ?wait= on an op that will not
// settle answers with the op as it stands instead of holding the server for MaxWait.
func TestEndWaitsAnswersLongPollsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, token := e.newTenant(t, "acme")
	require.Equal(t, http.StatusAccepted, e.post(token, "slow", paymentBody).Code)

	type answer struct {
		rec  *httptest.ResponseRecorder
		took time.Duration
	}
	answers := make(chan answer, 2)
	for _, r := range []*http.Request{
		req(http.MethodGet, "/v1/ops/slow?wait=30s", token, "", ""),
		req(http.MethodPost, "/v1/ops?wait=30s", token, "slow", paymentBody),
	} {
		go func() {
			start := time.Now()
			rec := e.do(r)
			answers <- answer{rec, time.Since(start)}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	e.srv.EndWaits()
	for range 2 {
		select {
		case a := <-answers:
			require.Less(t, a.took, 5*time.Second)
			require.Equal(t, "pending", decodeOp(t, a.rec).Status)
		case <-time.After(10 * time.Second):
			t.Fatal("a long poll still waits after EndWaits")
		}
	}
	// Later waits answer at once too.
	start := time.Now()
	rec := e.do(req(http.MethodGet, "/v1/ops/slow?wait=30s", token, "", ""))
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestConversationHeaderFillsConversationID: the Oncebox-Conversation-Id header names
// the conversation when the body does not; the same value in both is accepted.
func TestConversationHeaderFillsConversationID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, token := e.newTenant(t, "acme")

	r := req(http.MethodPost, "/v1/ops", token, "h1", paymentBody)
	r.Header.Set(api.HeaderConversationID, " conv-7 ")
	rec := e.do(r)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	require.Equal(t, "conv-7", decodeOp(t, rec).ConversationID)

	r = req(http.MethodPost, "/v1/ops", token, "h2", `{"tool": "stripe.payment_intent", "args": {"amount": 5, "currency": "usd"}, "conversation_id": "conv-7"}`)
	r.Header.Set(api.HeaderConversationID, "conv-7")
	rec = e.do(r)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	require.Equal(t, "conv-7", decodeOp(t, rec).ConversationID)
}
