package outbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestGetByIDIsScopedToTheTenant: an op id of another tenant is not found.
func TestGetByIDIsScopedToTheTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	ob := &Outbox{pool: pool}
	var a, b int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_tenant (name) VALUES ('a') RETURNING id`).Scan(&a))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_tenant (name) VALUES ('b') RETURNING id`).Scan(&b))
	var id string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, expires_at) VALUES ($1, 'k', 'test.echo', 'fake', '{}', '\x00', 'pending', 'vk', now() + interval '1 hour')
		RETURNING id::text`, a).Scan(&id))

	_, err := ob.getByID(ctx, b, id)
	require.ErrorIs(t, err, ErrNotFound)
	got, err := ob.getByID(ctx, a, id)
	require.NoError(t, err)
	require.Equal(t, id, got.ID)
}
