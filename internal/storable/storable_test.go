package storable_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/storable"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestCheckJSONAgreesWithPostgres: for documents at and around every limit,
// CheckJSON accepts exactly what Postgres' jsonb accepts (asked for real).
func TestCheckJSONAgreesWithPostgres(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	docs := []string{
		`1e999`, `1e131071`, `1e131072`, `10e131070`, `10e131071`, `0.1e131072`, `0.1e131073`, `1E+999999999999`,
		`0e999999999`, `-1e131072`, `1e-16383`, `1e-16384`, `1.5e-16382`, `1.5e-16383`, `0e-16383`, `0e-16384`,
		`0.` + strings.Repeat("0", 16383), `0.` + strings.Repeat("0", 16384), `1` + strings.Repeat("0", 131071),
		`1` + strings.Repeat("0", 131072), `12.5E3`, `-0.0`, `[1.0e+2, -3e-2]`,
		`"a\u0000"`, `{"\u0000": 1}`, `"\\u0000"`, `"\ud800"`, `"\udc00"`, `"\ud800\udc00"`, `"\ud800\u0041"`,
		`"\ud800\n"`, `"\uD83D\uDE00"`, `"\ud800\ud800\udc00"`, "\"\xff\"", "{\"\xc3\": 1}", `"é"`,
		strings.Repeat("[", 64) + strings.Repeat("]", 64), `{"a": "[[[[", "b": "}}}"}`,
	}
	ctx := context.Background()
	for _, doc := range docs {
		short := doc
		if len(short) > 40 {
			short = short[:40] + "…"
		}
		var n int
		pgErr := pool.QueryRow(ctx, "SELECT length($1::jsonb::text)", doc).Scan(&n)
		ourErr := storable.CheckJSON("args", []byte(doc))
		require.Equal(t, pgErr == nil, ourErr == nil, "%s: postgres %v, check %v", short, pgErr, ourErr)
		if ourErr != nil {
			require.ErrorIs(t, ourErr, vendorapi.ErrInvalidArgs)
		}
	}
	require.Error(t, storable.CheckJSON("args", []byte(strings.Repeat("[", 65)+strings.Repeat("]", 65))), "nesting is bounded")
	require.Error(t, storable.CheckText("reason", "a\x00"))
	require.Error(t, storable.CheckText("reason", "a\xff"))
	require.NoError(t, storable.CheckText("reason", "ça va"))
}
