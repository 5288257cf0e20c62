package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestCheckAuditProblemFails: a problem audit.CheckOps found is an AUDIT finding that
// fails the run.
func TestCheckAuditProblemFails(t *testing.T) {
	t.Parallel()
	in := cleanInput()
	in.Audit = []string{"tenant a: op op-mail: entry seq 12 records succeeded again"}
	rep := Check(in)
	require.False(t, rep.OK())
	require.Len(t, rep.Audit, 1)
	require.Equal(t, []string{"AUDIT: tenant a: op op-mail: entry seq 12 records succeeded again"}, rep.Findings())
}

func TestAuditWant(t *testing.T) {
	t.Parallel()
	migrated := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	stored := []auditOp{
		{id: "old", tenant: 1, status: statusSucceeded, created: migrated.Add(-time.Second)},
		{id: "new", tenant: 1, status: statusFailed, created: migrated.Add(time.Second)},
		{id: "b", tenant: 2, status: statusNeedsReview, created: migrated.Add(time.Second)},
	}
	answered := map[string]int64{"new": 1, "purged": 2}

	want, skipped := auditWant(stored, answered, auditScope{})
	require.Equal(t, map[int64]map[string]string{
		1: {"old": statusSucceeded, "new": statusFailed},
		2: {"b": statusNeedsReview, "purged": ""},
	}, want, "a plain run: every op, the purged one with no status")
	require.Zero(t, skipped)

	want, skipped = auditWant(stored, answered, auditScope{since: migrated, storedOnly: true})
	require.Equal(t, map[int64]map[string]string{1: {"new": statusFailed}, 2: {"b": statusNeedsReview}}, want,
		"a rolling upgrade: the ops created after the migration")
	require.Equal(t, 2, skipped)

	want, skipped = auditWant(stored, answered, auditScope{storedOnly: true})
	require.Len(t, want[1], 2, "an asynchronous failover: the stored ops")
	require.NotContains(t, want[2], "purged")
	require.Equal(t, 1, skipped)

	want, skipped = auditWant(stored, answered, auditScope{none: true})
	require.Empty(t, want, "a rolling upgrade that never migrated")
	require.Equal(t, 4, skipped)
}

// TestAuditCheck runs the wiring against Postgres: the sealer seals, the harness waits
// for it, and the check is clean for a stored op an answer named and a purged one only a
// vendor's object names (a step's op); then the purged op's call entry is deleted, and
// an object names an op no entry names, and the run fails on both.
func TestAuditCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	h := &harness{pool: pool, history: newRecorder(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h.client = &client{history: h.history}
	var tenant int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('chaos-a') RETURNING id").Scan(&tenant))
	h.tenants = []chaosTenant{{name: "chaos-a", label: "a", id: tenant}}
	var stored, purged string
	for key, id := range map[string]*string{"k-stored": &stored, "k-purged": &purged} {
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key, expires_at)
			VALUES ($1, $2, 'send_email', 'sendgrid', '{}', '\x01', 'pending', 'vk', now() + interval '1 day') RETURNING id::text`, tenant, key).Scan(id))
		for _, sql := range []string{
			`UPDATE oncebox_op SET status = 'dispatching', attempts = attempts + 1 WHERE id = $1`,
			`UPDATE oncebox_op SET status = 'pending' WHERE id = $1`,
			`UPDATE oncebox_op SET status = 'dispatching', attempts = attempts + 1 WHERE id = $1`,
			`UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 'msg' WHERE id = $1`,
		} {
			_, err := pool.Exec(ctx, sql, *id)
			require.NoError(t, err, sql)
		}
	}
	h.client.bind("k-stored", 0)
	h.history.add(Call{Key: "k-stored", Answer: Answer{Code: 202, OpID: stored, Status: "pending"}})
	_, err := pool.Exec(ctx, `DELETE FROM oncebox_op WHERE id = $1`, purged)
	require.NoError(t, err)

	sealCtx, stopSealing := context.WithCancel(ctx)
	defer stopSealing()
	go audit.NewSealer(audit.Config{Pool: pool, Interval: 50 * time.Millisecond}).Run(sealCtx)
	require.Zero(t, h.waitSealed(ctx))
	stopSealing()

	tagged := taggedOps(CheckInput{Objects: []VendorObject{{OpID: stored}, {OpID: purged}, {}}})
	problems, fig, err := h.auditCheck(ctx, 0, tagged)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, AuditFigures{Ops: 2, Purged: 1, Entries: 7}, fig)

	_, err = pool.Exec(ctx, `DELETE FROM oncebox_audit WHERE op_id = $1 AND kind = 'call'`, purged)
	require.NoError(t, err)
	const nobody = "00000000-0000-0000-0000-000000000000"
	problems, fig, err = h.auditCheck(ctx, 3, append(tagged, nobody))
	require.NoError(t, err)
	require.Len(t, problems, 4, problems)
	require.Contains(t, problems[0], "3 audit entries of the run's tenants were not sealed")
	require.Equal(t, "op "+nobody+": a vendor's object carries it, it has no row, and no audit entry of the run's tenants names it", problems[1])
	require.Equal(t, "tenant a: op "+purged+": its audit entries do not start with its call", problems[2])
	require.True(t, strings.HasPrefix(problems[3], "tenant a: the chain does not verify"), problems[3])
	require.Equal(t, "audit_ops=2 audit_purged=1 audit_skipped=0 audit_entries=6 audit_unsealed=3 audit_problems=4", fig.String(len(problems)))

	in := cleanInput()
	in.Audit = problems
	require.False(t, Check(in).OK())
}
