package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestNotificationSurvivesSIGKILL: a real `oncebox serve` is sending the notification of
// an op that started waiting when it is killed with SIGKILL; the notification is not
// lost: a second serve process delivers it again, and the receiver, deduplicating by the
// op id, gets one notification.
func TestNotificationSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	// The receiver holds its first request unanswered (the sender dies meanwhile) and
	// answers the later ones; it deduplicates by the op id.
	var (
		mu       sync.Mutex
		requests int
		ops      = map[string]int{}
	)
	arrived := make(chan struct{}, 10)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var n struct {
			OpID string `json:"op_id"`
		}
		_ = json.Unmarshal(body, &n)
		mu.Lock()
		requests++
		first := requests == 1
		ops[n.OpID]++
		mu.Unlock()
		arrived <- struct{}{}
		if first {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	// Enqueue from this process without working: the op waits, its notification job is
	// inserted with it.
	noWork := false
	ob := newGatedCRMOutbox(t, pool, "http://127.0.0.1:1", outbox.Config{Work: &noWork,
		Notify: &notify.Config{URL: receiver.URL, Secret: []byte("s")}},
		governance.ApprovalPolicy{protocol.ToolWebhookPost: {Mode: governance.ApprovalAlways}})
	res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "wait-1", Tool: protocol.ToolWebhookPost,
		Args: json.RawMessage(`{"target":"crm","path":"/charge","body":{"amount":700}}`)})
	require.NoError(t, err)
	require.Equal(t, protocol.StatusAwaitingApproval, res.Op.Status)

	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "ONCEBOX_ROLES=worker,periodic",
		"ONCEBOX_NOTIFY_URL=" + receiver.URL, "ONCEBOX_NOTIFY_SECRET=s", "ONCEBOX_NOTIFY_TIMEOUT=1s",
		"ONCEBOX_RESCUE_AFTER=3s", "ONCEBOX_FETCH_POLL_INTERVAL=100ms",
		"ONCEBOX_STRIPE_JOB_TIMEOUT=1s", "ONCEBOX_SENDGRID_JOB_TIMEOUT=1s", "ONCEBOX_WEBHOOK_JOB_TIMEOUT=1s", "ONCEBOX_RECONCILE_SWEEP_TIMEOUT=1s",
		"ONCEBOX_STRIPE_TIMEOUT=500ms", "ONCEBOX_SENDGRID_TIMEOUT=500ms", "ONCEBOX_WEBHOOK_TIMEOUT=500ms",
		"STRIPE_API_KEY=", "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS="}
	first, _ := startChild(t, "serve", env...)
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the first serve process never sent the notification")
	}
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	_, err = pool.Exec(ctx, "DELETE FROM river_leader") // the dead process's leadership

	second, _ := startChild(t, "serve", env...)
	t.Cleanup(func() { _ = second.Process.Kill() })
	require.Eventually(t, func() bool {
		var state string
		err := pool.QueryRow(ctx, "SELECT state::text FROM river_job WHERE kind = 'oncebox.notify_approval'").Scan(&state)
		return err == nil && state == "completed"
	}, 120*time.Second, 200*time.Millisecond, "the second process delivers the notification the first one died sending")

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, requests, 2, "at least once: the killed attempt, then the redelivery")
	require.Equal(t, map[string]int{res.Op.ID: requests}, ops, "every request carried the same op id")
	require.Len(t, ops, 1, "deduplicated by op id: one notification")
}
