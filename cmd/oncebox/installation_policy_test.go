package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// startServe starts `oncebox serve` (API role only) with env and waits for /healthz.
func startServe(t *testing.T, env ...string) string {
	t.Helper()
	addr := freeAddr(t)
	startChild(t, "serve", append([]string{"ONCEBOX_ROLES=api", "ONCEBOX_ADDR=" + addr, "STRIPE_API_KEY=", "SENDGRID_API_KEY=",
		`ONCEBOX_WEBHOOK_TARGETS={"crm": {"base_url": "http://127.0.0.1:1"}}`}, env...)...)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "serve on %s", addr)
	return addr
}

// postHook sends a webhook op to the serve at addr and returns its status.
func postHook(t *testing.T, addr, token, key string) string {
	t.Helper()
	code, status := sendOp(t, addr, token, key, `{"tool": "webhook.post", "args": {"target": "crm", "path": "/hook", "body": {"n": 1}}}`)
	require.Equal(t, http.StatusAccepted, code, status)
	return status
}

// sendOp sends an op to the serve at addr and returns the answer's status code and the
// op's status.
func sendOp(t *testing.T, addr, token, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/ops", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var answer struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer.Status
}

// TestServesAndTheCLIReadTheStoredPolicy (issue 43, item 2): two serve processes started
// with different approval policies in their environment, and the CLI started with none,
// agree on the one rule stored in the database: the first serve's flags seeded it, the
// second's ops wait under it too, and `oncebox approve` without the policy in its
// environment approves them (on 3bd5e55 it refused: "the policy in force is none").
// `oncebox policy set` then changes the rule for every process at once.
func TestServesAndTheCLIReadTheStoredPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, agent, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	db := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	seeded := startServe(t, db, `ONCEBOX_APPROVAL_POLICY={"webhook.post": {"mode": "always"}}`)
	other := startServe(t, db, "ONCEBOX_APPROVAL_POLICY=", "ONCEBOX_REFUND_APPROVAL_ABOVE=")

	require.Equal(t, "awaiting_approval", postHook(t, seeded, agent, "hook-1"))
	require.Equal(t, "awaiting_approval", postHook(t, other, agent, "hook-2"),
		"the second serve has no policy in its environment: it applies the stored one")

	cli := []string{db, "ONCEBOX_APPROVAL_POLICY=", "ONCEBOX_REFUND_APPROVAL_ABOVE=",
		`ONCEBOX_WEBHOOK_TARGETS={"crm": {"base_url": "http://127.0.0.1:1"}}`}
	out, errOut, code := runCLI(t, "tenant token create --role approver acme", cli...)
	require.Zero(t, code, out+errOut)
	approver := strings.TrimSpace(out)
	for _, key := range []string{"hook-1", "hook-2"} {
		out, errOut, code := runCLI(t, "approve --tenant acme --token "+approver+" --reason ok "+key, cli...)
		require.Zero(t, code, "the CLI without the policy in its environment approves %s: %s%s", key, out, errOut)
		require.Contains(t, out, "pending")
	}

	out, errOut, code = runCLI(t, "policy show --format json", cli...)
	require.Zero(t, code, out+errOut)
	var shown struct {
		Rules []struct {
			Tool      string
			Rule      struct{ Mode string }
			UpdatedBy string `json:"updated_by"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.Len(t, shown.Rules, 1, out)
	require.Equal(t, "webhook.post", shown.Rules[0].Tool)
	require.Equal(t, "always", shown.Rules[0].Rule.Mode)
	require.Contains(t, shown.Rules[0].UpdatedBy, "seed: flags")

	out, errOut, code = runCLI(t, "policy set webhook.post --mode never", cli...)
	require.Zero(t, code, out+errOut)
	require.Equal(t, "pending", postHook(t, seeded, agent, "hook-3"), "the stored rule, not the serve's flags, is in force")
	require.Equal(t, "pending", postHook(t, other, agent, "hook-4"))

	_, errOut, code = runCLI(t, "policy set webhook.post --mode sometimes", cli...)
	require.NotZero(t, code)
	require.Contains(t, errOut, "want never, always or above")
	_, errOut, code = runCLI(t, "policy clear no.rule.here", cli...)
	require.NotZero(t, code)
	require.Contains(t, errOut, "stores no approval")
}

// TestTenantBudgetOfACatalogTool (issue 43, item 3): `oncebox tenant budget set --tool
// ledger.post` names a tool of the tenant's own catalog, which the CLI does not load: it
// is accepted with a warning (on 3bd5e55 it was refused, "unknown tool"), and the serve
// that loads the catalog enforces it. A malformed tool name is refused.
func TestTenantBudgetOfACatalogTool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	_, agent, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte(`
targets:
  ledger: {base_url: "http://127.0.0.1:1"}
tools:
  ledger.post:
    description: Post an entry to the ledger.
    class: write
    target: ledger
    path: /entries
    input_schema: {type: object, properties: {memo: {type: string}}, required: [memo]}
`), 0o600))
	db := "DATABASE_URL=" + dbtest.ConnString(t, pool)
	addr := startServe(t, db, "ONCEBOX_TENANT_CATALOGS="+dir, "ONCEBOX_TENANT_EGRESS_ALLOW=127.0.0.1/32")

	cli := []string{db, "ONCEBOX_TOOLS_FILE=", "ONCEBOX_TENANT_CATALOGS="}
	out, errOut, code := runCLI(t, "tenant budget set --tenant acme ledger --window 24h --count 1 --tool ledger.post --on-exceed refuse", cli...)
	require.Zero(t, code, out+errOut)
	require.Contains(t, errOut, "warning: ledger.post is neither a built-in tool", "the CLI says it could not check the name")
	_, errOut, code = runCLI(t, "tenant budget set --tenant acme bad --window 24h --count 1 --tool Ledger.Post", cli...)
	require.NotZero(t, code)
	require.Contains(t, errOut, "is not a tool name")

	entry := func(key string) int {
		code, status := sendOp(t, addr, agent, key, `{"tool": "ledger.post", "args": {"memo": "`+key+`"}}`)
		t.Logf("%s: %d %s", key, code, status)
		return code
	}
	require.Equal(t, http.StatusAccepted, entry("entry-1"))
	require.Equal(t, http.StatusTooManyRequests, entry("entry-2"), "the budget of 1 ledger.post a day is enforced")
	require.Equal(t, http.StatusAccepted, func() int {
		code, _ := sendOp(t, addr, agent, "hook-1", `{"tool": "webhook.post", "args": {"target": "crm", "path": "/hook", "body": {}}}`)
		return code
	}(), "another tool is not counted")
	require.Equal(t, 2, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op"))
}
