package cells

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrBusy is returned when a tenant's work in flight did not settle within the move's
// wait: nothing moved, and the tenant is served from its cell again.
var ErrBusy = errors.New("the tenant still has work in flight")

// Mover moves tenants between the cells of one installation.
type Mover struct {
	// Home is the home cell's pool (the directory's).
	Home *pgxpool.Pool
	// Cells are the pools of every cell by name, the home cell's under Home.
	Cells map[string]*pgxpool.Pool
	// Wait bounds how long a move waits for the tenant's ops in flight (pending,
	// dispatching, unknown) and open composite runs to settle (DefaultMoveWait).
	Wait time.Duration
	// Drain is how long a move waits, once the directory says the tenant is moving,
	// for every process's directory cache to say so too (DefaultDrain), so that no
	// process sends the tenant's calls to its old cell past the fence.
	Drain time.Duration
	// Logf reports each step ("" to stay silent).
	Logf func(format string, args ...any)
}

// DefaultMoveWait is how long a move waits for the tenant's work in flight by default.
const DefaultMoveWait = time.Minute

// DefaultDrain is how long a move waits for the processes' directory caches by default:
// twice serve's --cell-directory-refresh default.
const DefaultDrain = 2 * time.Second

// TableRows is how many rows of a table a move copies.
type TableRows struct {
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
}

// Plan is what a move does, read before it starts (Mover.Plan, the dry run).
type Plan struct {
	Tenant   string `json:"tenant"`
	TenantID int64  `json:"tenant_id"`
	From     string `json:"from"`
	To       string `json:"to"`
	// InFlight counts the tenant's ops still pending, dispatching or unknown, its open
	// composite runs and its audit entries not sealed yet: the move waits for them
	// (Mover.Wait).
	InFlight int64 `json:"in_flight"`
	// XIDGap is how many transaction ids the target cell must use up before the
	// tenant's audit chain can continue there in order (0: none).
	XIDGap int64       `json:"xid_gap"`
	Rows   []TableRows `json:"rows"`
	// Finish says the directory already places the tenant in To: a move that stopped
	// after the switch; moving again only removes what is left in From.
	Finish bool `json:"finish,omitempty"`
}

func (m *Mover) logf(format string, args ...any) {
	if m.Logf != nil {
		m.Logf(format, args...)
	}
}

func (m *Mover) pool(name string) (*pgxpool.Pool, error) {
	p, ok := m.Cells[name]
	if name == Home && !ok {
		p, ok = m.Home, m.Home != nil
	}
	if !ok {
		return nil, fmt.Errorf("cells: %w %q: not among the cells given", ErrUnknownCell, name)
	}
	return p, nil
}

// Plan reads what moving tenant to the cell to would do, and changes nothing.
func (m *Mover) Plan(ctx context.Context, tenant, to string) (*Plan, error) {
	placed, err := Placed(ctx, m.Home, tenant)
	if err != nil {
		return nil, err
	}
	p := &Plan{Tenant: tenant, From: placed.Cell, To: to}
	if placed.MovingTo != "" && placed.MovingTo != to {
		return nil, fmt.Errorf("cells: %q is being moved to %q: finish that move first (oncebox tenant move %s --to %s)",
			tenant, placed.MovingTo, tenant, placed.MovingTo)
	}
	dst, err := m.pool(to)
	if err != nil {
		return nil, err
	}
	if placed.Cell == to {
		// Either there already, or a move that switched the directory and stopped.
		for name, src := range m.Cells {
			if name == to {
				continue
			}
			if id, err := tenantID(ctx, src, tenant); err == nil {
				p.From, p.TenantID, p.Finish = name, id, true
				return p, nil
			}
		}
		return nil, fmt.Errorf("cells: %q is already in cell %q", tenant, to)
	}
	src, err := m.pool(placed.Cell)
	if err != nil {
		return nil, err
	}
	if p.TenantID, err = tenantID(ctx, src, tenant); err != nil {
		return nil, err
	}
	if err := src.QueryRow(ctx, sqlInFlight, p.TenantID).Scan(&p.InFlight); err != nil {
		return nil, fmt.Errorf("cells: count %q's work in flight: %w", tenant, err)
	}
	if p.XIDGap, err = xidGap(ctx, src, dst, p.TenantID); err != nil {
		return nil, err
	}
	for _, t := range tenantTables {
		var n int64
		q := fmt.Sprintf("SELECT count(*) FROM %s WHERE "+t.where, t.name, p.TenantID)
		if err := src.QueryRow(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("cells: count %s: %w", t.name, err)
		}
		p.Rows = append(p.Rows, TableRows{Table: t.name, Rows: n})
	}
	return p, nil
}

