package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// emptySchema returns a pool bound to a new, empty schema (not migrated).
func emptySchema(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	url := dbtest.URL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "m_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	conn.Close(ctx)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		pool.Close()
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	return pool
}

func TestMigrateTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)

	first, err := migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	require.NotEmpty(t, first.River, "River's schema is applied through rivermigrate")
	all, err := migrations.All()
	require.NoError(t, err)
	require.Len(t, first.Oncebox, len(all))

	second, err := migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	require.Empty(t, second.River)
	require.Empty(t, second.Oncebox)

	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op").Scan(&n))
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n))
}

func TestConcurrentMigrationsDoNotFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)

	const n = 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		applied int
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := migrations.Migrate(ctx, pool, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			applied += len(res.Oncebox)
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	all, err := migrations.All()
	require.NoError(t, err)
	require.Equal(t, len(all), applied, "each migration applied exactly once across the runs")
}

// TestTokensFromBeforeRolesBecomeAgents applies the migrations before token roles, stores
// a token, and migrates on: the token is an agent token.
func TestTokensFromBeforeRolesBecomeAgents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptySchema(t)
	migrateBefore(t, pool, "token_role")
	_, err := pool.Exec(ctx, `WITH t AS (INSERT INTO oncebox_tenant (name) VALUES ('old') RETURNING id)
		INSERT INTO oncebox_api_token (tenant_id, token_hash, prefix) SELECT id, '\x01', 'obx_old' FROM t`)
	require.NoError(t, err)

	_, err = migrations.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	var role string
	require.NoError(t, pool.QueryRow(ctx, "SELECT role FROM oncebox_api_token WHERE prefix = 'obx_old'").Scan(&role))
	require.Equal(t, "agent", role)
}

// migrateBefore applies oncebox's migrations up to the one named name, which it leaves
// out, and records them as Migrate does: a schema as a release before it left it.
func migrateBefore(t *testing.T, pool *pgxpool.Pool, name string) {
	t.Helper()
	ctx := context.Background()
	all, err := migrations.All()
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE oncebox_migration (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range all {
		if m.Name == name {
			return
		}
		_, err := pool.Exec(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = pool.Exec(ctx, "INSERT INTO oncebox_migration (version, name) VALUES ($1, $2)", m.Version, m.Name)
		require.NoError(t, err)
	}
	t.Fatalf("no migration %q", name)
}
