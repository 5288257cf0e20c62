package audit_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// story writes a refund's whole story as oncebox's SQL does (call by a named person's
// token, approval, dispatch, the vendor's confirmation), then purges the op.
func story(t *testing.T, pool *pgxpool.Pool) (tenant int64, op string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&tenant))
	var token int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_api_token (tenant_id, token_hash, prefix, role, person)
		VALUES ($1, '\xdeadbeefcafe', 'obx_ab', 'agent', 'ada@acme.test') RETURNING id`, tenant).Scan(&token))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, expires_at, asked_by_token, sealed_args)
		VALUES ($1, 'refund-1', 'refund_payment', 'stripe', '{"amount": 2500, "currency": "usd", "card": "sha256:x"}',
			'\x0102', 'awaiting_approval', 'vk', now() - interval '1 hour', $2, '\x5ec2e7')
		RETURNING id::text`, tenant, token).Scan(&op))
	for _, sql := range []string{
		`INSERT INTO oncebox_approval (op_id, tenant_id, policy_version, fingerprint, why, expires_at) VALUES ($1, (SELECT tenant_id FROM oncebox_op WHERE id = $1), 'v7', '\x0102', 'refund above $20', now() + interval '1 day')`,
		`INSERT INTO oncebox_op_event (op_id, kind, from_status, to_status, actor, detail) VALUES ($1, 'approved', 'awaiting_approval', 'pending', 'grace@acme.test', '{"policy_version": "v7"}')`,
		`UPDATE oncebox_op SET status = 'pending' WHERE id = $1`,
		`UPDATE oncebox_op SET status = 'dispatching', attempts = 1 WHERE id = $1`,
		`UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 're_123', result = '{"id": "re_123", "amount": 2500, "currency": "usd"}', sealed_args = NULL WHERE id = $1`,
		`DELETE FROM oncebox_op WHERE id = $1`,
	} {
		_, err := pool.Exec(ctx, sql, op)
		require.NoError(t, err, sql)
	}
	return tenant, op
}

func TestStoryOutlivesThePurgeAndVerifies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tenant, op := story(t, pool)
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op"), "the op was purged")

	var kinds []string
	var all strings.Builder
	require.NoError(t, audit.Export(ctx, pool, audit.ExportParams{TenantID: tenant}, func(e *audit.Entry) error {
		if e.OpID == op {
			kinds = append(kinds, e.Kind)
		}
		all.Write(e.Fields)
		return nil
	}))
	require.Equal(t, []string{"call", "approval_requested", "event", "status", "status"}, kinds)
	for _, want := range []string{`"person": "ada@acme.test"`, `"actor": "grace@acme.test"`, `"vendor_ref": "re_123"`, `"amount": 2500`, `"policy_version": "v7"`} {
		require.Contains(t, all.String(), want)
	}
	for _, secret := range []string{"deadbeef", "3q2+7w", "token_hash", "5ec2e7", "sha256:x"} {
		require.NotContains(t, all.String(), secret, "no secret nor argument in the log")
	}

	pub, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool, SigningKey: key}), pool, tenant)
	r, err := audit.Verify(ctx, pool, tenant, pub)
	require.NoError(t, err)
	require.Nil(t, r.Mismatch)
	require.Equal(t, 1, r.Checkpoints)
	require.Zero(t, r.Unsigned)

	// Another key does not verify the checkpoint.
	other, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	r, err = audit.Verify(ctx, pool, tenant, other)
	require.NoError(t, err)
	require.NotNil(t, r.Mismatch)
}

func TestVerifyNamesTheEditedEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tenant, op := story(t, pool)
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool}), pool, tenant)
	var seq int64
	require.NoError(t, pool.QueryRow(ctx, `UPDATE oncebox_audit SET e = jsonb_set(e, '{actor}', '"mallory"')
		WHERE op_id = $1 AND kind = 'event' RETURNING seq`, op).Scan(&seq))
	r, err := audit.Verify(ctx, pool, tenant, nil)
	require.NoError(t, err)
	require.NotNil(t, r.Mismatch)
	require.Equal(t, seq, r.Mismatch.Entry.Seq)
	require.Contains(t, r.Mismatch.Error(), "edited")
	require.Equal(t, 1, r.Unsigned, "no key: the checkpoint is unsigned")

	// A removed entry breaks the chain at the next one.
	pool2 := dbtest.Schema(t)
	tenant2, op2 := story(t, pool2)
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool2}), pool2, tenant2)
	_, err = pool2.Exec(ctx, `DELETE FROM oncebox_audit WHERE op_id = $1 AND kind = 'approval_requested'`, op2)
	require.NoError(t, err)
	r, err = audit.Verify(ctx, pool2, tenant2, nil)
	require.NoError(t, err)
	require.NotNil(t, r.Mismatch)
	require.Equal(t, "event", r.Mismatch.Entry.Kind)
}

// TestSealerWaitsForOlderTransactions: an entry of a transaction still in progress holds
// back the sealing of later transactions' entries, which are sealed after it.
func TestSealerWaitsForOlderTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	var tenant int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&tenant))
	sealer := audit.NewSealer(audit.Config{Pool: pool})
	sealAll(t, sealer, pool, tenant)

	slow, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer slow.Rollback(ctx) //nolint:errcheck // the test commits it
	_, err = slow.Exec(ctx, "INSERT INTO oncebox_tenant_budget (tenant_id, name, budget, updated_by) VALUES ($1, 'slow', '{}', 'a')", tenant)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "INSERT INTO oncebox_tenant_budget (tenant_id, name, budget, updated_by) VALUES ($1, 'fast', '{}', 'b')", tenant)
	require.NoError(t, err)

	n, err := sealer.SealOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the later transaction's entry waits for the one in progress")
	require.NoError(t, slow.Commit(ctx))
	sealAll(t, sealer, pool, tenant)
	r, err := audit.Verify(ctx, pool, tenant, nil)
	require.NoError(t, err)
	require.Nil(t, r.Mismatch)
	require.Equal(t, 3, r.Sealed)
}

// sealAll seals until every entry of tenant is sealed: the horizon is the cluster's, and
// the tests of other packages hold transactions open in it for a while.
func sealAll(t *testing.T, s *audit.Sealer, pool *pgxpool.Pool, tenant int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := s.SealOnce(context.Background())
		require.NoError(t, err)
		return dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_audit WHERE tenant_id = $1 AND hash IS NULL", tenant) == 0
	}, 30*time.Second, 50*time.Millisecond)
}

func TestCheckOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tenant, op := story(t, pool)
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool}), pool, tenant)
	problems, err := audit.CheckOps(ctx, pool, tenant, map[string]string{op: ""})
	require.NoError(t, err)
	require.Empty(t, problems)

	// A status change recorded twice, and an op with no entries.
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_audit (tenant_id, kind, op_id, e) VALUES ($1, 'status', $2, '{"to": "succeeded"}')`, tenant, op)
	require.NoError(t, err)
	problems, err = audit.CheckOps(ctx, pool, tenant, map[string]string{op: "", "00000000-0000-0000-0000-000000000000": "succeeded"})
	require.NoError(t, err)
	require.Len(t, problems, 2, problems)
}

// TestMaintainDropsWholeMonthsPastRetention: a month older than the retention goes
// whole; this month and the next two exist; nothing newer is touched.
func TestMaintainDropsWholeMonthsPastRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, err := pool.Exec(ctx, `SELECT oncebox_audit_partition(now() - interval '2 years')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_audit (tenant_id, at, kind, e) VALUES (7, now() - interval '2 years', 'setting', '{}'),
		(7, now(), 'setting', '{}')`)
	require.NoError(t, err)
	require.NoError(t, audit.NewSealer(audit.Config{Pool: pool}).Maintain(ctx))
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_audit WHERE tenant_id = 7"))
	require.Equal(t, 3, dbtest.Count(t, pool, `SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'oncebox_audit'::regclass AND c.relname ~ '^oncebox_audit_[0-9]{6}$'`))
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_audit_default"), "no entry fell into the default partition")
}

// TestExportFilters: the filters select ops by tool, by the person who asked or decided,
// by outcome and by amount, and keep each selected op's whole story in the window.
func TestExportFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tenant, refund := story(t, pool)
	var mail string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, expires_at) VALUES ($1, 'mail-1', 'send_email', 'sendgrid', '{"to": "x@y.test"}', '\x03', 'pending', 'vk2', now() + interval '1 day')
		RETURNING id::text`, tenant).Scan(&mail))
	_, err := pool.Exec(ctx, `UPDATE oncebox_op SET status = 'failed', error = '{"code": "vendor_refused"}' WHERE id = $1`, mail)
	require.NoError(t, err)

	ops := func(p audit.ExportParams) []string {
		t.Helper()
		p.TenantID = tenant
		seen := map[string]bool{}
		var out []string
		require.NoError(t, audit.Export(ctx, pool, p, func(e *audit.Entry) error {
			if e.OpID == "" {
				out = append(out, "setting")
			} else if !seen[e.OpID] {
				seen[e.OpID] = true
				out = append(out, e.OpID)
			}
			return nil
		}))
		return out
	}
	i := func(v int64) *int64 { return &v }
	all := ops(audit.ExportParams{})
	require.Contains(t, all, "setting", "no filter: settings too")
	require.Contains(t, all, refund)
	require.Contains(t, all, mail)

	for name, c := range map[string]struct {
		p    audit.ExportParams
		want []string
	}{
		"tool":              {audit.ExportParams{Tool: "refund_payment"}, []string{refund}},
		"asker":             {audit.ExportParams{Person: "ada@acme.test"}, []string{refund}},
		"approver":          {audit.ExportParams{Person: "grace@acme.test"}, []string{refund}},
		"nobody":            {audit.ExportParams{Person: "acme.test"}, nil},
		"outcome":           {audit.ExportParams{Outcome: "failed"}, []string{mail}},
		"outcome succeeded": {audit.ExportParams{Outcome: "succeeded"}, []string{refund}},
		"amount in":         {audit.ExportParams{MinAmount: i(2500), MaxAmount: i(2500)}, []string{refund}},
		"amount above":      {audit.ExportParams{MinAmount: i(2501)}, nil},
		"tool and outcome":  {audit.ExportParams{Tool: "send_email", Outcome: "succeeded"}, nil},
	} {
		require.Equal(t, c.want, ops(c.p), name)
	}

	var n int
	require.NoError(t, audit.Export(ctx, pool, audit.ExportParams{TenantID: tenant, Tool: "refund_payment", Limit: 2},
		func(*audit.Entry) error { n++; return nil }))
	require.Equal(t, 2, n, "Limit")
}