func tenantID(ctx context.Context, pool *pgxpool.Pool, tenant string) (int64, error) {
	var id int64
	err := pool.QueryRow(ctx, `SELECT id FROM oncebox_tenant WHERE name = $1`, tenant).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("cells: no tenant %q in its cell", tenant)
	}
	if err != nil {
		return 0, fmt.Errorf("cells: read tenant %q: %w", tenant, err)
	}
	return id, nil
}

// sqlInFlight counts a tenant's ops a worker or the reconciler may still act on, its
// composite runs still stepping, and its audit entries not sealed yet (the old cell's
// sealer chains them; the new cell's would not look below its own low-water mark): a
// move waits until there are none.
const sqlInFlight = `
SELECT (SELECT count(*) FROM oncebox_op WHERE tenant_id = $1 AND status IN ('pending', 'dispatching', 'unknown'))
     + (SELECT count(*) FROM oncebox_step_run s JOIN oncebox_op o ON o.id = s.op_id
         WHERE o.tenant_id = $1 AND s.state IN ('running', 'compensating'))
     + (SELECT count(*) FROM oncebox_audit WHERE tenant_id = $1 AND hash IS NULL)`

// xidGap returns how many transaction ids dst must use before its next one is past
// every transaction id of the tenant's audit chain in src: the chain is ordered by
// (tx, seq), so the entries the tenant writes in dst must come after those it brings.
func xidGap(ctx context.Context, src, dst *pgxpool.Pool, id int64) (int64, error) {
	var last, next int64
	if err := src.QueryRow(ctx, `SELECT greatest(
    (SELECT max(tx::text::numeric::bigint) FROM oncebox_audit WHERE tenant_id = $1),
    (SELECT max(tx::text::numeric::bigint) FROM oncebox_audit_head WHERE tenant_id = $1), 0)`, id).Scan(&last); err != nil {
		return 0, fmt.Errorf("cells: read the audit chain's last transaction: %w", err)
	}
	if err := dst.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::numeric::bigint`).Scan(&next); err != nil {
		return 0, fmt.Errorf("cells: read the target's next transaction id: %w", err)
	}
	return max(0, last+1-next), nil
}

// Move moves tenant to the cell to: the directory marks it moving (its calls are
// answered 503 with Retry-After), its old cell is fenced (no new op, no decision),
// its work in flight settles there, its rows are copied in one transaction of the
// target, the directory switches, and its rows leave the old cell. A move that stops
// half-way can be run again: before the switch it starts over, after it it finishes.
func (m *Mover) Move(ctx context.Context, tenant, to string) (*Plan, error) {
	p, err := m.Plan(ctx, tenant, to)
	if err != nil {
		return nil, err
	}
	src, err := m.pool(p.From)
	if err != nil {
		return nil, err
	}
	dst, err := m.pool(to)
	if err != nil {
		return nil, err
	}
	if p.Finish {
		m.logf("the directory already places %s in %s; removing what is left in %s", tenant, to, p.From)
		return p, m.cleanUp(ctx, src, p)
	}
	if _, err := m.Home.Exec(ctx, `
INSERT INTO oncebox_cell_tenant (tenant, cell, moving_to) VALUES ($1, $2, $3)
ON CONFLICT (tenant) DO UPDATE SET moving_to = EXCLUDED.moving_to, updated_at = now()`, tenant, p.From, to); err != nil {
		return nil, fmt.Errorf("cells: mark %q moving: %w", tenant, err)
	}
	m.logf("directory: %s moving from %s to %s; its calls are answered 503 with Retry-After", tenant, p.From, to)
	abort := func(cause error) (*Plan, error) {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := unfence(actx, src, p.TenantID); err != nil {
			return nil, fmt.Errorf("%w; and lifting the fence failed: %w (run the move again to finish or undo it)", cause, err)
		}
		if _, err := m.Home.Exec(actx, `UPDATE oncebox_cell_tenant SET moving_to = NULL, updated_at = now() WHERE tenant = $1`, tenant); err != nil {
			return nil, fmt.Errorf("%w; and the directory still says moving: %w (run the move again)", cause, err)
		}
		if p.From == Home {
			_, _ = m.Home.Exec(actx, `DELETE FROM oncebox_cell_tenant WHERE tenant = $1 AND cell = $2 AND moving_to IS NULL`, tenant, Home)
		}
		return nil, fmt.Errorf("%w; nothing moved, %s is served from %s again", cause, tenant, p.From)
	}
	select {
	case <-ctx.Done():
		return abort(ctx.Err())
	case <-time.After(m.drain()):
	}
	if err := fence(ctx, src, p.TenantID, to); err != nil {
		return abort(err)
	}
	m.logf("fenced %s in %s: no new op, no decision", tenant, p.From)
	if err := m.waitQuiet(ctx, src, p); err != nil {
		return abort(err)
	}
	if err := catchUpXID(ctx, src, dst, p.TenantID, m.logf); err != nil {
		return abort(err)
	}
	if err := copyTenant(ctx, src, dst, p); err != nil {
		return abort(err)
	}
	m.logf("copied %s to %s", tenant, to)
	if _, err := m.Home.Exec(ctx, `
INSERT INTO oncebox_cell_tenant (tenant, cell) VALUES ($1, $2)
ON CONFLICT (tenant) DO UPDATE SET cell = EXCLUDED.cell, moving_to = NULL, updated_at = now()`, tenant, to); err != nil {
		return abort(fmt.Errorf("cells: switch the directory: %w", err))
	}
	if to == Home {
		if _, err := m.Home.Exec(ctx, `DELETE FROM oncebox_cell_tenant WHERE tenant = $1 AND cell = $2`, tenant, Home); err != nil {
			m.logf("the directory's row of %s stays (it says home, as no row would): %v", tenant, err)
		}
	}
	m.logf("directory: %s is in %s", tenant, to)
	return p, m.cleanUp(ctx, src, p)
}

func (m *Mover) drain() time.Duration {
	if m.Drain > 0 {
		return m.Drain
	}
	return DefaultDrain
}

// waitQuiet waits until the tenant has no work in flight in src, or Wait passes.
func (m *Mover) waitQuiet(ctx context.Context, src *pgxpool.Pool, p *Plan) error {
	wait := m.Wait
	if wait <= 0 {
		wait = DefaultMoveWait
	}
	deadline := time.Now().Add(wait)
	for {
		var n int64
		if err := src.QueryRow(ctx, sqlInFlight, p.TenantID).Scan(&n); err != nil {
			return fmt.Errorf("cells: count %q's work in flight: %w", p.Tenant, err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cells: %w: %d op(s) pending, dispatching or unknown, composite runs open or audit entries not sealed yet, after %s (a composite op whose step waits for a person holds it until decided or expired; the cell's audit sealer runs with serve's periodic role)",
				ErrBusy, n, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// fenceLock serializes the moves' fences in a cell: the fence trigger exists while any
// tenant of the cell is fenced.
const fenceLock = `SELECT pg_advisory_xact_lock(hashtextextended('oncebox_tenant_fence', 0))`

// ddlLockTimeout bounds how long the fence's trigger DDL waits for oncebox_op's lock,
// and with it how long every other tenant's writes in the cell queue behind it; a
// DDL that times out is tried again (ddlTries times).
const (
	ddlLockTimeout = `SET LOCAL lock_timeout = '300ms'`
	ddlTries       = 40
)

// withDDLRetry runs f, again after a pause when it failed on its lock timeout (55P03).
func withDDLRetry(ctx context.Context, f func() error) error {
	var err error
	for range ddlTries {
		err = f()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return err
}

// fence stops new ops and decisions of the tenant in pool: its fence row, and the
// trigger that reads it. Creating the trigger waits for every transaction writing
// oncebox_op (SHARE ROW EXCLUSIVE), so none that missed the fence can commit after;
// it waits at most ddlLockTimeout at a time, so that the other tenants' writes, queued
// behind it, wait no longer.
func fence(ctx context.Context, pool *pgxpool.Pool, id int64, to string) error {
	err := withDDLRetry(ctx, func() error { return fenceOnce(ctx, pool, id, to) })
	if err != nil {
		return fmt.Errorf("cells: fence tenant %d: %w", id, err)
	}
	return nil
}

func fenceOnce(ctx context.Context, pool *pgxpool.Pool, id int64, to string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fenceLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ddlLockTimeout); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO oncebox_tenant_fence (tenant_id, moving_to) VALUES ($1, $2)
ON CONFLICT (tenant_id) DO UPDATE SET moving_to = EXCLUDED.moving_to`, id, to); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE OR REPLACE TRIGGER oncebox_tenant_fence BEFORE INSERT OR UPDATE OF status ON oncebox_op
    FOR EACH ROW EXECUTE FUNCTION oncebox_tenant_fence_check()`)
		return err
	})
}

// unfence lifts the tenant's fence in pool, and drops the trigger when no other tenant
// of the cell is fenced.
func unfence(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	return withDDLRetry(ctx, func() error { return unfenceOnce(ctx, pool, id) })
}

func unfenceOnce(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fenceLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM oncebox_tenant_fence WHERE tenant_id = $1`, id); err != nil {
			return err
		}
		var left bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oncebox_tenant_fence)`).Scan(&left); err != nil {
			return err
		}
		if left {
			return nil
		}
		if _, err := tx.Exec(ctx, ddlLockTimeout); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DROP TRIGGER IF EXISTS oncebox_tenant_fence ON oncebox_op`)
		return err
	})
}

