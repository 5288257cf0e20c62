package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestAuditOutlivesThePurge: an op enqueued by a token has its call in the audit log
// (migration 031) with the token, and its entries stay after the purge took the op.
func TestAuditOutlivesThePurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")
	var token int64
	require.NoError(t, e.pool.QueryRow(ctx, `INSERT INTO oncebox_api_token (tenant_id, token_hash, prefix, person)
		VALUES ($1, '\x01', 'obx_a', 'ada@acme.test') RETURNING id`, tenant).Scan(&token))
	res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k1", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`), TokenID: token})
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 'obj_1', `+optest.Expired+` WHERE id = $1`, res.Op.ID)
	require.NoError(t, err)
	st, err := e.ob.Purge(ctx, purge.Config{BatchSize: 5})
	require.NoError(t, err)
	require.Equal(t, 1, st.Ops)

	require.Equal(t, 1, dbtest.Count(t, e.pool, `SELECT count(*) FROM oncebox_audit WHERE op_id = $1 AND kind = 'call'
		AND (e ->> 'token')::bigint = $2 AND e ->> 'person' = 'ada@acme.test' AND fp IS NOT NULL`, res.Op.ID, token))
	require.Equal(t, 1, dbtest.Count(t, e.pool, `SELECT count(*) FROM oncebox_audit WHERE op_id = $1 AND kind = 'status'
		AND e ->> 'to' = 'succeeded' AND e ->> 'vendor_ref' = 'obj_1'`, res.Op.ID))
	require.Zero(t, dbtest.Count(t, e.pool, `SELECT count(*) FROM oncebox_audit WHERE op_id = $1 AND kind = 'withdrawn'`, res.Op.ID),
		"the purge records nothing")
}
