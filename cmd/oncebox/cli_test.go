package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// runCLI runs `oncebox <args>` as a child process to its end and returns its standard
// output, its standard error and its exit status. env is added to the test's
// environment; DATABASE_URL, the vendors' keys and the seal key are cleared first, so
// that the child sees only what the test gives it.
func runCLI(t *testing.T, args string, env ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "STRIPE_API_KEY=", "SENDGRID_API_KEY=", "ONCEBOX_WEBHOOK_TARGETS=",
		"ONCEBOX_SEAL_KEY=", "ONCEBOX_LOG_LEVEL=", "ONCEBOX_LOG_FORMAT=")
	cmd.Env = append(cmd.Env, append(env, childArgsEnv+"="+args)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run oncebox %s: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestGlobalFlagsAnywhere: --database-url (and the log flags) work before the
// subcommand's name, between it and its arguments, after them, and as DATABASE_URL.
func TestGlobalFlagsAnywhere(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	url := dbtest.ConnString(t, pool)
	for _, tc := range []struct{ args, env, tenant string }{
		{"tenant create after --database-url " + url, "", "after"},
		{"tenant --database-url " + url + " create between", "", "between"},
		{"tenant create env", "DATABASE_URL=" + url, "env"},
		{"--database-url=" + url + " tenant create before", "", "before"},
		{"tenant --log-format json create logflags --database-url " + url + " --log-level warn", "", "logflags"},
	} {
		out, errOut, code := runCLI(t, tc.args, tc.env)
		require.Zero(t, code, "oncebox %s: %s%s", tc.args, out, errOut)
		_, err := tenant.NewStore(pool).ByName(context.Background(), tc.tenant)
		require.NoError(t, err, "oncebox %s created the tenant", tc.args)
	}
	out, errOut, code := runCLI(t, "review list --database-url "+url)
	require.Zero(t, code, out+errOut)
	out, errOut, code = runCLI(t, "--database-url "+url+" review list")
	require.Zero(t, code, out+errOut)
}

// TestNoDatabaseOneMessage: every subcommand that needs Postgres says the same sentence
// when none is configured, and exits 2.
func TestNoDatabaseOneMessage(t *testing.T) {
	t.Parallel()
	const want = "oncebox: no database configured: set DATABASE_URL or pass --database-url (oncebox dev finds or starts a Postgres of its own)\n"
	for _, args := range []string{
		"serve", "migrate", "tenant create acme", "tenant list", "lookup --tenant acme KEY", "approve --tenant acme KEY",
		"reject --tenant acme KEY", "review list", "review resolve --tenant acme KEY --failed --reason r",
		"reconcile run", "reconcile report --since 2026-01-01", "mcp --tenant acme", "bench", "policy show",
	} {
		out, errOut, code := runCLI(t, args, "STRIPE_API_KEY=sk_test_x")
		require.Equal(t, 2, code, "oncebox %s: %s%s", args, out, errOut)
		require.Equal(t, want, errOut, "oncebox %s", args)
	}
}

// TestReadOnlyCommandsNeedNoVendorNorSealKey: lookup, review list, reconcile report and
// tenant list only read, so they neither warn that no vendor is configured nor refuse to
// run for want of a seal key (with SendGrid configured, the mail tool redacts).
func TestReadOnlyCommandsNeedNoVendorNorSealKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, expires_at) VALUES ($1, 'hook-1', 'webhook.post', 'webhook', '{"target":"crm","path":"/x"}',
		'\x00', 'needs_review', 'ob_x', now() + interval '1 day')`, tn.ID)
	require.NoError(t, err)
	sg := httptest.NewServer(fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1}))
	t.Cleanup(sg.Close)
	db := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	sendgrid := []string{db, "SENDGRID_API_KEY=SG.x", "SENDGRID_API_BASE=" + sg.URL}

	for _, tc := range []struct {
		args string
		env  []string
		want string
	}{
		{"lookup --tenant acme hook-1", []string{db}, "needs_review"},
		{"review list", []string{db}, "hook-1"},
		{"tenant list", []string{db}, "acme"},
		{"lookup --tenant acme hook-1", sendgrid, "needs_review"},
		{"review list --tenant acme", sendgrid, "hook-1"},
		{"reconcile report --since 2020-01-01 --until 2020-01-02 --format json", sendgrid, `"lines"`},
	} {
		out, errOut, code := runCLI(t, tc.args, tc.env...)
		require.Zero(t, code, "oncebox %s: %s%s", tc.args, out, errOut)
		require.Contains(t, out, tc.want, "oncebox %s", tc.args)
		require.NotContains(t, errOut, "no vendor is configured", "oncebox %s", tc.args)
		require.NotContains(t, strings.ToLower(errOut), "seal key", "oncebox %s", tc.args)
	}

	// A command that records or sends still needs the seal key with the mail tool on.
	_, errOut, code := runCLI(t, "reconcile run", sendgrid...)
	require.NotZero(t, code)
	require.Contains(t, errOut, "ONCEBOX_SEAL_KEY")
}

func TestHoistGlobals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"tenant list", "tenant list"},
		{"--database-url U tenant list", "tenant --database-url U list"},
		{"--database-url=U --log-level debug review list", "review --database-url=U --log-level debug list"},
		{"--tenant acme lookup KEY", "--tenant acme lookup KEY"},
		{"--help", "--help"},
		{"", ""},
	} {
		require.Equal(t, strings.Fields(tc.want), append([]string{}, hoistGlobals(strings.Fields(tc.in))...), tc.in)
	}
}

// TestReviewResolveCannotReleaseAWaitingOp: `oncebox review resolve` of an op that
// awaits approval (one approval of the two it needs) fails with the sentence that only
// its approval can release it; the op keeps waiting and has no dispatch job.
func TestReviewResolveCannotReleaseAWaitingOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	var id string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, expires_at) VALUES ($1, 'hook-1', 'webhook.post', 'webhook', '{"target":"crm","path":"/x"}',
		'\x00', 'awaiting_approval', 'ob_x', now() + interval '1 day') RETURNING id`, tn.ID).Scan(&id))
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_approval (op_id, tenant_id, policy_version, fingerprint, approvers_needed, why, expires_at)
		VALUES ($1, $2, '1', '\x00', 2, 'four eyes', now() + interval '1 day')`, id, tn.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_approval_vote (op_id, voter) VALUES ($1, 'token:1')`, id)
	require.NoError(t, err)
	db := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	for _, how := range []string{"--resend", "--resend --new-key", "--failed", "--succeeded ob_1"} {
		args := "review resolve --tenant acme hook-1 " + how + " --reason checked"
		out, errOut, code := runCLI(t, args, db, `ONCEBOX_WEBHOOK_TARGETS={"crm":{"base_url":"http://127.0.0.1:1"}}`)
		require.Equal(t, 1, code, "oncebox %s: %s%s", args, out, errOut)
		require.Contains(t, errOut, "only its approval can release it", args)
	}
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op WHERE id = $1 AND status = 'awaiting_approval'", id))
	require.Zero(t, dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE args->>'op_id' = $1", id))
}

