package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestKeyInWindowIsSharedByConcurrentCallers: callers that race for the same call get
// the key of the first one; another tenant or call gets a window of its own; a closed
// window opens anew under the fresh key, and the purge deletes closed windows.
func TestKeyInWindowIsSharedByConcurrentCallers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	acme, other := optest.Tenant(t, e.pool, "acme"), optest.Tenant(t, e.pool, "other")

	const n = 20
	keys := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := e.ob.KeyInWindow(ctx, acme, "call-1", fmt.Sprintf("fresh-%d", i), time.Hour)
			if err == nil {
				keys[i] = k
			}
		}()
	}
	wg.Wait()
	for _, k := range keys {
		require.NotEmpty(t, k)
		require.Equal(t, keys[0], k)
	}

	k, err := e.ob.KeyInWindow(ctx, other, "call-1", "fresh-other", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "fresh-other", k, "windows are per tenant")
	k, err = e.ob.KeyInWindow(ctx, acme, "call-2", "fresh-call-2", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "fresh-call-2", k)

	_, err = e.pool.Exec(ctx, "UPDATE oncebox_key_window SET closes_at = now() - interval '1 minute' WHERE call_hash = 'call-1' AND tenant_id = $1", acme)
	require.NoError(t, err)
	k, err = e.ob.KeyInWindow(ctx, acme, "call-1", "fresh-again", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "fresh-again", k, "a closed window opens anew")

	_, err = e.pool.Exec(ctx, "UPDATE oncebox_key_window SET closes_at = now() - interval '1 minute' WHERE call_hash = 'call-2'")
	require.NoError(t, err)
	st, err := e.ob.Purge(ctx, purge.Config{})
	require.NoError(t, err)
	require.Equal(t, 1, st.KeyWindows)
	require.Equal(t, 2, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_key_window"))

	_, err = e.ob.KeyInWindow(ctx, acme, "call-3", "fresh", 0)
	require.Error(t, err)
}
