package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// auditLine is one line of a JSON lines export.
type auditLine struct {
	TenantID int64          `json:"tenant_id"`
	Seq      int64          `json:"seq"`
	Kind     string         `json:"kind"`
	OpID     string         `json:"op_id"`
	Entry    map[string]any `json:"entry"`
}

// exportAudit sends GET /v1/audit?query with token, requires 200 in JSON lines and
// returns the lines and the raw body.
func (e *env) exportAudit(tb testing.TB, token, query string) ([]auditLine, string) {
	tb.Helper()
	rec := e.do(req("GET", "/v1/audit?"+query, token, "", ""))
	require.Equal(tb, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(tb, "application/jsonl", rec.Header().Get("Content-Type"))
	return decodeAuditLines(tb, rec.Body.Bytes()), rec.Body.String()
}

func decodeAuditLines(tb testing.TB, body []byte) []auditLine {
	tb.Helper()
	var lines []auditLine
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l auditLine
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		lines = append(lines, l)
	}
	require.NoError(tb, sc.Err())
	return lines
}

// opIDs returns the distinct op ids of lines, in order.
func opIDs(lines []auditLine) []string {
	var ids []string
	for _, l := range lines {
		if l.OpID != "" && (len(ids) == 0 || ids[len(ids)-1] != l.OpID) {
			ids = append(ids, l.OpID)
		}
	}
	return ids
}

// countingLog counts the queries made of the audit log.
type countingLog struct {
	audit.Querier
	n atomic.Int64
}

func (c *countingLog) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.Querier.Query(ctx, sql, args...)
}

// TestAuditExportNeedsAnAuditorOrAdmin: GET /v1/audit answers an auditor's and an
// admin's token; an agent's, an approver's and an operator's are refused with 403
// forbidden, a sentence naming the role, and no query of the log.
func TestAuditExportNeedsAnAuditorOrAdmin(t *testing.T) {
	t.Parallel()
	log := &countingLog{}
	e := newEnv(t, func(c *api.Config) { log.Querier = c.AuditLog; c.AuditLog = log })
	_, agent := e.newTenant(t, "acme")
	decodeOp(t, e.post(agent, "pay", paymentBody))

	for role, token := range map[tenant.Role]string{
		tenant.RoleAgent:    agent,
		tenant.RoleApprover: e.newToken(t, "acme", tenant.RoleApprover),
		tenant.RoleOperator: e.newToken(t, "acme", tenant.RoleOperator),
	} {
		for _, target := range []string{"/v1/audit", "/v1/audit?format=csv&since=2020-01-01", "/v1/audit?limit=nonsense"} {
			p := requireProblem(t, e.do(req("GET", target, token, "", "")), http.StatusForbidden, "forbidden")
			require.Contains(t, p.Detail, "role "+string(role))
			require.Contains(t, p.Detail, "auditor or admin token")
		}
	}
	requireProblem(t, e.do(req("GET", "/v1/audit", "", "", "")), http.StatusUnauthorized, "unauthorized")
	require.Zero(t, log.n.Load(), "a refused token reads nothing")

	for _, role := range []tenant.Role{tenant.RoleAuditor, tenant.RoleAdmin} {
		lines, _ := e.exportAudit(t, e.newToken(t, "acme", role), "")
		require.Len(t, opIDs(lines), 1, role)
	}
	require.Equal(t, int64(2), log.n.Load())
}

