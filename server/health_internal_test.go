package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestReadinessRefusals: a Postgres that does not answer (a port nothing listens on) is
// store-unavailable, a schema missing a migration this binary needs is schema-mismatch, and a process that began shutting down is shutting-down although
// its Postgres answers; liveness asks neither.
func TestReadinessRefusals(t *testing.T) {
	t.Parallel()
	dead, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(dead.Close)
	h := &health{pool: dead, logger: slog.New(slog.DiscardHandler)}
	reason, detail := h.check(context.Background())
	require.Equal(t, ReadyStoreUnavailable, reason)
	require.NotEmpty(t, detail)
	rec := httptest.NewRecorder()
	h.livez(rec, httptest.NewRequest(http.MethodGet, "/livez", nil))
	require.Equal(t, http.StatusOK, rec.Code)

	pool := dbtest.Schema(t)
	h = &health{pool: pool, logger: slog.New(slog.DiscardHandler)}
	reason, _ = h.check(context.Background())
	require.Empty(t, reason, "a migrated schema is ready")
	ctx := context.Background()
	_, err = pool.Exec(ctx, `DELETE FROM oncebox_migration WHERE version >= $1`, migrations.LatestExpand())
	require.NoError(t, err)
	rec = httptest.NewRecorder()
	h.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), `"reason":"schema-mismatch"`)
	require.Contains(t, rec.Body.String(), "run oncebox migrate first")

	h.stopping.Store(true)
	rec = httptest.NewRecorder()
	h.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), `"reason":"shutting-down"`)
}
