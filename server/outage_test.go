package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// TestPostgresOutageUnderLoad stops a private Postgres cluster (never the machine's
// shared one) while callers keep sending ops, as the chaos harness does: during the
// outage every request is answered 503 store-unavailable with Retry-After (never
// 500), /healthz is 503 and oncebox_store_up is 0; after the restart every op the
// callers retried with the same key is settled, with one side effect each.
func TestPostgresOutageUnderLoad(t *testing.T) {
	ctx := context.Background()
	pg := startOwnCluster(t, "oncebox_outage", false)

	admin, err := pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	_, err = migrations.Migrate(ctx, admin, nil)
	require.NoError(t, err)
	_, token, err := tenant.NewStore(admin).Create(ctx, "acme")
	require.NoError(t, err)
	admin.Close()

	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	hook := httptest.NewServer(fake)
	t.Cleanup(hook.Close)
	runCtx, stop := context.WithCancel(ctx)
	cfg := server.Defaults()
	cfg.DatabaseURL = pg.URL()
	cfg.Addr = "127.0.0.1:0"
	cfg.WebhookTargets = map[string]webhook.Target{"crm": {BaseURL: hook.URL}}
	cfg.WebhookNativeKeys = true
	cfg.ReconcileInterval = 2 * time.Second
	cfg.FetchPollInterval = 100 * time.Millisecond
	srv, err := server.New(runCtx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	base := "http://" + addr.String()
	client := &http.Client{Timeout: 30 * time.Second}

	var (
		mu     sync.Mutex
		codes  = map[int]int{}
		no503s []string // 503 answers without Retry-After
	)
	post := func(key string) int {
		body := fmt.Sprintf(`{"tool":"webhook.post","args":{"target":"crm","path":"/hook","body":{"key":%q}}}`, key)
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/ops", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(b), "store-unavailable")) {
			no503s = append(no503s, string(b))
		}
		return resp.StatusCode
	}
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Callers: each sends its keys one after the other, retrying a key with the same
	// key until it is recorded (202 or 200), as a client does after a 503.
	loadCtx, endLoad := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		keysMu  sync.Mutex
		allKeys []string
	)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				key := fmt.Sprintf("c%d-%d", c, i)
				keysMu.Lock()
				allKeys = append(allKeys, key)
				keysMu.Unlock()
				for {
					code := post(key)
					if code == http.StatusAccepted || code == http.StatusOK {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}

	time.Sleep(2 * time.Second)
	pg.stop(false)
	var health int
	var metricsBody string
	require.Eventually(t, func() bool {
		health, _ = get("/healthz")
		_, metricsBody = get("/metrics")
		return health == http.StatusServiceUnavailable && strings.Contains(metricsBody, "oncebox_store_up 0")
	}, 20*time.Second, 200*time.Millisecond, "healthz %d, metrics show no outage", health)
	time.Sleep(3 * time.Second) // the callers keep trying during the outage

	pg.start()
	restarted := time.Now()
	require.Eventually(t, func() bool {
		health, _ = get("/healthz")
		return health == http.StatusOK
	}, 60*time.Second, 200*time.Millisecond)
	time.Sleep(time.Second)
	endLoad()
	wg.Wait()

	mu.Lock()
	require.Zero(t, codes[http.StatusInternalServerError], "answers: %v", codes)
	require.Positive(t, codes[http.StatusServiceUnavailable], "answers: %v", codes)
	require.Empty(t, no503s, "503 without Retry-After or store-unavailable")
	t.Logf("answers: %v; API healthy %s after the restart", codes, time.Since(restarted).Round(100*time.Millisecond))
	mu.Unlock()

	// Every op settles, each with exactly one delivery.
	check, err := pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	defer check.Close()
	require.Eventually(t, func() bool {
		var open int
		err := check.QueryRow(ctx, "SELECT count(*) FROM oncebox_op WHERE status <> 'succeeded'").Scan(&open)
		return err == nil && open == 0
	}, 3*time.Minute, 250*time.Millisecond, "ops still not settled")
	var n int
	require.NoError(t, check.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&n))
	require.Equal(t, len(allKeys), n, "every key the callers sent is one op")
	require.Equal(t, n, len(fake.Effects()), "one delivery per op")
	t.Logf("%d ops, all succeeded, settled %s after the restart", n, time.Since(restarted).Round(100*time.Millisecond))
}
