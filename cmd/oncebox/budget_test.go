package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// freeAddr returns a loopback address no one listens on (for a child's --addr).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestBudgetAcrossTwoServeProcesses: 100 concurrent ops, sent to two real `oncebox serve`
// processes against a budget of 10, admit exactly 10 (202); the other 90 are refused
// with 429 budget-exceeded and Retry-After, and nothing of them is recorded.
func TestBudgetAcrossTwoServeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	addrs := []string{freeAddr(t), freeAddr(t)}
	for _, addr := range addrs {
		startChild(t, "serve", "DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_ROLES=api", "ONCEBOX_ADDR="+addr,
			`ONCEBOX_BUDGETS=[{"name": "ten", "window": "24h", "count": 10, "on_exceed": "refuse"}]`,
			`ONCEBOX_WEBHOOK_TARGETS={"crm": {"base_url": "http://127.0.0.1:1"}}`, "STRIPE_API_KEY=", "SENDGRID_API_KEY=")
	}
	for _, addr := range addrs {
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 60*time.Second, 100*time.Millisecond, "serve on %s", addr)
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		retry    = map[string]bool{}
	)
	start := make(chan struct{})
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addrs[i%2]+"/v1/ops",
				strings.NewReader(`{"tool": "webhook.post", "args": {"target": "crm", "path": "/hook", "body": {"n": 1}}}`))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("op-%d", i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				mu.Lock()
				statuses[-1]++
				mu.Unlock()
				return
			}
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests {
				retry[resp.Header.Get("Retry-After")] = true
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusAccepted: 10, http.StatusTooManyRequests: 90}, statuses)
	require.NotContains(t, retry, "", "every 429 says when to retry")
	var ops int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&ops))
	require.Equal(t, 10, ops)
}
