package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/doors/opwait"
	"github.com/oncebox/oncebox/internal/pglisten"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestWaitsPerTenantAreCapped: a tenant holding MaxWaitsPerTenant open waits gets 429
// with Retry-After for one more (nothing is recorded for a POST), while another tenant
// still waits.
func TestWaitsPerTenantAreCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.MaxWaitsPerTenant = 2 })
	_, tokenA := e.newTenant(t, "a")
	_, tokenB := e.newTenant(t, "b")
	require.Equal(t, http.StatusAccepted, e.post(tokenA, "p", paymentBody).Code)
	require.Equal(t, http.StatusAccepted, e.post(tokenB, "p", paymentBody).Code)

	held := make(chan *httptest.ResponseRecorder, 3)
	for range 2 {
		go func() { held <- e.do(req(http.MethodGet, "/v1/ops/p?wait=30s", tokenA, "", "")) }()
	}
	require.Eventually(t, func() bool { return e.srv.Waiting() == 2 }, 10*time.Second, 10*time.Millisecond)

	rec := e.do(req(http.MethodGet, "/v1/ops/p?wait=30s", tokenA, "", ""))
	requireProblem(t, rec, http.StatusTooManyRequests, "too-many-waits")
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	rec = e.do(req(http.MethodPost, "/v1/ops?wait=30s", tokenA, "new-one", paymentBody))
	requireProblem(t, rec, http.StatusTooManyRequests, "too-many-waits")
	require.Equal(t, http.StatusNotFound, e.do(req(http.MethodGet, "/v1/ops/new-one", tokenA, "", "")).Code,
		"a refused POST records nothing")
	// Without wait, and for another tenant, nothing changes.
	require.Equal(t, http.StatusOK, e.do(req(http.MethodGet, "/v1/ops/p", tokenA, "", "")).Code)
	go func() { held <- e.do(req(http.MethodGet, "/v1/ops/p?wait=30s", tokenB, "", "")) }()
	require.Eventually(t, func() bool { return e.srv.Waiting() == 3 }, 10*time.Second, 10*time.Millisecond)

	e.srv.EndWaits()
	for range 3 {
		require.Equal(t, http.StatusOK, (<-held).Code)
	}
	require.Equal(t, 0, e.srv.Waiting())
}

// queryCounter counts the statements that read oncebox_op by key.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "oncebox_op") && strings.Contains(d.SQL, "idempotency_key") {
		q.n.Add(1)
	}
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestWaitIsWokenByANotification: a long poll does not poll Postgres while its op is
// not settled; the notification sent when the op settles wakes it at once.
func TestWaitIsWokenByANotification(t *testing.T) {
	t.Parallel()
	base := dbtest.Schema(t)
	cfg := base.Config().Copy()
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	hub := opwait.New()
	l := pglisten.New(base.Config().ConnConfig.Copy(), nil)
	l.Handle(opwait.Channel, hub, "long polls poll")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, hub.Connected, 10*time.Second, 10*time.Millisecond)

	e := newEnvOnPool(t, pool, func(c *api.Config) { c.Notifications = hub })
	_, token := e.newTenant(t, "acme")
	require.Equal(t, http.StatusAccepted, e.post(token, "p", paymentBody).Code)

	// A wait that runs out: one read at the start, one at the end.
	before := counter.n.Load()
	rec := e.do(req(http.MethodGet, "/v1/ops/p?wait=1500ms", token, "", ""))
	require.Equal(t, "pending", decodeOp(t, rec).Status)
	require.LessOrEqual(t, counter.n.Load()-before, int64(3), "the wait polled Postgres")

	// A wait that the op's settling ends.
	answer := make(chan *httptest.ResponseRecorder, 1)
	go func() { answer <- e.do(req(http.MethodGet, "/v1/ops/p?wait=50s", token, "", "")) }()
	require.Eventually(t, func() bool { return e.srv.Waiting() == 1 }, 10*time.Second, 10*time.Millisecond)
	_, err = pool.Exec(context.Background(), "UPDATE oncebox_op SET status = 'succeeded' WHERE idempotency_key = 'p'")
	require.NoError(t, err)
	select {
	case rec := <-answer:
		require.Equal(t, "succeeded", decodeOp(t, rec).Status)
	case <-time.After(8 * time.Second):
		t.Fatal("the settled op did not wake its wait (the safety re-read comes after 10 s)")
	}
}