// catchUpXID uses up dst's transaction ids until its next one is past the tenant's
// audit chain's last (xidGap), committing asynchronously (no fsync per id).
func catchUpXID(ctx context.Context, src, dst *pgxpool.Pool, id int64, logf func(string, ...any)) error {
	gap, err := xidGap(ctx, src, dst, id)
	if err != nil || gap == 0 {
		return err
	}
	if logf != nil {
		logf("using up %d transaction ids in the target, so the audit chain continues in order", gap)
	}
	for gap > 0 {
		if err := useXIDs(ctx, dst, min(gap, 100000)); err != nil {
			return err
		}
		if gap, err = xidGap(ctx, src, dst, id); err != nil {
			return err
		}
	}
	return nil
}

// useXIDs uses up n transaction ids of pool's cluster: a DO block at the top level
// (its own simple query: a block of several statements is one transaction, in which
// COMMIT is refused) assigns an id and commits, n times, without waiting for the flush.
func useXIDs(ctx context.Context, pool *pgxpool.Pool, n int64) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("cells: catch up transaction ids: %w", err)
	}
	defer conn.Release()
	for _, sql := range []string{`SET synchronous_commit = off`,
		fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$`, n),
		`RESET synchronous_commit`} {
		if _, err := conn.Conn().PgConn().Exec(ctx, sql).ReadAll(); err != nil {
			return fmt.Errorf("cells: catch up transaction ids: %w", err)
		}
	}
	return nil
}

// columns returns the stored columns of table in pool, in order (generated columns
// are computed, not copied).
func columns(ctx context.Context, tx pgx.Tx, table string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT attname FROM pg_attribute
WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
ORDER BY attnum`, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// copyTenant copies the tenant's rows from src (one repeatable-read snapshot) into dst
// (one transaction, triggers off: the rows come with their audit entries and need no
// new ones), after removing what an earlier, undone attempt may have left in dst.
func copyTenant(ctx context.Context, src, dst *pgxpool.Pool, p *Plan) error {
	sconn, err := src.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("cells: copy: %w", err)
	}
	defer sconn.Release()
	dconn, err := dst.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("cells: copy: %w", err)
	}
	defer dconn.Release()
	stx, err := sconn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("cells: copy: %w", err)
	}
	defer func() { _ = stx.Rollback(context.WithoutCancel(ctx)) }()
	var srcVersion, dstVersion int
	if err := stx.QueryRow(ctx, `SELECT max(version) FROM oncebox_migration`).Scan(&srcVersion); err != nil {
		return fmt.Errorf("cells: copy: read the source's schema: %w", err)
	}
	return pgx.BeginFunc(ctx, dconn, func(dtx pgx.Tx) error {
		if err := dtx.QueryRow(ctx, `SELECT max(version) FROM oncebox_migration`).Scan(&dstVersion); err != nil {
			return fmt.Errorf("cells: copy: read the target's schema: %w", err)
		}
		if srcVersion != dstVersion {
			return fmt.Errorf("cells: copy: the cells' schemas differ (migration %d and %d): run oncebox migrate on both", srcVersion, dstVersion)
		}
		if _, err := dtx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return fmt.Errorf("cells: copy needs a role that may set session_replication_role (a superuser, or GRANT SET ON PARAMETER): %w", err)
		}
		var name string
		err := dtx.QueryRow(ctx, `SELECT name FROM oncebox_tenant WHERE id = $1 OR name = $2`, p.TenantID, p.Tenant).Scan(&name)
		switch {
		case err == nil:
			// A copy whose directory switch never came: the source is still the truth.
			if err := deleteTenant(ctx, dtx, p.TenantID); err != nil {
				return err
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("cells: copy: %w", err)
		}
		if err := dtx.QueryRow(ctx, `SELECT name FROM oncebox_tenant WHERE id = $1 OR name = $2`, p.TenantID, p.Tenant).Scan(&name); err == nil {
			return fmt.Errorf("cells: copy: cell %q holds another tenant %q under the same id or name", p.To, name)
		}
		for _, t := range tenantTables {
			cols, err := columns(ctx, dtx, t.name)
			if err != nil {
				return fmt.Errorf("cells: copy %s: %w", t.name, err)
			}
			scols, err := columns(ctx, stx, t.name)
			if err != nil {
				return fmt.Errorf("cells: copy %s: %w", t.name, err)
			}
			if !slices.Equal(cols, scols) {
				return fmt.Errorf("cells: copy %s: its columns differ between the cells", t.name)
			}
			list := strings.Join(cols, ", ")
			out := fmt.Sprintf("COPY (SELECT %s FROM %s WHERE "+t.where+") TO STDOUT", list, t.name, p.TenantID)
			in := fmt.Sprintf("COPY %s (%s) FROM STDIN", t.name, list)
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				_, err := sconn.Conn().PgConn().CopyTo(ctx, pw, out)
				pw.CloseWithError(err)
				done <- err
			}()
			_, inErr := dconn.Conn().PgConn().CopyFrom(ctx, pr, in)
			pr.CloseWithError(io.ErrClosedPipe)
			outErr := <-done
			if outErr != nil {
				return fmt.Errorf("cells: copy %s out of %s: %w", t.name, p.From, outErr)
			}
			if inErr != nil {
				return fmt.Errorf("cells: copy %s into %s: %w", t.name, p.To, inErr)
			}
		}
		return nil
	})
}

