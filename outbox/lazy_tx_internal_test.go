package outbox

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestLazyTxIsATransaction: a lazy transaction, whose BEGIN goes with its first
// statement, commits and rolls back as pgx's own does, whichever call sends that first
// statement, and gives its connection back to the pool in every case.
func TestLazyTxIsATransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, err := pool.Exec(ctx, `CREATE TABLE lazy (n int PRIMARY KEY)`)
	require.NoError(t, err)
	rows := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lazy`).Scan(&n))
		return n
	}
	first := map[string]func(pgx.Tx, int) error{
		"exec": func(tx pgx.Tx, n int) error {
			_, err := tx.Exec(ctx, `INSERT INTO lazy VALUES ($1)`, n)
			return err
		},
		"query": func(tx pgx.Tx, n int) error {
			r, err := tx.Query(ctx, `INSERT INTO lazy VALUES ($1) RETURNING n`, n)
			if err != nil {
				return err
			}
			for r.Next() {
			}
			return r.Err()
		},
		"query row": func(tx pgx.Tx, n int) error {
			var got int
			return tx.QueryRow(ctx, `INSERT INTO lazy VALUES ($1) RETURNING n`, n).Scan(&got)
		},
		"batch": func(tx pgx.Tx, n int) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO lazy VALUES ($1)`, n)
			return tx.SendBatch(ctx, b).Close()
		},
	}
	n := 0
	for name, send := range first {
		// Committed: both statements stay.
		n += 2
		require.NoError(t, inLazyTx(ctx, pool, func(tx pgx.Tx) error {
			if err := send(tx, n); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO lazy VALUES ($1)`, n+1)
			return err
		}), name)
		require.Equal(t, n, rows(), name)

		// An error after the first statement rolls it back.
		boom := errors.New("boom")
		err := inLazyTx(ctx, pool, func(tx pgx.Tx) error {
			if err := send(tx, 1000+n); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom, name)
		require.Equal(t, n, rows(), name)

		// A failing first statement fails the transaction; nothing stays.
		err = inLazyTx(ctx, pool, func(tx pgx.Tx) error { return send(tx, n) })
		require.Error(t, err, name)
		require.Equal(t, n, rows(), name)
		require.Zero(t, pool.Stat().AcquiredConns(), name)
	}

	// A statement that fails after a first one aborts the transaction: the commit says so.
	err = inLazyTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO lazy VALUES (5000)`); err != nil {
			return err
		}
		_, _ = tx.Exec(ctx, `INSERT INTO lazy VALUES (5000)`)
		return nil
	})
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
	require.Equal(t, n, rows())

	// No statement: nothing to begin or commit, no connection taken.
	require.NoError(t, inLazyTx(ctx, pool, func(pgx.Tx) error { return nil }))
	// A savepoint inside a lazy transaction.
	require.NoError(t, inLazyTx(ctx, pool, func(tx pgx.Tx) error {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, `INSERT INTO lazy VALUES (6000)`); err != nil {
			return err
		}
		return sp.Rollback(ctx)
	}))
	require.Equal(t, n, rows())
	require.Zero(t, pool.Stat().AcquiredConns())
}
