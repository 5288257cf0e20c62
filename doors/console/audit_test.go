package console_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"
)

// opIDOf is the id of the tenant's op stored under key.
func (e *env) opIDOf(t *testing.T, key string) string {
	t.Helper()
	var id string
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT id::text FROM oncebox_op WHERE tenant_id = $1 AND idempotency_key = $2",
		e.tenant.ID, key).Scan(&id))
	return id
}

// auditOps are the op ids the Audit page's table lists, once each, in its order.
func auditOps(page string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`data-op="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if m[1] != "" && !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// TestConsoleAuditRoles: an agent cannot sign in; an approver is refused the Audit page
// and its downloads and has no link to it; an auditor signs in, lands on the Audit page,
// and is refused every page and every post that decides (the waiting refund still waits,
// Stripe holds no refund); an admin opens the Audit page, with links to the ops' pages.
func TestConsoleAuditRoles(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	auditor, err := e.srv.Tenants().NewTokenFor(ctx, "acme", tenant.RoleAuditor, "ida@acme.test")
	require.NoError(t, err)
	admin, err := e.srv.Tenants().NewTokenWithRole(ctx, "acme", tenant.RoleAdmin)
	require.NoError(t, err)
	refundID := e.opIDOf(t, e.refundKey)

	resp, page := newBrowser(t, e.base).signIn(e.agent)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, page, "This token has the role agent")

	ap := newBrowser(t, e.base)
	resp, page = ap.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.NotContains(t, page, `href="/console/audit"`, "an approver's navigation has no Audit page")
	for _, path := range []string{"/console/audit", "/console/audit.csv", "/console/audit.jsonl?tool=stripe.refund"} {
		resp, page = ap.get(path)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
		require.Equal(t, "forbidden", reasonOf(page), path)
		require.Contains(t, page, "this page needs an auditor or admin token", path)
		require.NotContains(t, page, refundID, path)
	}

	au := newBrowser(t, e.base)
	resp, page = au.signIn(auditor)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, `id="audit"`, "an auditor lands on the Audit page")
	require.Contains(t, page, refundID)
	require.NotContains(t, page, "/console/lookup?q=", "an auditor gets no link to pages it may not open")
	require.NotContains(t, page, `href="/console/approvals"`)
	csrf := csrfOf(t, page)
	resp, _ = au.get("/console/")
	require.Equal(t, "/console/audit", resp.Header.Get("Location"))
	for _, path := range []string{"/console/overview", "/console/approvals", "/console/approvals?op=" + refundID, "/console/review",
		"/console/lookup?q=" + e.refundKey, "/console/finance", "/console/finance.csv", "/console/budgets", "/console/vendors"} {
		resp, page = au.get(path)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
		require.Equal(t, "forbidden", reasonOf(page), path)
		require.Contains(t, page, "role auditor; this page needs an approver or admin token. Your role reads the Audit page.", path)
		require.NotContains(t, page, `name="decision"`, path)
		require.Contains(t, page, `href="/console/audit"`, "the refusal keeps the auditor's navigation")
	}
	events := e.count(t, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1", refundID)
	for _, post := range []struct {
		path string
		form url.Values
	}{
		{"/console/approvals", url.Values{"key": {e.refundKey}, "decision": {"approve"}, "reason": {"ok"}}},
		{"/console/approvals", url.Values{"key": {e.refundKey}, "decision": {"reject"}, "reason": {"no"}, "confirm": {"yes"}}},
		{"/console/review", url.Values{"key": {e.refundKey}, "outcome": {"resend"}, "reason": {"checked"}}},
		{"/console/review", url.Values{"key": {e.refundKey}, "outcome": {"succeeded"}, "reason": {"checked"}, "vendor_ref": {"re_1"}}},
	} {
		post.form.Set("csrf", csrf)
		resp, page = au.post(post.path, post.form)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, post)
		require.Equal(t, "forbidden", reasonOf(page), post)
	}
	var status string
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT status FROM oncebox_op WHERE id = $1", refundID).Scan(&status))
	require.Equal(t, "awaiting_approval", status, "no post of the auditor decided")
	require.Equal(t, events, e.count(t, "SELECT count(*) FROM oncebox_op_event WHERE op_id = $1", refundID), "no event recorded")
	require.Empty(t, e.stripe.Refunds())
	resp, _ = au.post("/console/signout", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "an auditor signs out")

	ad := newBrowser(t, e.base)
	resp, _ = ad.signIn(admin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, page = ad.get("/console/audit")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, `<a href="/console/lookup?q=`+refundID+`" title=`, "an admin's rows link to the op's page")
	require.Contains(t, page, `href="/console/audit" aria-current="page"`)
	require.Contains(t, page, `href="/console/approvals"`)
	// The server's sealer seals the entries; the page says so.
	require.Eventually(t, func() bool {
		_, page = ad.get("/console/audit?tool=stripe.refund")
		return strings.Count(page, `>sealed</td>`) == strings.Count(page, "data-seq=") && strings.Contains(page, "data-seq=")
	}, 30*time.Second, 200*time.Millisecond, "every entry shows sealed once sealed")
	require.Zero(t, e.count(t, "SELECT count(*) FROM oncebox_audit WHERE op_id = $1 AND hash IS NULL", refundID))
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// TestConsoleAuditFiltersAndDownloads: the filters reach the list (tool, person who
// decided, outcome, amount); bad values answer 400 with the sentence beside the form;
// the downloads carry the filters, as CSV with its header and as JSON lines, and never
// show another tenant's entries; more entries than the page lists are said.
func TestConsoleAuditFiltersAndDownloads(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	store := e.srv.Tenants()
	auditor, err := store.NewTokenFor(ctx, "acme", tenant.RoleAuditor, "ida@acme.test")
	require.NoError(t, err)
	grace, err := store.NewTokenFor(ctx, "acme", tenant.RoleApprover, "grace@acme.test")
	require.NoError(t, err)
	_, _, err = store.Create(ctx, "globex")
	require.NoError(t, err)
	var other string
	require.NoError(t, e.pool.QueryRow(ctx, `INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key, expires_at)
		SELECT id, 'globex-refund', 'stripe.refund', 'stripe', '{"amount": 2500, "currency": "usd"}', '\x00', 'pending', 'ob_globex', now() + interval '1 day'
		FROM oncebox_tenant WHERE name = 'globex' RETURNING id::text`).Scan(&other))
	refundID, payID := e.opIDOf(t, e.refundKey), e.opIDOf(t, "pay-order-1001")

	// grace approves the refund.
	g := newBrowser(t, e.base)
	g.signIn(grace)
	_, page := g.get("/console/approvals")
	resp, _ := g.post("/console/approvals", url.Values{"csrf": {csrfOf(t, page)}, "key": {e.refundKey}, "decision": {"approve"}, "reason": {"ok"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Eventually(t, func() bool {
		return e.count(t, "SELECT count(*) FROM oncebox_op WHERE id = $1 AND status = 'succeeded'", refundID) == 1
	}, 20*time.Second, 100*time.Millisecond)

	b := newBrowser(t, e.base)
	resp, page = b.signIn(auditor)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Equal(t, []string{payID, refundID}, auditOps(page), "no filter: the tenant's ops, not globex's")
	require.Contains(t, page, `data-kind="setting"`, "no filter: settings too")
	for q, want := range map[string][]string{
		"tool=stripe.refund":                        {refundID},
		"person=grace%40acme.test":                  {refundID},
		"person=nobody%40acme.test":                 nil,
		"outcome=succeeded&tool=stripe.refund":      {refundID},
		"outcome=awaiting_approval":                 nil,
		"min_amount=20000":                          {payID},
		"min_amount=2500&max_amount=2500":           {refundID},
		"since=2000-01-01&until=2000-01-02":         nil,
		"until=" + time.Now().Format(time.DateOnly): {payID, refundID},
	} {
		resp, page = b.get("/console/audit?" + q)
		require.Equal(t, http.StatusOK, resp.StatusCode, q)
		require.Equal(t, want, auditOps(page), q)
		if want == nil {
			require.Contains(t, page, "No entry matches these filters in this window.", q)
		}
	}
	// The refund's story, by person: the call, the approval by grace, its success with
	// the vendor's object and amount.
	_, page = b.get("/console/audit?person=grace%40acme.test")
	require.Contains(t, page, "event: approved")
	require.Contains(t, page, "grace@acme.test (approver)")
	require.Regexp(t, `re_\w+</td>`+cellTag+`\$25\.00 USD`, page)
	require.Regexp(t, `<td class="person"[^>]*>agent token \d+</td>`, page, "the asking token, by role, where it names no person")

	for q, sentence := range map[string]string{
		"since=yesterday":                   `The start &#34;yesterday&#34; is not a date`,
		"since=2026-02-01&until=2026-01-01": "is not before the end",
		"min_amount=20.00":                  `The minimum amount &#34;20.00&#34; is not a whole number of minor units`,
		"max_amount=-1":                     "is not a whole number of minor units",
		"min_amount=3&max_amount=2":         "The minimum amount 3 is above the maximum 2.",
		"outcome=done":                      "is not an op status",
		"person=a%00b":                      "The person filter must be at most 255 characters of text.",
		"tool=" + strings.Repeat("t", 300):  "The tool filter must be at most 255 characters of text.",
	} {
		resp, page = b.get("/console/audit?" + q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Equal(t, "invalid-request", reasonOf(page), q)
		require.Contains(t, page, sentence, q)
		require.Contains(t, page, `id="audit-filters"`, "the form stays beside the error")
		resp, page = b.get("/console/audit.csv?" + q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Contains(t, page, sentence, q)
	}

	// The download links carry the page's filters.
	_, page = b.get("/console/audit?tool=stripe.refund")
	link := func(id string) string {
		m := regexp.MustCompile(`id="` + id + `" href="([^"]+)"`).FindStringSubmatch(page)
		require.NotNil(t, m, id)
		return html.UnescapeString(m[1])
	}
	csvURL := link("audit-csv")
	u, err := url.Parse(csvURL)
	require.NoError(t, err)
	require.Equal(t, "/console/audit.csv", u.Path)
	require.Equal(t, "stripe.refund", u.Query().Get("tool"))
	resp, body := b.get(csvURL)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Regexp(t, `^attachment; filename="oncebox-audit-\d{8}T\d{6}Z-\d{8}T\d{6}Z\.csv"$`, resp.Header.Get("Content-Disposition"))
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"seq", "tx", "at", "kind", "op_id", "fingerprint", "entry", "prev_hash", "hash"}, rows[0])
	require.Greater(t, len(rows), 3)
	for _, r := range rows[1:] {
		require.Equal(t, refundID, r[4], "the tool filter reaches the CSV")
	}

	resp, body = b.get(link("audit-jsonl"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "application/jsonl", resp.Header.Get("Content-Type"))
	require.Contains(t, resp.Header.Get("Content-Disposition"), ".jsonl\"")
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	require.Equal(t, len(rows)-1, len(lines), "the same entries in both formats")
	for _, l := range lines {
		var entry struct {
			TenantID int64  `json:"tenant_id"`
			OpID     string `json:"op_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &entry), l)
		require.Equal(t, e.tenant.ID, entry.TenantID)
		require.Equal(t, refundID, entry.OpID)
	}
	for _, path := range []string{"/console/audit.csv", "/console/audit.jsonl", "/console/audit?tool=stripe.refund"} {
		_, body = b.get(path)
		require.NotContains(t, body, other, "another tenant's entries never appear")
		require.NotContains(t, body, "globex-refund")
	}

	// More entries than the page lists: it says so and lists the first 500.
	_, err = e.pool.Exec(ctx, `INSERT INTO oncebox_audit (tenant_id, kind, e) SELECT $1, 'setting', '{"table": "bulk"}' FROM generate_series(1, 600)`, e.tenant.ID)
	require.NoError(t, err)
	resp, page = b.get("/console/audit")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "More than 500 entries match")
	require.Equal(t, 500, strings.Count(page, "data-seq="))
	resp, body = b.get("/console/audit.csv")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Greater(t, strings.Count(body, "\n"), 600, "the download holds every entry")
}
