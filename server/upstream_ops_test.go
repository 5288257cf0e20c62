package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/fakemcp"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

// TestUpstreamRateLimitSnoozesWithoutAttempts: an upstream limited to 2 calls a second
// (burst 1) gets 4 ops at once; they are sent no faster than the limit, each in one
// attempt (an op held by the limit is snoozed before it is claimed: no attempt, no
// failure, nothing sent), all succeed, and the waits are counted in the metrics.
func TestUpstreamRateLimitSnoozesWithoutAttempts(t *testing.T) {
	t.Parallel()
	fake := fakemcp.New()
	base, _, srv, pool := upstreamOncebox(t, fake, func(url string) string {
		return `
upstreams:
  mail:
    url: ` + url + `
    workers: 4
    rate: {per_second: 2, burst: 1}
    tools:
      send_mail: {tag_argument: ref, lookup_tool: find_mail, lookup_argument: ref}
`
	}, nil)
	ctx := context.Background()
	tn, err := tenant.NewStore(pool).ByName(ctx, "acme")
	require.NoError(t, err)
	start := time.Now()
	for i := range 4 {
		_, err := srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: fmt.Sprintf("rl-%d", i), Tool: "mail.send_mail",
			Args: json.RawMessage(fmt.Sprintf(`{"to":"r%d@example.com","subject":"Hi"}`, i))})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op WHERE status = 'succeeded'").Scan(&n)
		return err == nil && n == 4
	}, 60*time.Second, 100*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 1400*time.Millisecond, "4 calls at 2 a second, burst 1: at least 1.5 s")
	require.Len(t, fake.Mails(), 4)
	require.Equal(t, 4, fake.Calls())
	var maxAttempts int
	require.NoError(t, pool.QueryRow(ctx, "SELECT max(attempts) FROM oncebox_op").Scan(&maxAttempts))
	require.Equal(t, 1, maxAttempts, "waiting for the rate limit is not an attempt")
	metrics := getBody(t, base+"/metrics")
	require.Regexp(t, `oncebox_upstream_rate_limited_total\{upstream="mail"\} [1-9]`, metrics)
	require.Contains(t, metrics, `oncebox_upstream_calls_total{kind="dispatch",outcome="result",upstream="mail"} 4`)
	require.Contains(t, metrics, `oncebox_upstream_connected{upstream="mail"} 1`)
}

// TestUpstreamStdioProgramRestarted: a stdio upstream's program crashes after acting.
// Without waiting for another call, oncebox starts it again (with backoff), counts the
// restart in /healthz and the metrics, and logs the program's stderr under the
// upstream's name; the op, with no lookup tool, is held for review, sent once.
func TestUpstreamStdioProgramRestarted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakemcp")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/oncebox/oncebox/vendors/fakemcp/cmd/fakemcp").CombinedOutput()
	require.NoError(t, err, "%s", out)
	state := filepath.Join(dir, "state.json")
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ReconcileInterval = time.Second
	cfg.WebhookTimeout = 3 * time.Second
	cfg.ToolsFile = writeCatalog(t, `
upstreams:
  box:
    command: `+bin+`
    args: [-state, `+state+`]
    tools:
      send_mail: {tag_argument: ref}
`)
	logs := &syncBuffer{}
	srv, err := server.New(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	base := "http://" + addr.String()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	health := func() map[string]any {
		var h struct {
			OK        bool                      `json:"ok"`
			Upstreams map[string]map[string]any `json:"upstreams"`
		}
		require.NoError(t, json.Unmarshal([]byte(getBody(t, base+"/healthz")), &h))
		require.True(t, h.OK)
		return h.Upstreams["box"]
	}
	h := health()
	require.Equal(t, "stdio", h["transport"])
	require.Equal(t, true, h["connected"])
	require.EqualValues(t, 0, h["restarts"])

	require.NoError(t, fakemcp.WriteCrashNext(state, 1))
	_, err = srv.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "crash-restart", Tool: "box.send_mail",
		Args: json.RawMessage(`{"to":"cy@example.com","subject":"Hi"}`)})
	require.NoError(t, err)
	waitStatus(t, pool, "box.send_mail", "needs_review")
	require.Eventually(t, func() bool {
		h = health()
		return h["connected"] == true && h["restarts"] == float64(1)
	}, 30*time.Second, 100*time.Millisecond, "health: %v", h)
	require.Contains(t, h["last_error"], "session ended")

	st, err := fakemcp.ReadState(state)
	require.NoError(t, err)
	require.Len(t, st.Mails, 1, "sent once")
	metrics := getBody(t, base+"/metrics")
	require.Contains(t, metrics, `oncebox_upstream_restarts_total{upstream="box"} 1`)
	require.Contains(t, metrics, `oncebox_upstream_connected{upstream="box"} 1`)
	require.Contains(t, metrics, `oncebox_upstream_calls_total{kind="dispatch",outcome="lost",upstream="box"} 1`)

	var stderr []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"upstream stderr"`) && strings.Contains(line, `"upstream":"box"`) {
			stderr = append(stderr, line)
		}
	}
	joined := strings.Join(stderr, "\n")
	require.Contains(t, joined, "fakemcp: crashing after acting", "the program's stderr, logged with the upstream's name")
	require.Equal(t, 2, strings.Count(joined, "fakemcp: serving over stdio"), "started, then started again")
}
