package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestServeDrainsOnSIGTERM sends SIGTERM to a real `oncebox serve` while its worker waits
// on the vendor: the dispatch finishes within the grace period, its result is recorded,
// and the process exits cleanly.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	// The receiver acts at once but holds its answer until released.
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	release := make(chan struct{})
	fake.SetBlock(release)
	acted := make(chan struct{}, 1)
	fake.EffectHook(func(fakewebhook.Effect) { acted <- struct{}{} })

	// Enqueue from this process, without working: the child works the job.
	noWork := false
	ob := newCRMOutbox(t, pool, srv.URL, outbox.Config{Work: &noWork})
	_, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "drain-1", Tool: protocol.ToolWebhookPost,
		Args: json.RawMessage(`{"target":"crm","path":"/charge","body":{"amount":700}}`)})
	require.NoError(t, err)

	cmd, _ := startChild(t, "serve", "DATABASE_URL="+dbtest.ConnString(t, pool),
		"ONCEBOX_ROLES=worker", "ONCEBOX_SHUTDOWN_GRACE=20s", "ONCEBOX_WEBHOOK_TIMEOUT=15s",
		"STRIPE_API_KEY=", "SENDGRID_API_KEY=",
		fmt.Sprintf(`ONCEBOX_WEBHOOK_TARGETS={"crm":{"base_url":%q}}`, srv.URL))
	select {
	case <-acted:
	case <-time.After(30 * time.Second):
		t.Fatal("the child never called the receiver")
	}

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		t.Fatalf("serve exited (%v) while its dispatch still waited on the vendor", err)
	case <-time.After(1500 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-exited:
		require.NoError(t, err, "serve exits cleanly after draining")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit within 30s of SIGTERM")
	}

	op, err := ob.Get(ctx, tn.ID, "drain-1")
	require.NoError(t, err)
	require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
	require.Equal(t, 1, op.Attempts)
	require.Equal(t, 1, fake.EffectCount())
}