// TestCLIDecisionsNameAToken: `oncebox approve` needs --token (exit 2 without it, or
// with an agent's token); two tokens of one person (tenant token create --person) are one
// voter, so the op keeps waiting until a second person approves.
func TestCLIDecisionsNameAToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	tn, agent, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	var id string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint,
		status, vendor_key, expires_at) VALUES ($1, 'hook-1', 'webhook.post', 'webhook', '{"target":"crm","path":"/x"}',
		'\x00', 'awaiting_approval', 'ob_x', now() + interval '1 day') RETURNING id`, tn.ID).Scan(&id))
	_, err = pool.Exec(ctx, `INSERT INTO oncebox_approval (op_id, tenant_id, policy_version, fingerprint, approvers_needed, why, expires_at)
		VALUES ($1, $2, 'none', '\x00', 2, 'four eyes', now() + interval '1 day')`, id, tn.ID)
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), `ONCEBOX_WEBHOOK_TARGETS={"crm":{"base_url":"http://127.0.0.1:1"}}`}
	token := func(role, person string) string {
		out, errOut, code := runCLI(t, "tenant token create --role "+role+" --person "+person+" acme", env...)
		require.Zero(t, code, out+errOut)
		return strings.TrimSpace(out)
	}
	alice1, alice2, bob := token("approver", "alice@example.com"), token("admin", "alice@example.com"), token("approver", "bob@example.com")
	out, errOut, code := runCLI(t, "tenant token list --format json acme", env...)
	require.Zero(t, code, out+errOut)
	require.Contains(t, out, `"person":"alice@example.com"`)

	_, errOut, code = runCLI(t, "approve --tenant acme hook-1 --actor someone", env...)
	require.Equal(t, 2, code, errOut)
	_, errOut, code = runCLI(t, "approve --tenant acme hook-1", env...)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--token")
	_, errOut, code = runCLI(t, "approve --tenant acme --token "+agent+" hook-1", env...)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "role agent")

	for _, tok := range []string{alice1, alice2[:len(tenant.TokenPrefix)+6]} {
		out, errOut, code := runCLI(t, "approve --tenant acme --token "+tok+" --reason ok hook-1", env...)
		require.Zero(t, code, out+errOut)
		require.Contains(t, out, "awaiting_approval", "one person is one voter")
	}
	out, errOut, code = runCLI(t, "approve --tenant acme --token "+bob+" --reason ok hook-1", env...)
	require.Zero(t, code, out+errOut)
	require.Contains(t, out, "pending")
	require.Equal(t, 2, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_approval_vote WHERE op_id = $1", id))
}

// TestCLILogsWarningsOnlyUnlessAsked: a command other than serve and dev (here review
// list, which joins the fleet) logs no info line by default; --log-level info asks for
// them.
func TestCLILogsWarningsOnlyUnlessAsked(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	_, _, err := tenant.NewStore(pool).Create(context.Background(), "quiet")
	require.NoError(t, err)
	env := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	out, errOut, code := runCLI(t, "review list --tenant quiet", env)
	require.Zero(t, code, out+errOut)
	require.NotContains(t, errOut, "level=INFO", "no info line unless asked")
	_, errOut, code = runCLI(t, "review list --tenant quiet --log-level info", env)
	require.Zero(t, code, errOut)
	require.Contains(t, errOut, "level=INFO")
}
