package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/localpg"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

const childArgsEnv = "ONCEBOX_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		// Run as the oncebox binary itself (a child process of a test).
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, strings.Fields(args))
		stop()
		os.Exit(code)
	}
	dbtest.Main(m)
}

// startChild runs `oncebox <args>` as a child process and returns it with a reader of
// its standard output.
func startChild(t testing.TB, args string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, childArgsEnv+"="+args)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd, bufio.NewReader(stdout)
}

// banner reads the child's output until the end of dev's banner.
func banner(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	return bannerWithin(t, r, 90*time.Second)
}

// bannerWithin is banner with its own deadline.
func bannerWithin(t *testing.T, r *bufio.Reader, within time.Duration) string {
	t.Helper()
	var out strings.Builder
	lines := make(chan string)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("dev exited before printing its banner:\n%s", out.String())
			}
			out.WriteString(line)
			if strings.HasPrefix(line, "Press Ctrl-C") {
				go func() {
					for range lines {
					}
				}()
				return out.String()
			}
		case <-deadline:
			t.Fatalf("no banner after %s:\n%s", within, out.String())
		}
	}
}

var (
	curlURL    = regexp.MustCompile(`curl -sS -X POST '([^']+)' \\`)
	curlHeader = regexp.MustCompile(`-H '([^:]+): ([^']+)'`)
	curlBody   = regexp.MustCompile(`-d '([^']+)'`)
	pgURL      = regexp.MustCompile(`Postgres\s+\S+ \((\S+)\)`)
	demoKey    = regexp.MustCompile(`-H 'Idempotency-Key: (order-1001-[0-9a-f]{6})'`)
)

// requireNewThenReplay runs the banner's curl twice: the first run records a new op
// (its key is fresh on every dev run, even over a reused database), the second is its
// replay.
func requireNewThenReplay(t *testing.T, text string) {
	t.Helper()
	require.Regexp(t, demoKey, text, "the printed key has a per-run suffix")
	resp := runPrintedCurl(t, text)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "the printed curl records a new op the first time")
	resp = runPrintedCurl(t, text)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the printed curl run twice is a replay")
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
}

// runPrintedCurl performs the request of the banner's curl line.
func runPrintedCurl(t *testing.T, out string) *http.Response {
	t.Helper()
	u := curlURL.FindStringSubmatch(out)
	require.NotNil(t, u, out)
	body := curlBody.FindStringSubmatch(out)
	require.NotNil(t, body, out)
	req, err := http.NewRequest(http.MethodPost, u[1], strings.NewReader(body[1]))
	require.NoError(t, err)
	for _, h := range curlHeader.FindAllStringSubmatch(out, -1) {
		req.Header.Set(h[1], h[2])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

var (
	consoleLink = regexp.MustCompile(`console\s+(http://\S+/console/link\?code=\S+)`)
	csrfField   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	codeField   = regexp.MustCompile(`name="code" value="([^"]+)"`)
)

// requireConsoleLink follows the banner's one-time console link, as a browser would: it
// signs in once, and a second use is refused.
func requireConsoleLink(t *testing.T, out string) {
	t.Helper()
	m := consoleLink.FindStringSubmatch(out)
	require.NotNil(t, m, "the banner prints a console sign-in link: %s", out)
	use := func() int {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(m[1])
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
		csrf, code := csrfField.FindSubmatch(page), codeField.FindSubmatch(page)
		require.NotNil(t, csrf)
		require.NotNil(t, code)
		u, _ := url.Parse(m[1])
		resp, err = c.PostForm(u.Scheme+"://"+u.Host+"/console/link", url.Values{"csrf": {string(csrf[1])}, "code": {string(code[1])}})
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusSeeOther, use(), "the link signs in")
	require.Equal(t, http.StatusUnauthorized, use(), "the link signs in once")
}

func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "oncebox dev exits cleanly on SIGINT")
	case <-time.After(within):
		t.Fatalf("oncebox dev did not exit within %s of SIGINT", within)
	}
}

