package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestTwoDevsOnOneDatabase: a second `oncebox dev` on the database and port of a running
// one fails to bind the port before it touches the database (the running one's tokens
// stay live, no token is minted); a later dev revokes only the demo tokens earlier devs
// minted, never one made with `oncebox tenant create` or `tenant token create`.
func TestTwoDevsOnOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dev processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	conn := dbtest.ConnString(t, pool)
	store := tenant.NewStore(pool)
	_, created, err := store.Create(ctx, "demo")
	require.NoError(t, err)
	made := tokenCreate(t, conn, "demo")

	addr := freeAddr(t)
	first, out := startChild(t, "dev", "DATABASE_URL="+conn, "ONCEBOX_ADDR="+addr)
	text := banner(t, out)
	devToken := regexp.MustCompile(`token\s+(obx_\S+)`).FindStringSubmatch(text)
	require.NotNil(t, devToken, text)
	requireLive(t, store, created, made, devToken[1])
	before := tokenRows(t, pool)

	// The second dev, same database, same port: it fails on the port and changes nothing.
	second := exec.Command(os.Args[0], "-test.run=^$")
	second.Env = append(os.Environ(), childArgsEnv+"=dev", "DATABASE_URL="+conn, "ONCEBOX_ADDR="+addr)
	var stderr bytes.Buffer
	second.Stderr = &stderr
	done := make(chan error, 1)
	require.NoError(t, second.Start())
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		require.Error(t, err, "the second dev cannot have the port")
	case <-time.After(60 * time.Second):
		_ = second.Process.Kill()
		t.Fatal("the second dev did not stop")
	}
	require.Contains(t, stderr.String(), "listen on "+addr, stderr.String())
	require.Equal(t, before, tokenRows(t, pool), "the second dev minted and revoked nothing")
	requireLive(t, store, created, made, devToken[1])
	requireNewThenReplay(t, text)

	require.NoError(t, first.Process.Signal(os.Interrupt))
	waitExit(t, first, 40*time.Second)

	// A later dev revokes the first one's demo token, and only that.
	again, out := startChild(t, "dev", "DATABASE_URL="+conn, "ONCEBOX_ADDR="+addr)
	banner(t, out)
	_, err = store.Authenticate(ctx, devToken[1])
	require.ErrorIs(t, err, tenant.ErrUnauthorized, "an earlier dev's demo token is revoked")
	requireLive(t, store, created, made)
	require.NoError(t, again.Process.Signal(os.Interrupt))
	waitExit(t, again, 40*time.Second)
}

// tokenCreate runs `oncebox tenant token create NAME` and returns the token it prints.
func tokenCreate(t *testing.T, conn, name string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"=tenant token create "+name, "DATABASE_URL="+conn)
	out, err := cmd.Output()
	require.NoError(t, err, string(out))
	words := strings.Fields(string(out))
	require.NotEmpty(t, words)
	return words[len(words)-1]
}

func requireLive(t *testing.T, store *tenant.Store, tokens ...string) {
	t.Helper()
	for _, tok := range tokens {
		_, err := store.Authenticate(context.Background(), tok)
		require.NoError(t, err, "token %s... is live", tok[:len(tenant.TokenPrefix)+6])
	}
}

// tokenRows is how many tokens the database holds, and how many of them are live.
func tokenRows(t *testing.T, pool *pgxpool.Pool) [2]int {
	t.Helper()
	var n [2]int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*), count(*) FILTER (WHERE revoked_at IS NULL) FROM oncebox_api_token").Scan(&n[0], &n[1]))
	return n
}
