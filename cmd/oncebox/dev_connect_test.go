package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/testkit/dbtest"
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

// TestMakeDevEndsCleanlyOnCtrlC runs `make dev` as a terminal would (its own process
// group, which Ctrl-C signals as a whole) and requires its recipe to end with status 0:
// no "make: *** [dev] Error 1" after the interrupt.
func TestMakeDevEndsCleanlyOnCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oncebox with make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	t.Parallel()
	cmd := exec.Command("make", "--no-print-directory", "-C", repoRoot, "dev")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.ConnString(t, dbtest.Schema(t)), "ONCEBOX_ADDR="+freeAddr(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _, _ = cmd.Process.Wait() })
	bannerWithin(t, bufio.NewReader(stdout), 8*time.Minute)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT), "Ctrl-C signals the whole group")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		// GNU make, interrupted itself, waits for its recipe and then ends by the same
		// signal (130 in a shell, which prints nothing for it): what the reader sees is
		// whether the recipe failed, which make reports as "make: *** … Error N".
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT) {
			t.Fatalf("make dev ended with %v on Ctrl-C: %s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("make dev did not end within 60s of Ctrl-C")
	}
	require.NotContains(t, stderr.String(), "make: ***", "the recipe ended with status 0")
}
