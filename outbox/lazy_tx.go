package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// inLazyTx runs f in a transaction of its own on pool, like pgx.BeginFunc, except that
// BEGIN travels with f's first statement in one round trip (pgx's Batch.BeginTx)
// instead of taking one of its own: a new op is then BEGIN with the op's insert, River's
// insert, COMMIT. f's error rolls the transaction back and is returned; otherwise the
// transaction commits.
func inLazyTx(ctx context.Context, pool *pgxpool.Pool, f func(pgx.Tx) error) error {
	tx := &lazyTx{pool: pool}
	defer func() {
		// After a commit this is a no-op; on an error or a panic it rolls back.
		_ = tx.Rollback(context.WithoutCancel(ctx))
	}()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// lazyTx is a pgx.Tx that begins with its first statement: until then it holds no
// connection. Once begun, it is pgx's transaction on a pooled connection, released when
// it commits or rolls back.
type lazyTx struct {
	pool *pgxpool.Pool
	// tx is nil until the first statement.
	tx     pgx.Tx
	closed bool
}

var _ pgx.Tx = (*lazyTx)(nil)

// begun returns the transaction, beginning it in a round trip of its own if no
// statement has begun it yet (for the calls that cannot carry BEGIN).
func (t *lazyTx) begun(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if t.tx == nil {
		tx, err := t.pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		t.tx = tx
	}
	return t.tx, nil
}

// withBegin sends BEGIN and the statement in one batch and returns the batch, BEGIN's
// result read; the caller reads the statement's and closes the batch.
func (t *lazyTx) withBegin(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(sql, args...)
	br := t.pool.SendBatch(ctx, b)
	t.tx = br.Tx()
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

// Exec implements pgx.Tx.
func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if t.tx != nil {
		return t.tx.Exec(ctx, sql, args...)
	}
	br, err := t.withBegin(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query implements pgx.Tx.
func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if t.tx != nil {
		return t.tx.Query(ctx, sql, args...)
	}
	br, err := t.withBegin(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		if rows != nil {
			rows.Close()
		}
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow implements pgx.Tx.
func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx != nil && !t.closed {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

// SendBatch implements pgx.Tx.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := t.begun(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return tx.SendBatch(ctx, b)
}

// CopyFrom implements pgx.Tx.
func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

// Prepare implements pgx.Tx.
func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

// Begin implements pgx.Tx: a savepoint in the transaction.
func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

// LargeObjects implements pgx.Tx; it needs the transaction begun by a statement.
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	if t.tx == nil {
		return pgx.LargeObjects{}
	}
	return t.tx.LargeObjects()
}

// Conn implements pgx.Tx: nil until a statement has begun the transaction.
func (t *lazyTx) Conn() *pgx.Conn {
	if t.tx == nil {
		return nil
	}
	return t.tx.Conn()
}

// Commit implements pgx.Tx. With no statement sent there is nothing to commit.
func (t *lazyTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.tx == nil {
		return nil
	}
	return t.tx.Commit(ctx)
}

// Rollback implements pgx.Tx.
func (t *lazyTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.tx == nil {
		return nil
	}
	return t.tx.Rollback(ctx)
}

// batchRows are the rows of a statement sent with BEGIN: reading past the last one, or
// closing them, closes the batch so that the transaction can go on.
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closeErr error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.closeErr = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

// firstRow is the first of rows, read as pgx reads a QueryRow.
type firstRow struct{ rows pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