// deleteTenant deletes the tenant's rows, children first. The transaction must run
// with session_replication_role = replica: no audit entry for rows that move, and no
// cascade (every table is named).
func deleteTenant(ctx context.Context, tx pgx.Tx, id int64) error {
	for _, t := range slices.Backward(tenantTables) {
		if _, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE "+t.where, t.name, id)); err != nil {
			return fmt.Errorf("cells: delete %s: %w", t.name, err)
		}
	}
	return nil
}

// cleanUp removes the moved tenant from its old cell and lifts its fence there. The
// tenant's jobs still queued there find no op and end.
func (m *Mover) cleanUp(ctx context.Context, src *pgxpool.Pool, p *Plan) error {
	err := pgx.BeginFunc(ctx, src, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		if err := deleteTenant(ctx, tx, p.TenantID); err != nil {
			return err
		}
		// The deletes ran without triggers: tell the token caches.
		_, err := tx.Exec(ctx, `SELECT pg_notify('oncebox_auth_changed', '')`)
		return err
	})
	if err != nil {
		return fmt.Errorf("cells: %s is in %s, but removing it from %s failed (run the move again to finish): %w", p.Tenant, p.To, p.From, err)
	}
	if err := unfence(ctx, src, p.TenantID); err != nil {
		return fmt.Errorf("cells: %s is in %s, but lifting its fence in %s failed (run the move again to finish): %w", p.Tenant, p.To, p.From, err)
	}
	m.logf("removed %s from %s", p.Tenant, p.From)
	return nil
}
