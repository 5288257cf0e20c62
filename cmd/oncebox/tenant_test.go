package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestTenantTokenRoles runs `oncebox tenant` as a child process: create prints an agent
// token as the last word of its last line, token create prints a token of the asked role
// the same way (or as the token member of JSON), and token list shows the roles.
func TestTenantTokenRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	dbEnv := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	store := tenant.NewStore(pool)
	run := func(args string) (string, int) {
		cmd, out := startChild(t, args, dbEnv)
		text, err := io.ReadAll(out)
		require.NoError(t, err)
		_ = cmd.Wait()
		return string(text), cmd.ProcessState.ExitCode()
	}
	lastWord := func(text string) string {
		lines := strings.Split(strings.TrimSpace(text), "\n")
		words := strings.Fields(lines[len(lines)-1])
		require.NotEmpty(t, words, text)
		return words[len(words)-1]
	}
	roleOf := func(token string) tenant.Role {
		p, err := store.Authenticate(ctx, token)
		require.NoError(t, err)
		return p.Role
	}

	out, code := run("tenant create acme")
	require.Zero(t, code, out)
	require.Equal(t, tenant.RoleAgent, roleOf(lastWord(out)))

	out, code = run("tenant token create --role approver acme")
	require.Zero(t, code, out)
	require.Equal(t, tenant.RoleApprover, roleOf(lastWord(out)))

	out, code = run("tenant token create acme --role admin --format json")
	require.Zero(t, code, out)
	var created struct{ Token, Role, Tenant string }
	require.NoError(t, json.Unmarshal([]byte(out), &created), out)
	require.Equal(t, "admin", created.Role)
	require.Equal(t, tenant.RoleAdmin, roleOf(created.Token))

	out, code = run("tenant token create --role agent acme")
	require.Zero(t, code, out)
	require.Equal(t, tenant.RoleAgent, roleOf(lastWord(out)))

	_, code = run("tenant token create --role root acme")
	require.Equal(t, 2, code, "an unknown role is a usage error")
	_, code = run("tenant token create --role approver nobody")
	require.Equal(t, 1, code)

	out, code = run("tenant token list acme")
	require.Zero(t, code, out)
	for _, role := range []string{"agent", "approver", "admin"} {
		require.Contains(t, out, role)
	}
	require.Contains(t, out, "ROLE")

	out, code = run("tenant token list --format json")
	require.Zero(t, code, out)
	var rows []tokenRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	var roles []string
	for _, r := range rows {
		require.Equal(t, "acme", r.Tenant)
		roles = append(roles, r.Role)
	}
	require.Equal(t, []string{"agent", "approver", "admin", "agent"}, roles)
}