// TestSealerLowWaterMarkKeepsALateCommit: an entry whose seq is below an entry already
// sealed, in a transaction still in progress then, is sealed once it commits (the
// low-water mark never passes a seq a transaction in progress may hold), and the mark
// reaches the end of the log once every transaction has ended.
func TestSealerLowWaterMarkKeepsALateCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	var tenant int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&tenant))
	sealer := audit.NewSealer(audit.Config{Pool: pool})
	sealAll(t, sealer, pool, tenant)

	budget := "INSERT INTO oncebox_tenant_budget (tenant_id, name, budget, updated_by) VALUES ($1, $2, '{}', 'a')"
	early, err := pool.Begin(ctx) // the older transaction id, its seq drawn last
	require.NoError(t, err)
	defer early.Rollback(ctx) //nolint:errcheck // committed below
	_, err = early.Exec(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	late, err := pool.Begin(ctx) // the younger one, its seq drawn first
	require.NoError(t, err)
	defer late.Rollback(ctx) //nolint:errcheck // committed below
	_, err = late.Exec(ctx, budget, tenant, "late")
	require.NoError(t, err)
	_, err = early.Exec(ctx, budget, tenant, "early")
	require.NoError(t, err)
	require.NoError(t, early.Commit(ctx))
	for range 5 {
		_, err := sealer.SealOnce(ctx)
		require.NoError(t, err)
	}
	var lateSeq, low int64
	require.NoError(t, late.QueryRow(ctx, "SELECT seq FROM oncebox_audit WHERE e -> 'row' ->> 'name' = 'late'").Scan(&lateSeq))
	require.NoError(t, pool.QueryRow(ctx, "SELECT low FROM oncebox_audit_mark").Scan(&low))
	require.Less(t, low, lateSeq, "the mark waits for the transaction in progress")

	require.NoError(t, late.Commit(ctx))
	sealAll(t, sealer, pool, tenant)
	r, err := audit.Verify(ctx, pool, tenant, nil)
	require.NoError(t, err)
	require.Nil(t, r.Mismatch)
	require.Equal(t, 3, r.Sealed)
	require.Eventually(t, func() bool {
		_, err := sealer.SealOnce(ctx)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, "SELECT low FROM oncebox_audit_mark").Scan(&low))
		return low >= lateSeq
	}, 30*time.Second, 50*time.Millisecond, "the mark reaches the end once every transaction ended")
}

// TestCheckOpsRetriedDispatch: a dispatch cut back to pending (retryable) records pending
// after the call's pending, the claim between them unrecorded: not a change recorded
// twice. A sealed entry removed, or an op's call removed, is a problem.
func TestCheckOpsRetriedDispatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	var tenant int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&tenant))
	var op string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key, expires_at)
		VALUES ($1, 'mail-1', 'send_email', 'sendgrid', '{}', '\x01', 'pending', 'vk', now() + interval '1 day')
		RETURNING id::text`, tenant).Scan(&op))
	for _, sql := range []string{
		`UPDATE oncebox_op SET status = 'dispatching', attempts = attempts + 1 WHERE id = $1`,
		`UPDATE oncebox_op SET status = 'pending' WHERE id = $1`,
		`UPDATE oncebox_op SET status = 'dispatching', attempts = attempts + 1 WHERE id = $1`,
		`UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 'msg-1' WHERE id = $1`,
	} {
		_, err := pool.Exec(ctx, sql, op)
		require.NoError(t, err, sql)
	}
	sealAll(t, audit.NewSealer(audit.Config{Pool: pool}), pool, tenant)
	problems, err := audit.CheckOps(ctx, pool, tenant, map[string]string{op: "succeeded"})
	require.NoError(t, err)
	require.Empty(t, problems)

	// The same change, attempts and all, recorded again is a change recorded twice.
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_audit (tenant_id, kind, op_id, e)
		SELECT tenant_id, kind, op_id, e FROM oncebox_audit WHERE op_id = $1 AND e ->> 'to' = 'succeeded'`, op)
	require.NoError(t, err)
	problems, err = audit.CheckOps(ctx, pool, tenant, map[string]string{op: "succeeded"})
	require.NoError(t, err)
	require.Len(t, problems, 1, problems)
	require.Contains(t, problems[0], "records succeeded again")

	// A sealed entry removed breaks the chain; the call removed leaves the op without it.
	_, err = pool.Exec(ctx, `DELETE FROM oncebox_audit WHERE op_id = $1 AND (hash IS NULL OR kind = 'call')`, op)
	require.NoError(t, err)
	problems, err = audit.CheckOps(ctx, pool, tenant, map[string]string{op: "succeeded"})
	require.NoError(t, err)
	require.Len(t, problems, 2, problems)
	require.Contains(t, problems[0], "do not start with its call")
	require.Contains(t, problems[1], "the chain does not verify")
}