// TestAuditExportTellsARefundsStoryAfterThePurge: a refund asked for by a named
// person's agent token, approved by another person through the API, dispatched and
// confirmed by the vendor, then purged, is whole in the export: who asked, who approved,
// what the vendor answered. No token, and no token's hash, is in it.
func TestAuditExportTellsARefundsStoryAfterThePurge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tn, _ := e.newTenant(t, "acme")
	agent, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleAgent, "ada@acme.test")
	require.NoError(t, err)
	approver, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleApprover, "grace@acme.test")
	require.NoError(t, err)
	auditor, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleAuditor, "ivy@acme.test")
	require.NoError(t, err)
	admin := e.newToken(t, "acme", tenant.RoleAdmin)

	op := decodeOp(t, e.post(agent, "refund-1", largeRefundBody))
	require.Equal(t, "awaiting_approval", op.Status)
	rec := e.do(req("POST", "/v1/ops/refund-1/approve", approver, "", `{"reason": "the customer called"}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	// The dispatch worker's claim and the vendor's confirmation, as it writes them.
	for _, sql := range []string{
		`UPDATE oncebox_op SET status = 'dispatching', attempts = 1 WHERE id = $1`,
		`UPDATE oncebox_op SET status = 'succeeded', vendor_ref = 're_123', result = '{"id": "re_123", "amount": 20000, "currency": "usd"}',
			` + optest.Expired + ` WHERE id = $1`,
	} {
		_, err := e.pool.Exec(ctx, sql, op.ID)
		require.NoError(t, err, sql)
	}
	st, err := e.ob.Purge(ctx, purge.Config{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Ops)
	require.Zero(t, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_op"), "the op was purged")

	for _, token := range []string{auditor, admin} {
		lines, body := e.exportAudit(t, token, "")
		var kinds []string
		var approved, confirmed map[string]any
		var call map[string]any
		for _, l := range lines {
			require.Equal(t, tn.ID, l.TenantID)
			if l.OpID != op.ID {
				continue
			}
			kinds = append(kinds, l.Kind)
			switch {
			case l.Kind == "call":
				call = l.Entry
			case l.Kind == "event" && l.Entry["event"] == "approved":
				approved = l.Entry
			case l.Kind == "status" && l.Entry["to"] == "succeeded":
				confirmed = l.Entry
			}
		}
		require.Equal(t, []string{"call", "status", "event", "approval_requested", "status", "event", "status"}, kinds,
			"asked, held, waits for a person, approved, confirmed")
		require.Equal(t, "ada@acme.test", call["person"], "who asked")
		require.Equal(t, "stripe.refund", call["tool"])
		require.EqualValues(t, 20000, call["amount"])
		require.True(t, strings.HasSuffix(approved["actor"].(string), " grace@acme.test"), "who approved: %v", approved)
		require.Equal(t, "the customer called", lookup(approved, "detail", "reason"))
		require.Equal(t, "re_123", confirmed["vendor_ref"], "what the vendor said")
		require.EqualValues(t, 20000, confirmed["amount"])

		requireNoTokenIn(t, e, body, agent, approver, auditor, admin)
	}
}

// requireNoTokenIn fails when body holds one of the tokens or any stored token hash, in
// hex or base64.
func requireNoTokenIn(t *testing.T, e *env, body string, tokens ...string) {
	t.Helper()
	for _, token := range tokens {
		require.NotContains(t, body, token)
		require.NotContains(t, body, strings.TrimPrefix(token, "obx_"))
	}
	rows, err := e.pool.Query(context.Background(), "SELECT token_hash FROM oncebox_api_token")
	require.NoError(t, err)
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	require.NoError(t, err)
	require.NotEmpty(t, hashes)
	for _, h := range hashes {
		require.NotContains(t, body, hex.EncodeToString(h))
		require.NotContains(t, body, base64.StdEncoding.EncodeToString(h))
	}
	require.NotContains(t, body, "token_hash")
}

// TestAuditExportIsTheTokensTenantOnly: another tenant's auditor sees none of acme's
// entries, and no parameter makes it name acme.
func TestAuditExportIsTheTokensTenantOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acme, agent := e.newTenant(t, "acme")
	acmeOp := decodeOp(t, e.post(agent, "refund", smallRefundBody))
	globex, globexAgent := e.newTenant(t, "globex")
	globexOp := decodeOp(t, e.post(globexAgent, "pay", paymentBody))
	auditor := e.newToken(t, "globex", tenant.RoleAuditor)

	for _, query := range []string{"", "tenant=acme", "tenant_id=" + strconv.FormatInt(acme.ID, 10),
		"tenant=acme&tool=stripe.refund", "since=2000-01-01&person=&tenant=" + strconv.FormatInt(acme.ID, 10)} {
		lines, body := e.exportAudit(t, auditor, query)
		for _, l := range lines {
			require.Equal(t, globex.ID, l.TenantID, query)
		}
		require.NotContains(t, body, acmeOp.ID, query)
		require.NotContains(t, body, `"acme"`, query)
		if !strings.Contains(query, "tool=") {
			require.Equal(t, []string{globexOp.ID}, opIDs(lines), query)
		}
	}
}

// TestAuditExportFilters: each filter parameter reaches the export.
func TestAuditExportFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.newTenant(t, "acme")
	agent, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleAgent, "ada@acme.test")
	require.NoError(t, err)
	approver, err := e.tenants.NewTokenFor(ctx, "acme", tenant.RoleApprover, "grace@acme.test")
	require.NoError(t, err)
	auditor := e.newToken(t, "acme", tenant.RoleAuditor)
	refund := decodeOp(t, e.post(agent, "refund", largeRefundBody)) // 20000, approved by grace
	require.Equal(t, http.StatusOK, e.do(req("POST", "/v1/ops/refund/approve", approver, "", "")).Code)
	payment := decodeOp(t, e.post(agent, "pay", paymentBody)) // 1000, pending

	all, _ := e.exportAudit(t, auditor, "")
	require.Equal(t, []string{refund.ID, payment.ID}, opIDs(all))
	for query, want := range map[string][]string{
		"tool=stripe.payment_intent":                  {payment.ID},
		"person=grace@acme.test":                      {refund.ID},
		"person=ada@acme.test":                        {refund.ID, payment.ID},
		"outcome=awaiting_approval":                   nil,
		"outcome=pending&tool=stripe.refund":          {refund.ID},
		"min_amount=5000":                             {refund.ID},
		"max_amount=5000":                             {payment.ID},
		"min_amount=1000&max_amount=1000":             {payment.ID},
		"since=2999-01-01":                            nil,
		"until=2000-01-01":                            nil,
		"since=2000-01-01T00:00:00Z&until=2999-01-01": {refund.ID, payment.ID},
	} {
		lines, _ := e.exportAudit(t, auditor, query)
		require.Equal(t, want, opIDs(lines), query)
	}
	lines, _ := e.exportAudit(t, auditor, "limit=2")
	require.Len(t, lines, 2)
	require.Equal(t, all[:2], lines)
	lines, _ = e.exportAudit(t, auditor, "")
	require.Greater(t, len(lines), len(opIDs(lines)), "without a filter, settings come too")
}

// TestAuditExportFormats: format=csv, or Accept: text/csv, is CSV with its header;
// jsonl is the default, and format wins over Accept. HEAD answers the headers alone.
func TestAuditExportFormats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, agent := e.newTenant(t, "acme")
	op := decodeOp(t, e.post(agent, "pay", paymentBody))
	auditor := e.newToken(t, "acme", tenant.RoleAuditor)
	jsonl, _ := e.exportAudit(t, auditor, "")

	csvReq := func(target, accept string) *httptest.ResponseRecorder {
		r := req("GET", target, auditor, "", "")
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		return e.do(r)
	}
	for _, rec := range []*httptest.ResponseRecorder{
		csvReq("/v1/audit?format=csv", ""),
		csvReq("/v1/audit", "text/csv"),
		csvReq("/v1/audit", "text/html, text/csv;q=0.9, application/jsonl;q=0.5"),
	} {
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "text/csv; charset=utf-8", rec.Header().Get("Content-Type"))
		rows := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
		require.Equal(t, "seq,tx,at,kind,op_id,fingerprint,entry,prev_hash,hash", rows[0])
		require.Len(t, rows, len(jsonl)+1)
		require.Contains(t, rec.Body.String(), op.ID)
	}
	rec := csvReq("/v1/audit?format=csv&since=2999-01-01", "")
	require.Equal(t, "seq,tx,at,kind,op_id,fingerprint,entry,prev_hash,hash\n", rec.Body.String(), "an empty export has its header")

	for _, accept := range []string{"", "*/*", "application/json", "application/jsonl", "application/jsonl, text/csv"} {
		rec := csvReq("/v1/audit", accept)
		require.Equal(t, "application/jsonl", rec.Header().Get("Content-Type"), accept)
		require.Len(t, decodeAuditLines(t, rec.Body.Bytes()), len(jsonl))
	}
	rec = csvReq("/v1/audit?format=jsonl", "text/csv")
	require.Equal(t, "application/jsonl", rec.Header().Get("Content-Type"))

	rec = e.do(req("HEAD", "/v1/audit?format=csv", auditor, "", ""))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/csv; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Zero(t, rec.Body.Len())
}

// TestAuditExportRefusesBadParameters: each bad value is refused with 400
// invalid-request naming the parameter, before anything is read.
func TestAuditExportRefusesBadParameters(t *testing.T) {
	t.Parallel()
	log := &countingLog{}
	e := newEnv(t, func(c *api.Config) { log.Querier = c.AuditLog; c.AuditLog = log })
	e.newTenant(t, "acme")
	auditor := e.newToken(t, "acme", tenant.RoleAuditor)
	for query, field := range map[string]string{
		"since=yesterday":                    "since",
		"since=2026-01-01T00:00:00":          "since",
		"until=2026-13-01":                   "until",
		"since=2026-02-01&until=2026-01-01":  "until",
		"since=2026-02-01&until=2026-02-01":  "until",
		"tool=a&tool=b":                      "tool",
		"tool=refund%00":                     "tool",
		"person=" + strings.Repeat("p", 256): "person",
		"person=%ff":                         "person",
		"outcome=done":                       "outcome",
		"min_amount=-1":                      "min_amount",
		"max_amount=25.00":                   "max_amount",
		"min_amount=10&max_amount=9":         "max_amount",
		"limit=0":                            "limit",
		"limit=100001":                       "limit",
		"limit=ten":                          "limit",
		"format=xml":                         "format",
		"format=":                            "",
		"tool=%zz":                           "query",
		"a=b;c=d":                            "query",
	} {
		rec := e.do(req("GET", "/v1/audit?"+query, auditor, "", ""))
		if field == "" { // An empty format is no format.
			require.Equal(t, http.StatusOK, rec.Code, query)
			continue
		}
		p := requireProblem(t, rec, http.StatusBadRequest, "invalid-request")
		require.Equal(t, field, p.Field, query)
		if field != "query" {
			require.Contains(t, p.Detail, field, query)
		}
	}
	require.Equal(t, int64(1), log.n.Load(), "only the request with an empty format read the log")
}

// failingLog answers a query's first rows, then fails it.
type failingLog struct {
	audit.Querier
	after int
}

func (f failingLog) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := f.Querier.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return &failingRows{Rows: rows, left: f.after}, nil
}

type failingRows struct {
	pgx.Rows
	left   int
	failed bool
}

func (r *failingRows) Next() bool {
	if r.left == 0 {
		r.failed = true
		return false
	}
	r.left--
	return r.Rows.Next()
}

func (r *failingRows) Err() error {
	if r.failed {
		return errors.New("the disk caught fire")
	}
	return r.Rows.Err()
}

// lockedBuffer is a log sink the server's goroutines may write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAuditExportFailure: a failure before the first byte is a problem document; one
// after it cuts the stream (the client sees it truncated, not whole) and is logged.
func TestAuditExportFailure(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	after := &atomic.Int64{}
	e := newEnv(t, func(c *api.Config) {
		c.AuditLog = lateFailingLog{Querier: c.AuditLog, after: after}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	e.newTenant(t, "acme")
	auditor := e.newToken(t, "acme", tenant.RoleAuditor)
	// 600 settings entries: more than one flush's worth.
	_, err := e.pool.Exec(context.Background(), `INSERT INTO oncebox_api_token (tenant_id, token_hash, prefix, role)
		SELECT (SELECT id FROM oncebox_tenant WHERE name = 'acme'), sha256(i::text::bytea), 'obx_x', 'agent'
		FROM generate_series(1, 600) AS i`)
	require.NoError(t, err)

	after.Store(0)
	requireProblem(t, e.do(req("GET", "/v1/audit", auditor, "", "")), http.StatusInternalServerError, "internal")
	require.Contains(t, logs.String(), "the disk caught fire")

	after.Store(500)
	ts := httptest.NewServer(e.srv)
	t.Cleanup(ts.Close)
	r, err := http.NewRequest("GET", ts.URL+"/v1/audit", nil)
	require.NoError(t, err)
	r.Header.Set("Authorization", "Bearer "+auditor)
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the stream is cut, not ended")
	require.Greater(t, bytes.Count(body, []byte("\n")), 255, "the entries before the failure went out")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "audit export failed after its first byte") },
		5*time.Second, 10*time.Millisecond)
}

// lateFailingLog is a failingLog whose row count is read at each query.
type lateFailingLog struct {
	audit.Querier
	after *atomic.Int64
}

func (f lateFailingLog) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return failingLog{Querier: f.Querier, after: int(f.after.Load())}.Query(ctx, sql, args...)
}

// TestAuditExportDatabaseOutageIs503: the log cannot be read before the first byte:
// 503 store-unavailable with Retry-After, as every route.
func TestAuditExportDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	e, _, _ := outageEnv(t, false)
	auditor := e.newToken(t, "acme", tenant.RoleAuditor)
	rec := e.do(req("GET", "/v1/audit", auditor, "", ""))
	requireProblem(t, rec, http.StatusServiceUnavailable, "store-unavailable")
	require.Equal(t, "5", rec.Header().Get("Retry-After"))
}

// blockingLog holds each query until release is closed, telling started when it begins.
type blockingLog struct {
	audit.Querier
	started chan struct{}
	release chan struct{}
}

func (b blockingLog) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b.started <- struct{}{}
	<-b.release
	return b.Querier.Query(ctx, sql, args...)
}

// TestAuditExportsAreCapped: past MaxAuditExports streaming at once, an export is
// answered 429 too-many-exports with Retry-After, and never reaches the database; once
// one ends, the next is served.
func TestAuditExportsAreCapped(t *testing.T) {
	t.Parallel()
	log := blockingLog{started: make(chan struct{}, 4), release: make(chan struct{})}
	e := newEnv(t, func(c *api.Config) {
		log.Querier = c.AuditLog
		c.AuditLog = log
		c.AuditExports = audit.NewSlots(1)
	})
	e.newTenant(t, "acme")
	auditor := e.newToken(t, "acme", tenant.RoleAuditor)

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- e.do(req("GET", "/v1/audit", auditor, "", "")) }()
	<-log.started
	rec := e.do(req("GET", "/v1/audit", auditor, "", ""))
	requireProblem(t, rec, http.StatusTooManyRequests, "too-many-exports")
	require.Equal(t, "5", rec.Header().Get("Retry-After"))
	require.Empty(t, log.started, "the refused export read nothing")

	close(log.release)
	require.Equal(t, http.StatusOK, (<-first).Code)
	rec = e.do(req("GET", "/v1/audit", auditor, "", ""))
	require.Equal(t, http.StatusOK, rec.Code, "the slot is free again")
}