// TestTenantPolicy runs `oncebox tenant policy` as a child process: a tenant's own rule
// is set, listed with its source and version over the installation's stored default,
// and cleared.
func TestTenantPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "ONCEBOX_REFUND_APPROVAL_ABOVE=5000", "ONCEBOX_APPROVAL_POLICY="}
	run := func(args string) (string, int) {
		cmd, out := startChild(t, args, env...)
		text, err := io.ReadAll(out)
		require.NoError(t, err)
		_ = cmd.Wait()
		return string(text), cmd.ProcessState.ExitCode()
	}
	type row struct {
		Tool    string
		Source  string
		Version string
		Rule    struct {
			Mode      string
			Above     map[string]int64
			Approvers int
		}
	}
	list := func() map[string]row {
		out, code := run("tenant policy list acme --format json")
		require.Zero(t, code, out)
		var rows []row
		require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
		m := map[string]row{}
		for _, r := range rows {
			m[r.Tool] = r
		}
		return m
	}
	require.Equal(t, "none", list()["stripe.refund"].Source,
		"the CLI's environment is no policy: only serve's flags seed the installation's stored rules")
	out, code := run("policy set stripe.refund --mode above --above 5000")
	require.Zero(t, code, out)
	before := list()
	require.Equal(t, "default", before["stripe.refund"].Source, "the installation's stored rule is the default refund rule")
	require.Equal(t, map[string]int64{"*": 5000}, before["stripe.refund"].Rule.Above)
	require.Equal(t, "none", before["sendgrid.mail"].Source)

	out, code = run("tenant policy set acme stripe.refund --mode above --above 100 --above usd=2000 --approvers 2")
	require.Zero(t, code, out)
	out, code = run("tenant policy set acme sendgrid.mail --mode always")
	require.Zero(t, code, out)
	after := list()
	require.Equal(t, "tenant", after["stripe.refund"].Source)
	require.Equal(t, map[string]int64{"*": 100, "usd": 2000}, after["stripe.refund"].Rule.Above)
	require.Equal(t, 2, after["stripe.refund"].Rule.Approvers)
	require.Equal(t, "always", after["sendgrid.mail"].Rule.Mode)
	require.NotEqual(t, before["stripe.refund"].Version, after["stripe.refund"].Version)

	_, code = run("tenant policy set acme stripe.refund --mode sometimes")
	require.NotZero(t, code)
	_, code = run("tenant policy set acme No.Such.Tool --mode always")
	require.NotZero(t, code, "a malformed tool name is refused")
	out, code = run("tenant policy set acme no.such.tool --mode always")
	require.Zero(t, code, "a well-formed name may be a tenant's catalog or upstream tool (the CLI warns): %s", out)

	out, code = run("tenant policy clear acme stripe.refund")
	require.Zero(t, code, out)
	require.Equal(t, "default", list()["stripe.refund"].Source)
	out, code = run("tenant policy list acme")
	require.Zero(t, code, out)
	require.Contains(t, out, "SOURCE")
}

// TestTenantRefusesASchemaBehindIt: on a schema missing a migration this binary knows
// (a rolling upgrade before `oncebox migrate`), `oncebox tenant` refuses with the schema
// check's sentence and writes nothing, instead of failing on a column the schema lacks.
func TestTenantRefusesASchemaBehindIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, err := pool.Exec(ctx, `DELETE FROM oncebox_migration WHERE version >= $1`, migrations.LatestExpand())
	require.NoError(t, err)
	for _, args := range []string{"tenant create acme", "tenant policy set acme stripe.refund --mode always"} {
		stdout, stderr, code := runCLI(t, args, "DATABASE_URL="+dbtest.ConnString(t, pool))
		require.NotZero(t, code, stdout)
		require.Contains(t, stderr, "run oncebox migrate first", args)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_tenant`).Scan(&n))
	require.Zero(t, n)
}

// TestTenantAdopt runs `oncebox tenant adopt` as a child process: objects are adopted
// once (again is a no-op), listed with who adopted them, and an unknown tenant or a
// missing id is refused.
func TestTenantAdopt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool)}
	run := func(args string) (string, int) {
		cmd, out := startChild(t, args, env...)
		text, err := io.ReadAll(out)
		require.NoError(t, err)
		_ = cmd.Wait()
		return string(text), cmd.ProcessState.ExitCode()
	}
	out, code := run("tenant adopt --tenant acme stripe pi_1 pi_2")
	require.Zero(t, code, out)
	out, code = run("tenant adopt stripe pi_2 --tenant acme")
	require.Zero(t, code, out)
	out, code = run("tenant adopt --list --format json")
	require.Zero(t, code, out)
	var rows []struct {
		Tenant, Vendor, ID string
		AdoptedBy          string `json:"adopted_by"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 2)
	require.Equal(t, "acme", rows[0].Tenant)
	require.Equal(t, "stripe", rows[0].Vendor)
	require.Equal(t, []string{"pi_1", "pi_2"}, []string{rows[0].ID, rows[1].ID})
	require.Regexp(t, `^cli`, rows[0].AdoptedBy)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oncebox_tenant_object`).Scan(&n))
	require.Equal(t, 2, n)

	_, code = run("tenant adopt --tenant nobody stripe pi_3")
	require.NotZero(t, code)
	_, code = run("tenant adopt --tenant acme stripe")
	require.Equal(t, 2, code)
}
