package main

import (
	"bufio"
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

	"github.com/oncebox/oncebox/testkit/dbtest"
)

// tourBlocks returns the shell blocks of README.md's tour, and the tour's text.
func tourBlocks(t *testing.T) ([]string, string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	_, tour, ok := strings.Cut(string(readme), "## A five-minute tour")
	require.True(t, ok, "README.md has its tour")
	if end := strings.Index(tour, "\n## "); end >= 0 {
		tour = tour[:end]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(tour, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks, tour
}

// tourBlock is the tour's one block that contains marker.
func tourBlock(t *testing.T, blocks []string, marker string) string {
	t.Helper()
	var found []string
	for _, b := range blocks {
		if strings.Contains(b, marker) {
			found = append(found, b)
		}
	}
	require.Len(t, found, 1, "README.md's tour has one block with %q", marker)
	return found[0]
}

// bannerLine is the value of dev's banner line named name ("  API   http://…").
func bannerLine(t *testing.T, banner, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + `\s+(\S+)`).FindStringSubmatch(banner)
	require.NotNil(t, m, "dev's banner has a %q line:\n%s", name, banner)
	return m[1]
}

// TestReadmeTourEndsWithTheReportItShows walks README.md's tour on a fresh database with
// the built binary, as a reader pastes it: its blocks are read from README.md (each
// found by what it does, so an edited README is what runs), dev is started with the
// settings of its `make dev` line, the second terminal is a shell that ran dev's printed
// export and the tour's variable lines, the placeholders (…) are what dev printed, the
// CLI approve is the one the README names, and the report ends with the summary the
// README promises. dev then ends on SIGINT with status 0.
func TestReadmeTourEndsWithTheReportItShows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oncebox and runs dev")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the tour's commands need curl")
	}
	t.Parallel()
	blocks, tour := tourBlocks(t)
	bin := filepath.Join(t.TempDir(), "oncebox")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	// Terminal one: the `make dev` line's settings, dev on a fresh database.
	devLine := strings.TrimSpace(strings.SplitN(tourBlock(t, blocks, "make dev"), "#", 2)[0])
	env := append(os.Environ(), "DATABASE_URL="+dbtest.ConnString(t, dbtest.Schema(t)), "ONCEBOX_ADDR="+freeAddr(t))
	for _, f := range strings.Fields(strings.TrimSuffix(devLine, "make dev")) {
		require.Contains(t, f, "=", "the make dev line sets variables only: %q", devLine)
		env = append(env, f)
	}
	dev := exec.Command(bin, "dev")
	dev.Env = env
	stdout, err := dev.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, dev.Start())
	t.Cleanup(func() { _ = dev.Process.Kill(); _, _ = dev.Process.Wait() })
	text := banner(t, bufio.NewReader(stdout))

	// Terminal two: dev's export, then the tour's variable lines with what dev printed.
	export := regexp.MustCompile(`(?s)\n(  export .*?[^\\])\n`).FindStringSubmatch(text)
	require.NotNil(t, export, text)
	prelude := export[1] + "\nexport PATH=" + filepath.Dir(bin) + ":$PATH\n"
	for _, line := range strings.Split(tourBlock(t, blocks, "TOKEN="), "\n") {
		m := regexp.MustCompile(`^(?:export )?(\w+)=\S+\s+# the "(\w+)" line`).FindStringSubmatch(line)
		if m != nil {
			prelude += "export " + m[1] + "=" + bannerLine(t, text, m[2]) + "\n"
		}
	}
	sh := func(script string) (string, int) {
		t.Helper()
		cmd := exec.Command("sh", "-c", prelude+script)
		cmd.Env = os.Environ()
		b, _ := cmd.CombinedOutput()
		return string(b), cmd.ProcessState.ExitCode()
	}

	// 1 and 2: a charge, and its replay.
	charge := tourBlock(t, blocks, "stripe.payment_intent")
	got, code := sh(charge)
	require.Zero(t, code, got)
	require.Contains(t, got, "HTTP/1.1 202 Accepted", got)
	require.Contains(t, got, `"status":"succeeded"`, got)
	pi := regexp.MustCompile(`"vendor_ref":"(pi_[^"]+)"`).FindStringSubmatch(got)
	require.NotNil(t, pi, got)
	got, _ = sh(charge)
	require.Contains(t, got, "HTTP/1.1 200 OK", got)
	require.Contains(t, got, "Idempotent-Replayed: true", got)

	// 3: a refund that waits for a person, approved from the command line.
	got, code = sh(strings.ReplaceAll(tourBlock(t, blocks, "stripe.refund"), "pi_…", pi[1]))
	require.Zero(t, code, got)
	require.Contains(t, got, `"status":"awaiting_approval"`, got)
	approve := regexp.MustCompile("`(oncebox approve [^`]+)`").FindStringSubmatch(tour)
	require.NotNil(t, approve, "the tour names its CLI approve")
	approver := regexp.MustCompile(`approver token (\S+?)\)`).FindStringSubmatch(text)
	require.NotNil(t, approver, text)
	got, code = sh(strings.ReplaceAll(approve[1], "<approver token>", approver[1]))
	require.Zero(t, code, got)
	refundKey := regexp.MustCompile(`Idempotency-Key: (\S+)'`).FindStringSubmatch(tourBlock(t, blocks, "stripe.refund"))
	require.NotNil(t, refundKey)
	waitSucceeded(t, bannerLine(t, text, "API"), bannerLine(t, text, "token"), refundKey[1])

	// 4 and 5: the lookup, and the report the README shows.
	got, code = sh(tourBlock(t, blocks, "oncebox lookup"))
	require.Zero(t, code, got)
	require.Contains(t, got, refundKey[1])
	report := tourBlock(t, blocks, "reconcile report")
	stripeURL := regexp.MustCompile(`(?m)^  fake\s+Stripe\s+(\S+)`).FindStringSubmatch(text)
	require.NotNil(t, stripeURL, text)
	// On a terminal, as a reader runs it: the summary (the format a terminal gets).
	report = strings.ReplaceAll(report, "http://127.0.0.1:…", stripeURL[1])
	if _, err := exec.LookPath("script"); err == nil {
		got, code = sh("script -qec " + shellQuote(prelude+report) + " /dev/null")
	} else {
		got, code = sh(strings.TrimSpace(report) + " --format summary") // no util-linux: ask for what a terminal gets
	}
	promised := regexp.MustCompile("for the tour's two ops, `([^`]+)`").FindStringSubmatch(tour)
	require.NotNil(t, promised, "the tour says what its report shows")
	require.Contains(t, got, promised[1], "the report ends as README.md shows")
	require.Zero(t, code, got)

	require.NoError(t, dev.Process.Signal(os.Interrupt))
	waitExit(t, dev, 40*time.Second)
}

// waitSucceeded waits until the op under key is succeeded.
func waitSucceeded(t *testing.T, base, token, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/v1/ops/"+key, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return strings.Contains(b.String(), `"status":"succeeded"`)
	}, 30*time.Second, 200*time.Millisecond, "the approved refund is sent")
}
