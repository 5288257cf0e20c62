package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

func TestPeriodicSweepRunsThroughRiver(t *testing.T) {
	t.Parallel()
	_, srv, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{"hooks"}})...)
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{v}, Reconcile: reconcile.Config{Periodic: true, Interval: time.Second}})
	require.NoError(t, err)

	e := &sweepEnv{Env: &optest.Env{Pool: pool, Ob: ob}}
	require.NoError(t, pool.QueryRow(context.Background(),
		"INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&e.Tenant))
	op := e.SeedUnknown(t, "k", protocol.ToolWebhookPost, optest.HookArgs(1), time.Minute, false)
	postEffect(t, srv.URL, op.ID)

	e.Start(t)
	e.WaitStatus(t, op.ID, protocol.StatusSucceeded)
	require.Positive(t, e.Count(t, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.reconcile_sweep' AND queue = $1", reconcile.MaintenanceQueue))
}
