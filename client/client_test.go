package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/client"
	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

type env struct {
	pool    *pgxpool.Pool
	api     http.Handler
	tenants *tenant.Store
	// token is the tenant's agent token, approver an approver token of it.
	token, approver string
	// requests counts the requests that reached the front server.
	requests atomic.Int64
	// keys are the Idempotency-Key headers seen, in order.
	mu   sync.Mutex
	keys []string
	// front, when set, handles the n-th request (from 1) instead of the API; it
	// returns false to pass the request on.
	front func(n int64, w http.ResponseWriter, r *http.Request) bool
	url   string
}

func newEnv(t *testing.T, front func(n int64, w http.ResponseWriter, r *http.Request) bool) *env {
	t.Helper()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"crm"}, RefundApprovalAbove: 1000})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	tenants := tenant.NewStore(pool)
	_, token, err := tenants.Create(context.Background(), "t")
	require.NoError(t, err)
	// The payments the tests refund were made outside oncebox: the tenant adopts them.
	_, err = tenants.Adopt(context.Background(), "t", "stripe", []string{"pi_1"}, "test")
	require.NoError(t, err)
	approver, err := tenants.NewTokenWithRole(context.Background(), "t", tenant.RoleApprover)
	require.NoError(t, err)
	handler, err := api.New(api.Config{Outbox: ob, Tenants: tenants})
	require.NoError(t, err)
	e := &env{pool: pool, api: handler, tenants: tenants, token: token, approver: approver, front: front}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := e.requests.Add(1)
		e.mu.Lock()
		e.keys = append(e.keys, r.Header.Get("Idempotency-Key"))
		e.mu.Unlock()
		if e.front != nil && e.front(n, w, r) {
			return
		}
		e.api.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	e.url = ts.URL
	return e
}

func (e *env) client(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: e.url, Token: token, Backoff: 5 * time.Millisecond})
	require.NoError(t, err)
	return c
}

func (e *env) countOps(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM oncebox_op").Scan(&n))
	return n
}

func (e *env) seenKeys() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.keys...)
}

// dropConnection hijacks the request's connection and closes it without an answer.
func dropConnection(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	_ = conn.Close()
}

var pi = protocol.PaymentIntentArgs{Amount: 500, Currency: "usd", Description: "order 42"}

func TestEnqueueNewThenReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(t, e.token)
	ctx := context.Background()

	first, err := c.CreatePaymentIntent(ctx, "  order/42-pay ", pi, &client.Opts{ConversationID: "conv", ToolCallID: "call_1"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, first.StatusCode)
	require.False(t, first.Replayed)
	require.Equal(t, "order/42-pay", first.Op.Key)
	require.Equal(t, protocol.ToolPaymentIntent, first.Op.Tool)
	require.Equal(t, "pending", first.Op.Status)
	require.Equal(t, "conv", first.Op.ConversationID)
	require.Equal(t, "call_1", first.Op.ToolCallID)
	require.Len(t, first.Op.Fingerprint, 64)
	require.Nil(t, first.Op.Result)
	require.False(t, first.Op.CreatedAt.IsZero())

	again, err := c.CreatePaymentIntent(ctx, "order/42-pay", pi, &client.Opts{ConversationID: "conv", ToolCallID: "call_1"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, again.StatusCode)
	require.True(t, again.Replayed)
	require.Equal(t, first.Op.ID, again.Op.ID)

	got, err := c.Get(ctx, "order/42-pay", 0)
	require.NoError(t, err)
	require.Equal(t, first.Op.ID, got.ID)
	require.Equal(t, 1, e.countOps(t))
}

func TestGetReturnsStoredResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(t, e.token)
	ctx := context.Background()
	res, err := c.PostWebhook(ctx, "hook-1", protocol.WebhookArgs{Target: "crm", Path: "/contacts"}, nil)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 'wh_1', result = '{"status": 201}' WHERE id = $1`, res.Op.ID)
	require.NoError(t, err)

	op, err := c.Get(ctx, "hook-1", time.Second)
	require.NoError(t, err)
	require.Equal(t, "succeeded", op.Status)
	require.Equal(t, "wh_1", op.VendorRef)
	require.JSONEq(t, `{"status": 201}`, string(op.Result))
}

func TestConflictIsProblem422NotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(t, e.token)
	ctx := context.Background()
	_, err := c.CreatePaymentIntent(ctx, "k1", pi, nil)
	require.NoError(t, err)
	before := e.requests.Load()

	other := pi
	other.Amount = 501
	_, err = c.CreatePaymentIntent(ctx, "k1", other, nil)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	require.Equal(t, "https://oncebox.dev/problems/key-conflict", p.Type)
	require.Len(t, p.StoredFingerprint, 64, "the problem's extension members are decoded")
	require.Len(t, p.GivenFingerprint, 64)
	require.NotEqual(t, p.StoredFingerprint, p.GivenFingerprint)
	require.ErrorIs(t, err, client.ErrConflict)
	require.NotErrorIs(t, err, client.ErrInvalid)
	require.Equal(t, before+1, e.requests.Load(), "a 4xx is not retried")
	require.Equal(t, 1, e.countOps(t))
}

func TestInvalidArgsNameTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(t, e.token)
	_, err := c.CreateRefund(context.Background(), "r1", protocol.RefundArgs{PaymentIntent: "pi_1", Reason: "because"}, nil)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusBadRequest, p.Status)
	require.Equal(t, "args.reason", p.Field)
	require.ErrorIs(t, err, client.ErrInvalid)
	require.EqualValues(t, 1, e.requests.Load())
	require.Equal(t, 0, e.countOps(t))
}

func TestInvalidKeyRefusedLocally(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(t, e.token)
	for key, rule := range map[string]string{"": "missing", "two words": "not_visible_ascii", strings.Repeat("a", 300): "too_long"} {
		_, err := c.CreatePaymentIntent(context.Background(), key, pi, nil)
		var p *client.Problem
		require.ErrorAs(t, err, &p)
		require.Equal(t, rule, p.Rule)
		require.ErrorIs(t, err, client.ErrInvalid)
		require.ErrorIs(t, err, protocol.ErrInvalidKey)
	}
	require.EqualValues(t, 0, e.requests.Load(), "nothing was sent")
}

func TestUnauthorizedAndNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.client(t, "obx_wrong").CreatePaymentIntent(ctx, "k", pi, nil)
	require.ErrorIs(t, err, client.ErrUnauthorized)
	require.EqualValues(t, 1, e.requests.Load())

	_, err = e.client(t, e.token).CreatePaymentIntent(ctx, "mine", pi, nil)
	require.NoError(t, err)
	_, otherToken, err := e.tenants.Create(ctx, "other")
	require.NoError(t, err)
	_, err = e.client(t, otherToken).Get(ctx, "mine", 0)
	require.ErrorIs(t, err, client.ErrNotFound)
}

func TestApproveAndReject(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(t, e.token)
	person := e.client(t, e.approver)
	ctx := context.Background()
	big := protocol.RefundArgs{PaymentIntent: "pi_1", Amount: 5000}

	res, err := c.CreateRefund(ctx, "refund-a", big, nil)
	require.NoError(t, err)
	require.Equal(t, "awaiting_approval", res.Op.Status)
	_, err = c.Approve(ctx, "refund-a", "the agent's own token")
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusForbidden, p.Status)
	op, err := person.Approve(ctx, "refund-a", "checked with the customer")
	require.NoError(t, err)
	require.Equal(t, "pending", op.Status)

	op, err = person.Approve(ctx, "refund-a", "again")
	require.NoError(t, err, "the same decision again is no error")
	require.Equal(t, "pending", op.Status)
	_, err = person.Reject(ctx, "refund-a", "changed my mind")
	require.ErrorIs(t, err, client.ErrConflict, "the opposite decision is")

	_, err = c.CreateRefund(ctx, "refund-b", big, nil)
	require.NoError(t, err)
	op, err = person.Reject(ctx, "refund-b", "no")
	require.NoError(t, err)
	require.Equal(t, "rejected", op.Status)
}

func TestAgentSessionKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(t, e.token)
	s := c.Session("thread-1")

	require.Equal(t, s.Key("call_1"), c.Session("thread-1").Key("call_1"), "deterministic")
	require.NotEqual(t, s.Key("call_1"), s.Key("call_2"))
	require.NotEqual(t, s.Key("call_1"), c.Session("thread-2").Key("call_1"))
	require.Equal(t, s.KeyForIndex(3), c.Session("thread-1").KeyForIndex(3))
	require.NotEqual(t, s.KeyForIndex(3), s.Key(strconv.Itoa(3)))
	require.Regexp(t, `^as_[0-9a-f]{40}$`, s.Key("call_1"))

	ctx := context.Background()
	first, err := s.Call(ctx, "call_1", protocol.ToolMail, protocol.MailArgs{
		From: protocol.Address{Email: "shop@example.com"}, To: []protocol.Address{{Email: "ada@example.com"}},
		Subject: "Your order", Text: "Shipped.",
	}, nil)
	require.NoError(t, err)
	require.False(t, first.Replayed)
	require.Equal(t, s.Key("call_1"), first.Op.Key)
	require.Equal(t, "thread-1", first.Op.ConversationID)
	require.Equal(t, "call_1", first.Op.ToolCallID)

	// A framework re-running the same tool call in a new process reuses the key.
	again, err := e.client(t, e.token).Session("thread-1").Call(ctx, "call_1", protocol.ToolMail, protocol.MailArgs{
		From: protocol.Address{Email: "shop@example.com"}, To: []protocol.Address{{Email: "ada@example.com"}},
		Subject: "Your order", Text: "Shipped.",
	}, nil)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Op.ID, again.Op.ID)
	require.Equal(t, 1, e.countOps(t))

	// Without tool call ids: the i-th side effect of the session.
	mail := protocol.MailArgs{From: protocol.Address{Email: "shop@example.com"}, To: []protocol.Address{{Email: "bob@example.com"}},
		Subject: "Invoice", Text: "Attached."}
	byIndex, err := s.CallIndex(ctx, 2, protocol.ToolMail, mail, nil)
	require.NoError(t, err)
	require.False(t, byIndex.Replayed)
	require.Equal(t, s.KeyForIndex(2), byIndex.Op.Key)
	require.Equal(t, "thread-1", byIndex.Op.ConversationID)
	rerun, err := e.client(t, e.token).Session("thread-1").CallIndex(ctx, 2, protocol.ToolMail, mail, nil)
	require.NoError(t, err)
	require.True(t, rerun.Replayed)
	require.Equal(t, 2, e.countOps(t))
}

func TestRetriesDroppedConnectionWithSameKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// forwardFirst makes the dropped request reach the API before its answer is lost.
		forwardFirst bool
		wantReplayed bool
	}{
		{name: "dropped before the API", forwardFirst: false, wantReplayed: false},
		{name: "answer lost after the API", forwardFirst: true, wantReplayed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var e *env
			e = newEnv(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
				if n != 1 {
					return false
				}
				if tc.forwardFirst {
					e.api.ServeHTTP(httptest.NewRecorder(), r)
				}
				dropConnection(t, w)
				return true
			})
			c := e.client(t, e.token)
			res, err := c.CreatePaymentIntent(context.Background(), "pay-retry", pi, nil)
			require.NoError(t, err)
			require.Equal(t, tc.wantReplayed, res.Replayed)
			require.Equal(t, "pay-retry", res.Op.Key)
			require.Equal(t, []string{"pay-retry", "pay-retry"}, e.seenKeys())
			require.Equal(t, 1, e.countOps(t))
		})
	}
}

func TestRetries5xxHonouringRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		case 2:
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}
		return false
	})
	c := e.client(t, e.token)
	res, err := c.CreatePaymentIntent(context.Background(), "pay-5xx", pi, nil)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, []string{"pay-5xx", "pay-5xx", "pay-5xx"}, e.seenKeys())
	require.Equal(t, 1, e.countOps(t))
}

func TestRetriesGiveUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"type":"https://oncebox.dev/problems/internal","title":"Bad gateway","status":502,"detail":"down"}`))
		return true
	})
	c, err := client.New(client.Config{BaseURL: e.url, Token: e.token, MaxRetries: 2, Backoff: time.Millisecond})
	require.NoError(t, err)
	_, err = c.CreatePaymentIntent(context.Background(), "pay-down", pi, nil)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusBadGateway, p.Status)
	require.Equal(t, "down", p.Detail)
	require.EqualValues(t, 3, e.requests.Load(), "one try and two retries")
	require.Equal(t, 0, e.countOps(t))
}

func TestRetriedApproveWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	var e *env
	var dropped atomic.Bool
	e = newEnv(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1/ops/refund-lost/approve" || dropped.Swap(true) {
			return false
		}
		e.api.ServeHTTP(httptest.NewRecorder(), r)
		dropConnection(t, w)
		return true
	})
	c := e.client(t, e.token)
	ctx := context.Background()
	_, err := c.CreateRefund(ctx, "refund-lost", protocol.RefundArgs{PaymentIntent: "pi_1", Amount: 5000}, nil)
	require.NoError(t, err)
	op, err := e.client(t, e.approver).Approve(ctx, "refund-lost", "ok")
	require.NoError(t, err, "the retry finds the op approved by the lost first try")
	require.Equal(t, "pending", op.Status)
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	_, err := client.New(client.Config{BaseURL: "localhost:8080", Token: "obx_x"})
	require.Error(t, err)
	_, err = client.New(client.Config{BaseURL: "http://localhost:8080"})
	require.Error(t, err)
	_, err = client.New(client.Config{BaseURL: "http://localhost:8080", Token: "obx_x"})
	require.NoError(t, err)
}

// TestWaitExtendsTheAttemptDeadline: an attempt may take its wait plus Timeout, so a
// server holding the answer for the whole wait is not cut short, while an attempt
// without a wait that hangs past Timeout is abandoned and retried with the same key.
func TestWaitExtendsTheAttemptDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && r.URL.Query().Get("wait") == "" && n == 3 {
			// The first attempt of the Get without a wait hangs.
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return true
		}
		return false
	})
	c, err := client.New(client.Config{BaseURL: e.url, Token: e.token, Timeout: 150 * time.Millisecond, Backoff: time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()

	// No worker runs: the server holds each answer for (nearly) the whole wait, far
	// longer than Timeout.
	start := time.Now()
	res, err := c.CreatePaymentIntent(ctx, "long-wait", pi, &client.Opts{Wait: time.Second})
	require.NoError(t, err)
	require.Greater(t, time.Since(start), 500*time.Millisecond, "the server held the answer past Timeout")
	require.Equal(t, http.StatusAccepted, res.StatusCode)
	start = time.Now()
	op, err := c.Get(ctx, "long-wait", time.Second)
	require.NoError(t, err)
	require.Greater(t, time.Since(start), 500*time.Millisecond, "the server held the answer past Timeout")
	require.Equal(t, "pending", op.Status)
	require.EqualValues(t, 2, e.requests.Load(), "neither waiting call was retried")

	start = time.Now()
	op, err = c.Get(ctx, "long-wait", 0)
	require.NoError(t, err)
	require.Equal(t, "long-wait", op.Key)
	require.Less(t, time.Since(start), 3*time.Second, "the hanging attempt was abandoned after Timeout")
	require.EqualValues(t, 4, e.requests.Load(), "the hanging attempt was retried once")

	// Without retries, the abandoned attempt is the caller's error. (Rewinding the
	// count makes the next request hang again.)
	e.requests.Store(2)
	c, err = client.New(client.Config{BaseURL: e.url, Token: e.token, Timeout: 150 * time.Millisecond, MaxRetries: -1})
	require.NoError(t, err)
	_, err = c.Get(ctx, "long-wait", 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestNoRouteIsNotErrNotFound: a base URL the API serves nothing under answers 404
// no-route, which must not read as "no op under this key".
func TestNoRouteIsNotErrNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c, err := client.New(client.Config{BaseURL: e.url + "/oncebox", Token: e.token})
	require.NoError(t, err)
	_, err = c.Get(context.Background(), "k", 0)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusNotFound, p.Status)
	require.Equal(t, "https://oncebox.dev/problems/no-route", p.Type)
	require.NotErrorIs(t, err, client.ErrNotFound)

	_, err = e.client(t, e.token).Get(context.Background(), "k", 0)
	require.ErrorIs(t, err, client.ErrNotFound)
}