func TestDevWithDatabaseURL(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	cmd, out := startChild(t, "dev", "DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_ADDR=127.0.0.1:0", "XDG_CACHE_HOME="+t.TempDir())
	text := banner(t, out)
	require.Contains(t, text, "env:DATABASE_URL")
	conn := dbtest.ConnString(t, pool)
	if u, err := url.Parse(conn); err == nil && u.User != nil {
		if pw, set := u.User.Password(); set {
			// A password goes to a pgpass file the exported URL names (printableURL),
			// never into the banner: the test suite's own cluster has one.
			require.NotContains(t, text, pw)
			require.Contains(t, text, "export DATABASE_URL='postgres://"+u.User.Username()+"@"+u.Host+u.Path+"?passfile=")
			conn = ""
		}
	}
	if conn != "" {
		require.Contains(t, text, "export DATABASE_URL='"+conn+"'", "the banner says how to point the CLI at dev's database")
	}
	require.Regexp(t, `(?m)^  fake +Stripe +http://127\.0\.0\.1:\d+$`, text, "one line per fake")
	require.Regexp(t, `(?m)^  fake +SendGrid +http://127\.0\.0\.1:\d+$`, text)
	requireNewThenReplay(t, text)

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	waitExit(t, cmd, 40*time.Second)

	// A second run over the same database prints another key, so its curl records a
	// new op again.
	cmd, out = startChild(t, "dev", "DATABASE_URL="+dbtest.ConnString(t, pool), "ONCEBOX_ADDR=127.0.0.1:0")
	again := banner(t, out)
	require.NotEqual(t, demoKey.FindStringSubmatch(text)[1], demoKey.FindStringSubmatch(again)[1])
	requireNewThenReplay(t, again)
	// The first run's token was revoked: each start leaves one demo token, not one more.
	oldToken := regexp.MustCompile(`token\s+(obx_\S+)`).FindStringSubmatch(text)
	require.NotNil(t, oldToken, text)
	newToken := regexp.MustCompile(`token\s+(obx_\S+)`).FindStringSubmatch(again)
	stale := strings.ReplaceAll(again, newToken[1], oldToken[1])
	resp := runPrintedCurl(t, strings.Replace(stale, demoKey.FindStringSubmatch(again)[1], "order-1001-stale1", 1))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an earlier run's token is revoked")
	requireConsoleLink(t, again)

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	waitExit(t, cmd, 40*time.Second)
}

// TestDevDatabaseURLFlagWins: an explicit --database-url is used as is, over
// DATABASE_URL and over any Postgres dev could find or start.
func TestDevDatabaseURLFlagWins(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	conn := dbtest.ConnString(t, pool)
	cmd, out := startChild(t, "dev --database-url "+conn,
		"DATABASE_URL=postgres://nobody@127.0.0.1:1/nowhere?sslmode=disable", "ONCEBOX_ADDR=127.0.0.1:0")
	text := banner(t, out)
	require.Contains(t, text, "flag:--database-url")
	m := pgURL.FindStringSubmatch(text)
	require.NotNil(t, m, text)
	require.Equal(t, redactURL(conn), m[1], "the banner shows the URL given, its password hidden")
	requireNewThenReplay(t, text)
	var ops int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM oncebox_op").Scan(&ops))
	require.Equal(t, 1, ops, "the op was recorded in the database given")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	waitExit(t, cmd, 40*time.Second)
}

func TestDevStartsAndStopsItsOwnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Postgres cluster")
	}
	t.Parallel()
	// Ask localpg what dev would find, as dev does with no database URL.
	source, err := localpg.Probe(t.Context(), localpg.Config{EnvVars: []string{}})
	if errors.Is(err, localpg.ErrNoPostgres) {
		t.Skip("neither PostgreSQL server binaries (initdb, postgres in PATH, /usr/lib/postgresql/*/bin, ...) nor a Docker engine here: oncebox dev has no Postgres to start; install the postgresql server package to run this test")
	}
	require.NoError(t, err)
	if !strings.HasPrefix(source, "private:") {
		t.Skipf("no PostgreSQL server binaries here (dev would use %s); install the postgresql server package to run this test", source)
	}
	cmd, out := startChild(t, "dev", "DATABASE_URL=", "TEST_DATABASE_URL=", "ONCEBOX_ADDR=127.0.0.1:0")
	text := banner(t, out)
	if strings.Contains(text, "testcontainers") {
		t.Skip("the private Postgres did not start; dev used Docker")
	}
	require.Contains(t, text, "private:")
	m := pgURL.FindStringSubmatch(text)
	require.NotNil(t, m, text)
	u, err := url.Parse(m[1])
	require.NoError(t, err)

	// The private cluster's data folder is kept between runs, but the printed key is
	// fresh on every run: the first curl records a new op.
	requireNewThenReplay(t, text)

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	waitExit(t, cmd, 60*time.Second)
	_, err = net.DialTimeout("tcp", u.Host, time.Second)
	require.Error(t, err, "the private Postgres was stopped with dev")

	// Started again on the same data folder (unless another run holds it now): the same
	// port, so an exported DATABASE_URL still works, and the fakes still hold the
	// PaymentIntent the curl made.
	state := fakesState.FindStringSubmatch(text)
	require.NotNil(t, state, text)
	cmd, out = startChild(t, "dev", "DATABASE_URL=", "TEST_DATABASE_URL=", "ONCEBOX_ADDR=127.0.0.1:0")
	again := banner(t, out)
	if again2 := fakesState.FindStringSubmatch(again); again2 != nil && again2[1] == state[1] {
		require.Equal(t, m[1], pgURL.FindStringSubmatch(again)[1], "the same folder listens on the same port")
		restored, err := strconv.Atoi(again2[2])
		require.NoError(t, err)
		require.GreaterOrEqual(t, restored, 1, "the fake Stripe kept the earlier run's PaymentIntent")
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	waitExit(t, cmd, 60*time.Second)
}

var fakesState = regexp.MustCompile(`the fakes keep their objects beside the cluster, in (\S+): (\d+) restored`)
