package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// exportBlock is the banner's export command, continuation lines included.
var exportBlock = regexp.MustCompile(`(?m)^  export (?:.*\\\n)*.*$`)

// TestDevExportsReachTheCLI: the export command dev prints is all `oncebox reconcile
// report` needs beside it: run with exactly that environment after a payment and a
// mail, it checks both with the fakes (exit 0, nothing unchecked, no vendor without a
// lister), and `oncebox lookup` finds the op.
func TestDevExportsReachTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev process")
	}
	t.Parallel()
	pool := dbtest.Schema(t)
	cache := t.TempDir()
	dev, out := startChild(t, "dev", "DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_ADDR="+freeAddr(t),
		"XDG_CACHE_HOME="+cache, "STRIPE_API_KEY=", "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS=", "ONCEBOX_SEAL_KEY=")
	text := banner(t, out)
	block := exportBlock.FindString(text)
	require.NotEmpty(t, block, text)
	for _, v := range []string{"DATABASE_URL=", "STRIPE_API_BASE=", "STRIPE_API_KEY=", "SENDGRID_API_BASE=", "SENDGRID_API_KEY=",
		"ONCEBOX_WEBHOOK_TARGETS=", "ONCEBOX_SEAL_KEY=\"$(cat "} {
		require.Contains(t, block, v)
	}
	require.Equal(t, 1, strings.Count(text, "export "), "one export command")

	requireNewThenReplay(t, text)
	token := regexp.MustCompile(`token\s+(obx_\S+)`).FindStringSubmatch(text)[1]
	base := regexp.MustCompile(`API\s+(http://\S+)`).FindStringSubmatch(text)[1]
	postOp(t, base, token, "mail-1", `{"tool":"sendgrid.mail","args":{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subject":"Hi","text":"Hello"}}`)
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT count(*) FROM oncebox_op WHERE status <> 'succeeded'").Scan(&open))
		return open == 0
	}, 30*time.Second, 100*time.Millisecond, "the payment and the mail succeed")

	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	report, code := runWithExports(t, block, "reconcile report --format summary --since "+since+" --until "+until)
	require.Equal(t, 0, code, report)
	require.Contains(t, report, "stripe.payment_intent")
	require.Contains(t, report, "sendgrid.mail")
	require.NotContains(t, report, "unchecked")
	require.NotContains(t, report, "no lister for vendor")
	found, code := runWithExports(t, block, "lookup --tenant demo mail-1")
	require.Equal(t, 0, code, found)
	require.Contains(t, found, "succeeded")

	require.NoError(t, dev.Process.Signal(os.Interrupt))
	waitExit(t, dev, 40*time.Second)
}

// runWithExports runs `oncebox args` in a shell with no environment but PATH and the
// export command block, and returns its output and exit status.
func runWithExports(t *testing.T, block, args string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", block+"\nexec \"$0\" -test.run='^$'", os.Args[0])
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), childArgsEnv + "=" + args, "ONCEBOX_LOG_LEVEL=error"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit, string(out))
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// postOp records an op with the HTTP API.
func postOp(t *testing.T, base, token, key, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/ops", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

// TestDevKeepsItsSealKey: dev's own seal key is made once, mode 0600, and read again
// by the next run; a seal key given to dev is used as is and no file is made.
func TestDevKeepsItsSealKey(t *testing.T) {
	t.Parallel()
	pg := &localpg.Postgres{URL: "postgres://postgres@127.0.0.1:5432/x", DataDir: filepath.Join(t.TempDir(), "data")}
	var first, second server.Config
	path, err := devSealKey(&first, pg)
	require.NoError(t, err)
	require.Equal(t, pg.DataDir+".sealkey", path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.Len(t, first.SealKey, 44, "base64 of 32 bytes")
	_, err = devSealKey(&second, pg)
	require.NoError(t, err)
	require.Equal(t, first.SealKey, second.SealKey, "the next run reads the same key")

	given := server.Config{SealKey: "given"}
	other := &localpg.Postgres{URL: pg.URL, DataDir: filepath.Join(t.TempDir(), "data")}
	path, err = devSealKey(&given, other)
	require.NoError(t, err)
	require.Empty(t, path)
	require.Equal(t, "given", given.SealKey)
	require.NoFileExists(t, other.DataDir+".sealkey")
}
