package dispatch_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestMixedVersionsCommitTheClaim: while Config.MixedVersions reports a process of an
// older release live, a run commits its claim before the vendor call (the op reads
// dispatching while the target is called), the path every release understands; once it
// reports none, runs are clean again (the op reads pending during the call).
func TestMixedVersionsCommitTheClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	var (
		mu     sync.Mutex
		during = map[string]string{} // op id -> its status while the target was called
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if op := r.Header.Get("Oncebox-Op"); op != "" {
			var status string
			if err := pool.QueryRow(r.Context(), "SELECT status FROM oncebox_op WHERE id = $1", op).Scan(&status); err == nil {
				mu.Lock()
				during[op] = status
				mu.Unlock()
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tenant := optest.Tenant(t, pool, "acme")
	var mixed atomic.Bool
	mixed.Store(true)
	ob := optest.NewWorkerOutbox(t, pool, srv.URL, optest.WorkerOpts{Native: true, Batched: true, Mixed: mixed.Load})
	optest.Start(t, ob)

	statusDuring := func(key string, n int) string {
		res, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: key, Tool: "webhook.post", Args: optest.WebhookArgs(n)})
		require.NoError(t, err)
		optest.WaitKeyStatus(t, ob, tenant, key, protocol.StatusSucceeded, 10*time.Second)
		mu.Lock()
		defer mu.Unlock()
		return during[res.Op.ID]
	}
	require.Equal(t, "dispatching", statusDuring("old-live", 1), "an older release is live: the claim is committed before the call")
	mixed.Store(false)
	require.Equal(t, "pending", statusDuring("all-new", 2), "every live process is of this release: a clean run, no claim commit")
	require.Equal(t, 2, fake.EffectCount())
}
