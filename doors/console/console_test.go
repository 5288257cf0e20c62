package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/console"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// env is a running server with a fake Stripe, a tenant, its agent token and an
// approver token, and a refund that waits for approval.
type env struct {
	base      string
	stripe    *fakestripe.Server
	srv       *server.Server
	pool      *pgxpool.Pool
	tenant    *tenant.Tenant
	agent     string
	approver  string
	refundKey string
	// stripeGets counts the GETs the fake Stripe received (its list and search calls).
	stripeGets *atomic.Int64
}

func start(t testing.TB) *env {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the server's configuration changed by set (nil: none).
func startWith(t testing.TB, set func(*server.Config)) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.Schema(t)
	fake := fakestripe.New(fakestripe.Config{})
	gets := &atomic.Int64{}
	stripe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(stripe.Close)
	cfg := server.Defaults()
	cfg.DatabaseURL = dbtest.ConnString(t, pool)
	cfg.Addr = "127.0.0.1:0"
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_console", stripe.URL
	cfg.RefundApprovalAbove = 1000
	if set != nil {
		set(&cfg)
	}
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	store := tenant.NewStore(pool)
	tn, agent, err := store.Create(ctx, "acme")
	require.NoError(t, err)
	approver, err := store.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	e := &env{base: "http://" + addr.String(), stripe: fake, srv: srv, pool: pool, tenant: tn, agent: agent, approver: approver, refundKey: "refund-order-1001",
		stripeGets: gets}

	pay := e.api(t, "pay-order-1001", `{"tool":"stripe.payment_intent","args":{"amount":29000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	require.Equal(t, "succeeded", pay["status"], pay)
	refund := e.api(t, e.refundKey, `{"tool":"stripe.refund","args":{"payment_intent":"`+pay["vendor_ref"].(string)+`","amount":2500}}`)
	require.Equal(t, "awaiting_approval", refund["status"], refund)
	return e
}

// api records an op with the agent token and returns its JSON once settled.
func (e *env) api(t testing.TB, key, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.base+"/v1/ops?wait=10s", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.agent)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var op map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&op))
	return op
}

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	t    testing.TB
	base string
	c    *http.Client
}

func newBrowser(t testing.TB, base string) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (b *browser) post(path string, form url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t testing.TB, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "the page has a CSRF field: %s", page)
	return m[1]
}

// signIn signs in with token and returns the overview page.
func (b *browser) signIn(token string) (*http.Response, string) {
	b.t.Helper()
	_, page := b.get("/console/signin")
	resp, body := b.post("/console/signin", url.Values{"csrf": {csrfOf(b.t, page)}, "token": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		return resp, body
	}
	return b.get(resp.Header.Get("Location"))
}

func reasonOf(page string) string {
	m := regexp.MustCompile(`data-reason="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestConsoleSignInAndApprove: an approver signs in, approves the waiting refund from
// the queue, finds it succeeded by its key, downloads the finance CSV (the report's
// own CSV) and signs out. The fake Stripe holds exactly one refund.
func TestConsoleSignInAndApprove(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := newBrowser(t, e.base)

	// The console's pages need a session.
	resp, _ := b.get("/console/approvals")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/console/signin"))

	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "waiting for approval")
	var session *http.Cookie
	u, _ := url.Parse(e.base + "/console/")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "oncebox_console" {
			session = c
		}
	}
	require.NotNil(t, session, "a session cookie is set")

	resp, page = b.get("/console/approvals")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, e.refundKey)
	require.Contains(t, page, "$25.00 USD of a $290.00 USD payment, $0.00 USD refunded so far")
	csrf := csrfOf(t, page)
	approve := url.Values{"csrf": {csrf}, "key": {e.refundKey}, "decision": {"approve"}, "reason": {"customer called"}}

	// Without the CSRF token, or from another site, the approval is refused.
	noCSRF := url.Values{"key": {e.refundKey}, "decision": {"approve"}}
	resp, page = b.post("/console/approvals", noCSRF)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "csrf", reasonOf(page))
	resp, page = b.post("/console/approvals", approve, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "cross-origin", reasonOf(page))
	require.Empty(t, e.stripe.Refunds(), "a refused approval sends nothing")

	resp, _ = b.post("/console/approvals", approve)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = b.get(resp.Header.Get("Location"))
	require.Contains(t, page, "Approved: the op "+e.refundKey)

	require.Eventually(t, func() bool {
		_, page = b.get("/console/lookup?q=" + e.refundKey)
		return strings.Contains(page, `id="op-status" data-status="succeeded">`)
	}, 20*time.Second, 100*time.Millisecond, "the approved refund succeeds")
	require.Regexp(t, `approved it: now waiting to be sent.*by approver token \d+`, page, "the timeline says who approved")
	require.Len(t, e.stripe.Refunds(), 1)

	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	// The CSV is the one the finance page's own Download link names, for the page's window.
	_, page = b.get("/console/finance?since=" + url.QueryEscape(since.Format(time.RFC3339)) + "&until=" + url.QueryEscape(until.Format(time.RFC3339)))
	// The refund's op amount is in its payment's currency, as the vendor's is.
	require.Regexp(t, regexp.QuoteMeta(e.refundKey)+strings.ReplaceAll(`</a></td><td>stripe.refund</td><td>succeeded</td><td>re_\w+</td><td>\$25\.00 USD</td><td>\$25\.00 USD</td>`, "<td>", cellTag), page)
	require.Regexp(t, cellTag+`\$290\.00 USD</td>`, page, "the payment's total")
	link := regexp.MustCompile(`id="csv" href="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, link, "the finance page links its CSV")
	csvURL := html.UnescapeString(link[1])
	linked, err := url.Parse(csvURL)
	require.NoError(t, err)
	require.Equal(t, "/console/finance.csv", linked.Path)
	require.Equal(t, url.Values{"since": {since.Format(time.RFC3339)}, "until": {until.Format(time.RFC3339)}}, linked.Query())
	resp, csv := b.get(csvURL)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	rep, err := e.srv.Report(context.Background(), since, until, e.tenant.ID)
	require.NoError(t, err)
	var want bytes.Buffer
	require.NoError(t, rep.WriteCSV(&want))
	require.Equal(t, want.String(), csv)
	require.Contains(t, csv, "matched")
	require.Regexp(t, `(?m)^matched,\d+,[0-9a-f-]+,`+regexp.QuoteMeta(e.refundKey)+`,stripe\.refund,.*,usd,25\.00,usd,25\.00,usd,,$`, csv,
		"the refund's line has decimal amounts and names its currency")
	resp, totals := b.get(strings.Replace(csvURL, "finance.csv", "finance-totals.csv", 1))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, totals, "\nnet,,,usd,,265.00\n", "the refund netted against the payment, in its own file")

	// What Postgres cannot compare is refused with 400, not a 500.
	for _, q := range []string{"a\x00b", "\xff\xfe", strings.Repeat("k", 300)} {
		resp, page = b.get("/console/lookup?q=" + url.QueryEscape(q))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Equal(t, "invalid-request", reasonOf(page))
	}

	_, page = b.get("/console/overview")
	resp, _ = b.post("/console/signout", url.Values{"csrf": {csrfOf(t, page)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	// The old cookie no longer opens anything, even when replayed.
	replay := newBrowser(t, e.base)
	replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: "oncebox_console", Value: session.Value}})
	resp, _ = replay.get("/console/approvals")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a signed-out session is gone")
}

// TestConsoleSignInRefusals: an agent token, an unknown token and a form without its
// CSRF token cannot sign in; the cookie's attributes are the safe ones.
func TestConsoleSignInRefusals(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.agent)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "forbidden", reasonOf(page))
	require.Contains(t, page, "role agent")
	resp, page = b.signIn("obx_unknown")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "unauthorized", reasonOf(page))
	resp, page = b.post("/console/signin", url.Values{"token": {e.approver}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "csrf", reasonOf(page))

	_, page = b.get("/console/signin")
	resp, _ = b.post("/console/signin", url.Values{"csrf": {csrfOf(t, page)}, "token": {e.approver}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var raw string
	for _, c := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "oncebox_console=") {
			raw = c
		}
	}
	require.Contains(t, raw, "HttpOnly")
	require.Contains(t, raw, "SameSite=Strict")
	require.Contains(t, raw, "Path=/console/")
	require.Contains(t, raw, "Max-Age=43200")
	require.NotContains(t, raw, "Secure", "plain HTTP: a Secure cookie would never come back")

	// A session stops when its token is revoked.
	require.NoError(t, e.srv.Tenants().RevokeToken(context.Background(), e.approver))
	resp, _ = b.get("/console/overview")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

// TestConsoleOneTimeLink: a sign-in link signs in once; the second use is refused, and
// an agent token gets no link.
func TestConsoleOneTimeLink(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	_, err := console.SignInLink(ctx, e.srv.Pool(), e.srv.Tenants(), e.agent, time.Minute)
	require.Error(t, err)
	link, err := console.SignInLink(ctx, e.srv.Pool(), e.srv.Tenants(), e.approver, time.Minute)
	require.NoError(t, err)
	code := strings.TrimPrefix(link, "/console/link?code=")

	b := newBrowser(t, e.base)
	_, page := b.get(link)
	form := url.Values{"csrf": {csrfOf(t, page)}, "code": {code}}
	resp, _ := b.post("/console/link", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, page = b.get("/console/overview")
	require.Equal(t, http.StatusOK, resp.StatusCode, page)

	other := newBrowser(t, e.base)
	_, page = other.get(link)
	resp, page = other.post("/console/link", url.Values{"csrf": {csrfOf(t, page)}, "code": {code}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "link-used", reasonOf(page))
}

// TestConsoleReviewCannotReleaseAWaitingOp: the Review form's resend (or any outcome)
// of the refund that awaits approval answers 409 wrong-state with the approval's
// sentence; the op keeps waiting and Stripe holds no refund.
func TestConsoleReviewCannotReleaseAWaitingOp(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	_, page = b.get("/console/review")
	csrf := csrfOf(t, page)
	for _, outcome := range []string{"resend", "failed", "succeeded"} {
		resp, page = b.post("/console/review", url.Values{"csrf": {csrf}, "key": {e.refundKey}, "outcome": {outcome},
			"reason": {"checked"}, "vendor_ref": {"re_1"}, "new_key": {"on"}})
		require.Equal(t, http.StatusConflict, resp.StatusCode, outcome)
		require.Equal(t, "wrong-state", reasonOf(page), outcome)
		require.Contains(t, page, "only its approval can release it", outcome)
	}
	_, page = b.get("/console/lookup?q=" + e.refundKey)
	require.Contains(t, page, `id="op-status" data-status="awaiting_approval">`)
	require.Empty(t, e.stripe.Refunds())
}

// TestFinanceWindowOutOfRange: finance dates outside a sane range (before 2000, more
// than a day ahead, a window longer than a year, a start after its end, year 0 or
// 9999) answer 400 with a sentence on the page or the CSV's refusal, and no vendor is
// listed: the fake Stripe sees no GET.
func TestFinanceWindowOutOfRange(t *testing.T) {
	t.Parallel()
	e := start(t)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	before := e.stripeGets.Load()
	now := time.Now().UTC()
	for _, c := range []struct{ since, until, says string }{
		{"0001-01-01", "", "before 2000-01-01"},
		{"0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "before 2000-01-01"},
		{"1999-12-31", "2000-01-02", "before 2000-01-01"},
		{now.Add(-time.Hour).Format(time.RFC3339), now.Add(72 * time.Hour).Format(time.RFC3339), "more than a day after now"},
		{now.AddDate(-2, 0, 0).Format("2006-01-02"), now.Format("2006-01-02"), "more than a year"},
		{now.Format("2006-01-02"), now.AddDate(0, 0, -3).Format("2006-01-02"), "must come before its end"},
	} {
		q := "?since=" + url.QueryEscape(c.since)
		if c.until != "" {
			q += "&until=" + url.QueryEscape(c.until)
		}
		resp, page := b.get("/console/finance" + q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Equal(t, "invalid-request", reasonOf(page), q)
		require.Contains(t, page, c.says, q)
		resp, page = b.get("/console/finance.csv" + q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Contains(t, page, c.says, q)
	}
	require.Equal(t, before, e.stripeGets.Load(), "no list call reached the vendor")

	// A sane window still lists the vendor.
	resp, _ = b.get("/console/finance?since=" + now.AddDate(0, 0, -1).Format("2006-01-02"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Greater(t, e.stripeGets.Load(), before)
}

// signInRaw signs in with token without a cookie jar (which would keep a Secure cookie
// from a plain-HTTP test server), sending header on every request, and returns the
// cookies set and each answer's Strict-Transport-Security.
func signInRaw(t *testing.T, base, token string, header http.Header) (pre, session *http.Cookie, hsts []string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, base+"/console/signin", nil)
	maps.Copy(req.Header, header)
	resp, err := c.Do(req)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	hsts = append(hsts, resp.Header.Get("Strict-Transport-Security"))
	for _, ck := range resp.Cookies() {
		pre = ck
	}
	require.NotNil(t, pre, "the sign-in form sets its CSRF cookie")
	form := url.Values{"csrf": {csrfOf(t, string(page))}, "token": {token}}
	req, _ = http.NewRequest(http.MethodPost, base+"/console/signin", strings.NewReader(form.Encode()))
	maps.Copy(req.Header, header)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: pre.Name, Value: pre.Value})
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	hsts = append(hsts, resp.Header.Get("Strict-Transport-Security"))
	for _, ck := range resp.Cookies() {
		session = ck
	}
	require.NotNil(t, session, "signing in sets the session cookie")
	for _, path := range []string{"/v1/ops/some-key", "/mcp", "/console/"} {
		req, _ = http.NewRequest(http.MethodGet, base+path, nil)
		maps.Copy(req.Header, header)
		resp, err = c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		hsts = append(hsts, resp.Header.Get("Strict-Transport-Security"))
	}
	return pre, session, hsts
}

// TestSecureCookiesBehindTLS: with an https --public-url the console's cookies are
// Secure and every answer (console, API, MCP) carries HSTS, over the plain HTTP a TLS
// proxy forwards; without it, X-Forwarded-Proto is ignored unless
// --trust-forwarded-proto is on.
func TestSecureCookiesBehindTLS(t *testing.T) {
	t.Parallel()
	forwarded := http.Header{"X-Forwarded-Proto": {"https"}}
	const hsts = "max-age=31536000"

	plain := start(t)
	pre, session, got := signInRaw(t, plain.base, plain.approver, forwarded)
	require.False(t, pre.Secure, "a forged X-Forwarded-Proto is not trusted by default")
	require.False(t, session.Secure)
	require.Equal(t, []string{"", "", "", "", ""}, got)

	public := startWith(t, func(c *server.Config) { c.PublicURL = "https://oncebox.example.com" })
	pre, session, got = signInRaw(t, public.base, public.approver, nil)
	require.True(t, pre.Secure)
	require.True(t, session.Secure, "the approver's session cookie never goes out over plain HTTP")
	require.Equal(t, []string{hsts, hsts, hsts, hsts, hsts}, got)

	trusting := startWith(t, func(c *server.Config) { c.TrustForwardedProto = true })
	pre, session, got = signInRaw(t, trusting.base, trusting.approver, forwarded)
	require.True(t, pre.Secure)
	require.True(t, session.Secure)
	require.Equal(t, []string{hsts, hsts, hsts, hsts, hsts}, got)
	_, session, got = signInRaw(t, trusting.base, trusting.approver, nil)
	require.False(t, session.Secure, "without the proxy's header, plain HTTP")
	require.Equal(t, []string{"", "", "", "", ""}, got)
}

// TestNoticesComeFromTheOp: the approvals and review pages show a notice only from
// the fixed set, naming the op the server finds by key within the signed-in tenant,
// and only when the op stands where the notice says; text in the URL, an unknown
// notice, an unknown key or another tenant's key show nothing.
func TestNoticesComeFromTheOp(t *testing.T) {
	t.Parallel()
	e := start(t)
	ctx := context.Background()
	_, otherAgent, err := e.srv.Tenants().Create(ctx, "other")
	require.NoError(t, err)
	other := *e
	other.agent = otherAgent
	op := other.api(t, "other-tenant-order", `{"tool":"stripe.payment_intent","args":{"amount":700,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	require.Equal(t, "succeeded", op["status"], op)

	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	phish := "refund-order-1001 was refunded. Call +1 555 0100 to confirm your card"
	for _, path := range []string{
		"/console/approvals?done=approved&key=" + url.QueryEscape(phish),
		"/console/approvals?done=approved&key=" + e.refundKey, // it still awaits approval
		"/console/approvals?done=voted&key=" + url.QueryEscape("a\x00b"),
		"/console/approvals?done=Approved:%20anything&key=" + e.refundKey,
		"/console/approvals?done=rejected&key=other-tenant-order",
		"/console/review?done=resolved&key=other-tenant-order",
		"/console/review?done=resend&key=" + url.QueryEscape(phish),
		"/console/review?done=resolved&key=" + e.refundKey,
	} {
		resp, page := b.get(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.NotContains(t, page, `class="notice"`, path)
		require.NotContains(t, page, "555 0100", path)
	}
	_, page = b.get("/console/approvals?done=voted&key=" + e.refundKey)
	require.Contains(t, page, `<p class="notice" role="status">Your approval of `+e.refundKey+` is recorded`, "a notice that holds is shown")
}

// cellTag matches a table cell's start tag as pages render it: the console adds a
// data-label and a role to every cell (table_cells.go).
const cellTag = `<td[^>]*>`
