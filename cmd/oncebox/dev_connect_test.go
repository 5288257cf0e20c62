package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/testkit/dbtest"
)

// TestDevChargesAConnectAccountAndSaysItReuses: in dev, a tenant set on a Connect
// account the fake Stripe was never told about is charged there (the tenants tour runs
// in dev); a second dev on the same database says it holds ops of earlier runs.
func TestDevChargesAConnectAccountAndSaysItReuses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dev processes")
	}
	t.Parallel()
	conn := dbtest.ConnString(t, dbtest.Schema(t))
	addr := freeAddr(t)
	dev, out := startChild(t, "dev", "DATABASE_URL="+conn, "ONCEBOX_ADDR="+addr)
	text := banner(t, out)
	require.NotContains(t, text, "reused", "a fresh database holds no earlier ops")
	_, errOut, code := runCLI(t, "tenant vendor set --tenant demo stripe --account acct_1DevTour", "DATABASE_URL="+conn)
	require.Zero(t, code, errOut)

	req, err := http.NewRequest(http.MethodPost, bannerLine(t, text, "API")+"/v1/ops?wait=10s", strings.NewReader(
		`{"tool":"stripe.payment_intent","args":{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+bannerLine(t, text, "token"))
	req.Header.Set("Idempotency-Key", "connect-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"status":"succeeded"`, "the fake Stripe took the Connect account")
	require.NoError(t, dev.Process.Signal(os.Interrupt))
	waitExit(t, dev, 40*time.Second)

	again, out := startChild(t, "dev", "DATABASE_URL="+conn, "ONCEBOX_ADDR="+addr)
	text = banner(t, out)
	require.Contains(t, text, "reused     this database holds 1 op(s) of earlier runs")
	require.NoError(t, again.Process.Signal(os.Interrupt))
	waitExit(t, again, 40*time.Second)
}
