package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// SweepParams configures the sweeper measurement.
type SweepParams struct {
	// Ops is how many ops the table holds. Required.
	Ops int
	// UnknownEvery makes every UnknownEvery-th op unknown (100 for 1%). Required.
	UnknownEvery int
	// BatchSize is the Reconciler's BatchSize. Defaults to the Reconciler's default.
	BatchSize int
}

// SweepResult is what the sweeper measurement found.
type SweepResult struct {
	// Ops and Unknown are the table's size and how many of its ops were unknown.
	Ops, Unknown int
	// Sweeps is how many ReconcileOnce calls it took to resolve every unknown op.
	Sweeps int
	// Elapsed is the time of those calls together.
	Elapsed time.Duration
	// EmptySweep is the time of one ReconcileOnce once nothing is left to resolve: the cost
	// of finding the candidates among Ops.
	EmptySweep time.Duration
}

// Rate returns unknown ops resolved per second.
func (r SweepResult) Rate() float64 { return Measure{Ops: r.Unknown, Elapsed: r.Elapsed}.Rate() }

// PerSweep returns the mean time of one sweep.
func (r SweepResult) PerSweep() time.Duration {
	if r.Sweeps == 0 {
		return 0
	}
	return r.Elapsed / time.Duration(r.Sweeps)
}

// sqlSeedOps fills the op table: every op was dispatched an hour ago; every $3-th one
// ended unknown, the others succeeded.
const sqlSeedOps = `
INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, attempts,
	attempt_token, vendor_key, key_first_sent_at, dispatch_started_at, result, vendor_ref,
	created_at, updated_at, expires_at)
SELECT $1, 'seed-' || g, 'webhook.post', 'webhook',
	jsonb_build_object('target', $4::text, 'path', '/hook', 'body', jsonb_build_object('n', g)),
	sha256(('seed-' || g)::bytea),
	CASE WHEN g % $3 = 0 THEN 'unknown' ELSE 'succeeded' END, 1,
	CASE WHEN g % $3 = 0 THEN gen_random_uuid() END, 'vk-' || g, now() - interval '1 hour', now() - interval '1 hour',
	CASE WHEN g % $3 = 0 THEN NULL ELSE '{"status":200}'::json END,
	CASE WHEN g % $3 = 0 THEN NULL ELSE 'fx_seed_' || g END,
	now() - interval '1 hour', now() - interval '1 hour', now() + interval '72 hours'
FROM generate_series(1, $2) AS g`

// sqlSeedAttempts gives every seeded op its one finished attempt.
const sqlSeedAttempts = `
INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at, finished_at, outcome)
SELECT id, 1, coalesce(attempt_token, gen_random_uuid()), vendor_key, dispatch_started_at,
	dispatch_started_at + interval '100 milliseconds', CASE WHEN status = 'unknown' THEN 'unknown' ELSE 'succeeded' END
FROM oncebox_op`

// Sweep seeds p.Ops ops with one INSERT ... SELECT generate_series, every
// p.UnknownEvery-th of them unknown, gives the fake receiver one effect tagged with each
// unknown op, and times Outbox.ReconcileOnce until no op is unknown; then times one more
// (empty) sweep. pool must be bound to an empty migrated schema.
func Sweep(ctx context.Context, pool *pgxpool.Pool, p SweepParams) (SweepResult, error) {
	if p.Ops < 1 || p.UnknownEvery < 1 {
		return SweepResult{}, errors.New("bench: Sweep needs Ops and UnknownEvery")
	}
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	vendor, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{Target: {BaseURL: srv.URL}}, LookupPath: "/_lookup"})
	if err != nil {
		return SweepResult{}, fmt.Errorf("bench: webhook vendor: %w", err)
	}
	reg, err := Registry()
	if err != nil {
		return SweepResult{}, err
	}
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{vendor},
		Reconcile: reconcile.Config{BatchSize: p.BatchSize}})
	if err != nil {
		return SweepResult{}, fmt.Errorf("bench: outbox: %w", err)
	}
	t, _, err := tenant.NewStore(pool).Create(ctx, "bench")
	if err != nil {
		return SweepResult{}, fmt.Errorf("bench: tenant: %w", err)
	}

	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlSeedOps, t.ID, p.Ops, p.UnknownEvery, Target); err != nil {
			return fmt.Errorf("seed ops: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlSeedAttempts); err != nil {
			return fmt.Errorf("seed attempts: %w", err)
		}
		return nil
	}); err != nil {
		return SweepResult{}, fmt.Errorf("bench: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE oncebox_op; ANALYZE oncebox_attempt"); err != nil {
		return SweepResult{}, fmt.Errorf("bench: analyze: %w", err)
	}
	rows, err := pool.Query(ctx, "SELECT id::text, args, vendor_key FROM oncebox_op WHERE status = 'unknown'")
	if err != nil {
		return SweepResult{}, fmt.Errorf("bench: list unknown ops: %w", err)
	}
	type unknownOp struct {
		id, vendorKey string
		args          []byte
	}
	unknown, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (unknownOp, error) {
		var u unknownOp
		err := r.Scan(&u.id, &u.args, &u.vendorKey)
		return u, err
	})
	if err != nil {
		return SweepResult{}, fmt.Errorf("bench: list unknown ops: %w", err)
	}
	// The receiver acted on every unknown op: each lookup finds exactly one object.
	if _, err := drive(ctx, 8, Load{Ops: len(unknown)}, func(ctx context.Context, _, i int) error {
		_, err := vendor.Dispatch(ctx, vendorapi.DispatchParams{OpID: unknown[i].id, TenantID: t.ID, Args: unknown[i].args, VendorKey: unknown[i].vendorKey, Attempt: 1})
		return err
	}); err != nil {
		return SweepResult{}, fmt.Errorf("bench: give the receiver its effects: %w", err)
	}

	res := SweepResult{Ops: p.Ops, Unknown: len(unknown)}
	resolved := 0
	for resolved < len(unknown) {
		start := time.Now()
		st, err := ob.ReconcileOnce(ctx)
		res.Elapsed += time.Since(start)
		res.Sweeps++
		if err != nil {
			return res, fmt.Errorf("bench: sweep: %w", err)
		}
		if st.Looked == 0 {
			return res, fmt.Errorf("bench: a sweep found nothing to look up with %d of %d unknown ops resolved", resolved, len(unknown))
		}
		if st.Succeeded != st.Looked {
			return res, fmt.Errorf("bench: a sweep resolved %d of the %d ops it looked up as succeeded: %+v", st.Succeeded, st.Looked, st)
		}
		resolved += st.Succeeded
	}
	start := time.Now()
	st, err := ob.ReconcileOnce(ctx)
	res.EmptySweep = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("bench: empty sweep: %w", err)
	}
	if st.Looked != 0 {
		return res, fmt.Errorf("bench: the sweep after the last one still looked up %d ops", st.Looked)
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op WHERE status = 'unknown'").Scan(&left); err != nil {
		return res, fmt.Errorf("bench: count unknown ops: %w", err)
	}
	if left != 0 {
		return res, fmt.Errorf("bench: %d ops still unknown after the sweeps", left)
	}
	return res, nil
}
