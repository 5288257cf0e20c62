package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// TestSlowOwnershipReadsDoNotHoldOtherTenantsCalls: Stripe answers its reads in 10 s;
// acme's agent sends as many refunds of payments that are not acme's as there are group
// committers (each refund's admission asks Stripe for the payment's tag), and only then
// globex's agent asks for an unrelated payment: it is recorded at once (well under 2 s),
// as no transaction, shared or not, waits on Stripe. On a build that asked Stripe inside
// the group's transaction, globex waited for acme's reads. acme's refunds are refused
// (not acme's, or Stripe could not be asked), with nothing recorded.
func TestSlowOwnershipReadsDoNotHoldOtherTenantsCalls(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fake := fakestripe.New(fakestripe.Config{})
	var slowReads atomic.Int32
	over := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/payment_intents/pi_foreign") {
			slowReads.Add(1)
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
				return
			case <-over:
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(over) })
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = server.Roles{API: true}
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_slow", srv.URL
	require.Equal(t, 4, cfg.GroupCommitters, "the test fills the default committers")
	_, base := runServer(t, ctx, cfg)
	tenants := tenant.NewStore(pool)
	_, acme, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	_, globex, err := tenants.Create(ctx, "globex")
	require.NoError(t, err)
	post := func(ctx context.Context, token, key, body string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/ops", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}

	// One refund after the other, each asking Stripe before the next is sent: with reads
	// inside the group's transaction, each held a committer of its own.
	refunds := cfg.GroupCommitters
	refused := make(chan int, refunds)
	for i := range refunds {
		key, id := "steal-"+string(rune('a'+i)), "pi_foreign"+string(rune('A'+i))
		go func() {
			status, _ := post(ctx, acme, key, `{"tool": "stripe.refund", "args": {"payment_intent": "`+id+`"}}`)
			refused <- status
		}()
		require.Eventually(t, func() bool { return slowReads.Load() == int32(i+1) }, 10*time.Second, 5*time.Millisecond,
			"every refund asks Stripe whose its payment is")
	}

	start := time.Now()
	callCtx, callCancel := context.WithTimeout(ctx, 8*time.Second)
	defer callCancel()
	status, err := post(callCtx, globex, "pay-1",
		`{"tool": "stripe.payment_intent", "args": {"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa"}}`)
	took := time.Since(start)
	require.NoError(t, err, "globex's call, after %s", took)
	require.Equal(t, http.StatusAccepted, status)
	require.Less(t, took, 2*time.Second, "globex's call waited for acme's reads at Stripe")

	for range refunds {
		status := <-refused
		require.Contains(t, []int{http.StatusNotFound, http.StatusServiceUnavailable}, status)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_op WHERE idempotency_key LIKE 'steal-%'`).Scan(&n))
	require.Zero(t, n, "no refused refund left an op")
}
