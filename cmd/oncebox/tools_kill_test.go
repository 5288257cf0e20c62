package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/dbtest"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendors/fakewebhook"
)

// TestCatalogToolAcrossSIGKILL: a real `oncebox serve` worker is killed (SIGKILL) after
// the catalog tool's target acted but before the answer was recorded; the next serve
// settles the op through the target's lookup path, and the target holds one object.
func TestCatalogToolAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	conn := dbtest.ConnString(t, pool)
	fake := fakewebhook.New(fakewebhook.Config{}) // ignores keys: once-only is oncebox's doing
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	release := make(chan struct{})
	fake.SetBlock(release)
	effected := make(chan struct{}, 10)
	fake.EffectHook(func(fakewebhook.Effect) { effected <- struct{}{} })

	path := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
targets:
  crm: {base_url: `+target.URL+`, lookup_path: /_lookup}
tools:
  crm.create_lead:
    description: Create a lead.
    class: write
    target: crm
    path: /leads
    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}
`), 0o600))

	// The test process records the op (API role only: it dispatches nothing).
	cfg := server.Defaults()
	cfg.DatabaseURL, cfg.Roles, cfg.ToolsFile = conn, server.Roles{API: true}, path
	api, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(api.Close)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	workerArgs := "serve --database-url " + conn + " --tools-file " + path +
		" --webhook-timeout 2s --webhook-job-timeout 3s --stripe-timeout 2s --stripe-job-timeout 3s --sendgrid-timeout 2s --sendgrid-job-timeout 3s --rescue-after 5s --reconcile-sweep-timeout 4s --reconcile-interval 1s --reconcile-stuck-margin 1s --webhook-lookup-lag 3s --retry-max-backoff 1s"
	first, _ := startChild(t, workerArgs+" --roles worker")

	res, err := api.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "lead-1", Tool: "crm.create_lead",
		Args: json.RawMessage(`{"name":"Ada"}`)})
	require.NoError(t, err)
	select {
	case <-effected:
	case <-time.After(20 * time.Second):
		t.Fatal("the serve child never reached the target")
	}
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	fake.SetBlock(nil)
	close(release)
	require.Equal(t, 1, fake.EffectCount())

	_, _ = pool.Exec(ctx, "DELETE FROM river_leader") // the dead process's leadership
	startChild(t, workerArgs+" --roles worker,periodic")

	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = api.Outbox().Get(ctx, tn.ID, "lead-1")
		return err == nil && op.Status == outbox.StatusSucceeded
	}, 120*time.Second, 200*time.Millisecond, "op: %+v", op)
	require.Equal(t, 1, fake.EffectCount(), "one object at the target")
	require.Len(t, fake.EffectsFor(res.Op.ID), 1)
	require.Equal(t, fake.EffectsFor(res.Op.ID)[0].ID, op.VendorRef, "settled from the target's own record")
}
