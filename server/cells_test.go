package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/doors/console"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/migrations"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// cellsRig is one oncebox process serving two cells, with a plain webhook target (it
// honours no idempotency key: a second send is a second effect).
type cellsRig struct {
	cs   *server.Cells
	base string
	fake *fakewebhook.Server
	stop func()
}

func startCells(t *testing.T, homeURL, euURL string, adjust ...func(*server.Config)) *cellsRig {
	t.Helper()
	fake := fakewebhook.New(fakewebhook.Config{})
	hook := httptest.NewServer(fake)
	t.Cleanup(hook.Close)
	runCtx, stop := context.WithCancel(context.Background())
	cfg := server.Defaults()
	cfg.DatabaseURL = homeURL
	cfg.Cells = "eu=" + euURL
	cfg.Addr = "127.0.0.1:0"
	cfg.WebhookTargets = map[string]webhook.Target{"crm": {BaseURL: hook.URL}}
	// A send cut by a cell's crash is unknown: the reconciler asks the receiver's lookup
	// path, and resends only what it never got.
	cfg.WebhookLookupPath, cfg.WebhookLookupLag = "/_lookup", 3*time.Second
	cfg.WebhookTimeout = 2 * time.Second
	cfg.Queues["webhook"] = dispatch.QueueConfig{MaxWorkers: 20, JobTimeout: 3 * time.Second}
	cfg.RescueStuckJobsAfter, cfg.ReconcileSweepTimeout, cfg.ReconcileStuckMargin = 45*time.Second, 8*time.Second, 2*time.Second
	cfg.ReconcileInterval = time.Second
	cfg.FetchPollInterval = 100 * time.Millisecond
	cfg.CellDirectoryRefresh = 200 * time.Millisecond
	cfg.UnavailableRetryAfter = time.Second
	for _, f := range adjust {
		f(&cfg)
	}
	var logger *slog.Logger
	if os.Getenv("ONCEBOX_CELLS_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cs, err := server.NewCells(runCtx, cfg, logger)
	require.NoError(t, err)
	t.Cleanup(cs.Close)
	addr, err := cs.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cs.Run(runCtx) }()
	select {
	case <-cs.Serving():
	case err := <-done:
		t.Fatalf("cells stopped before they served: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("cells did not serve within a minute")
	}
	var once sync.Once
	r := &cellsRig{cs: cs, base: "http://" + addr.String(), fake: fake}
	r.stop = func() { once.Do(func() { stop(); require.NoError(t, <-done) }) }
	t.Cleanup(r.stop)
	return r
}

// answer is one POST /v1/ops answer.
type answer struct {
	code  int
	op    string
	retry string
	body  string
}

func (r *cellsRig) post(token, key string) answer {
	body := fmt.Sprintf(`{"tool":"webhook.post","args":{"target":"crm","path":"/hook","body":{"key":%q}}}`, key)
	req, _ := http.NewRequest(http.MethodPost, r.base+"/v1/ops", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return answer{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var op struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &op)
	return answer{code: resp.StatusCode, op: op.ID, retry: resp.Header.Get("Retry-After"), body: string(b)}
}

// caller sends keys one after the other, each retried with the same key until it is
// recorded, and keeps every answer that was not.
type caller struct {
	mu      sync.Mutex
	keys    map[string]string // key -> op id
	refused []answer
}

func (c *caller) run(ctx context.Context, r *cellsRig, token, prefix string, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		for {
			a := r.post(token, key)
			if a.code == http.StatusAccepted || a.code == http.StatusOK {
				c.mu.Lock()
				c.keys[key] = a.op
				c.mu.Unlock()
				break
			}
			c.mu.Lock()
			c.refused = append(c.refused, a)
			c.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(15 * time.Millisecond)
	}
}

func newCaller() *caller { return &caller{keys: map[string]string{}} }

// settled waits until every op in pool is settled, and returns how many there are.
func settled(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	ok := assert.Eventually(t, func() bool {
		return dbtest.Count(t, pool, `SELECT count(*) FROM oncebox_op WHERE status <> 'succeeded'`) == 0
	}, 2*time.Minute, 200*time.Millisecond, "ops still not settled")
	if !ok {
		rows, err := pool.Query(context.Background(), `SELECT o.status, coalesce(j.state::text, 'no job'), count(*) FROM oncebox_op o
LEFT JOIN river_job j ON j.args->>'op_id' = o.id::text WHERE o.status <> 'succeeded' GROUP BY 1, 2`)
		require.NoError(t, err)
		for rows.Next() {
			var st, js string
			var n int
			require.NoError(t, rows.Scan(&st, &js, &n))
			t.Logf("unsettled: %s, job %s: %d", st, js, n)
		}
		t.FailNow()
	}
	return dbtest.Count(t, pool, `SELECT count(*) FROM oncebox_op`)
}

// TestCellsMoveATenantUnderLoad: two cells in one process; callers of two tenants of
// the home cell keep sending ops while one tenant moves to the other cell. Nothing is
// lost or done twice (the target honours no key: the fake counts every send), the
// tenant's keys answer the same op after the move, the other tenant never sees an
// error, and the moving tenant sees only 503s with Retry-After.
func TestCellsMoveATenantUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two cells under load")
	}
	ctx := context.Background()
	home, eu := dbtest.Schema(t), dbtest.Schema(t)
	c, err := cells.AddCell(ctx, home, eu, "eu")
	require.NoError(t, err)
	require.Equal(t, 1, c.Number)
	_, acme, err := tenant.NewStore(home).Create(ctx, "acme")
	require.NoError(t, err)
	_, beta, err := tenant.NewStore(home).Create(ctx, "beta")
	require.NoError(t, err)
	r := startCells(t, dbtest.ConnString(t, home), dbtest.ConnString(t, eu))

	loadCtx, endLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	moving, staying := newCaller(), newCaller()
	for i := range 3 {
		wg.Add(1)
		go moving.run(loadCtx, r, acme, fmt.Sprintf("acme%d", i), &wg)
	}
	wg.Add(1)
	go staying.run(loadCtx, r, beta, "beta", &wg)

	time.Sleep(2 * time.Second)
	m := &cells.Mover{Home: home, Cells: map[string]*pgxpool.Pool{cells.Home: home, "eu": eu},
		Wait: 30 * time.Second, Drain: 500 * time.Millisecond, Logf: t.Logf}
	plan, err := m.Plan(ctx, "acme", "eu")
	require.NoError(t, err)
	require.Equal(t, cells.Home, plan.From)
	began := time.Now()
	_, err = m.Move(ctx, "acme", "eu")
	require.NoError(t, err)
	t.Logf("moved in %s", time.Since(began).Round(time.Millisecond))
	require.Equal(t, cells.Placement{Cell: "eu"}, must(cells.Placed(ctx, home, "acme")))
	time.Sleep(2 * time.Second)
	endLoad()
	wg.Wait()

	// A key sent before the move answers its op from the new cell, and is not sent again.
	moving.mu.Lock()
	var oldKey, oldOp string
	for k, id := range moving.keys {
		oldKey, oldOp = k, id
		break
	}
	moving.mu.Unlock()
	a := r.post(acme, oldKey)
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.Equal(t, oldOp, a.op)

	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_tenant WHERE name = 'acme'`), "acme is gone from home")
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_tenant_fence`))
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM pg_trigger WHERE tgname = 'oncebox_tenant_fence' AND tgrelid = 'oncebox_op'::regclass`), "the fence trigger is dropped")
	nEU, nHome := settled(t, eu), settled(t, home)
	require.Equal(t, len(moving.keys), nEU, "every acme key is one op, in eu")
	require.Equal(t, len(staying.keys), nHome, "every beta key is one op, in home")
	require.Positive(t, dbtest.Count(t, eu, `SELECT count(*) FROM oncebox_op WHERE created_at < $1`, began),
		"acme's ops from before the move came along")
	perOp := map[string]int{}
	for _, e := range r.fake.Effects() {
		perOp[e.OpID]++
	}
	for id, n := range perOp {
		require.Equal(t, 1, n, "op %s sent %d times", id, n)
	}
	require.Equal(t, nEU+nHome, len(perOp), "one effect per op, none lost")
	require.Empty(t, staying.refused, "the tenant that stayed saw an error")
	for _, a := range moving.refused {
		require.Equal(t, http.StatusServiceUnavailable, a.code, a.body)
		require.NotEmpty(t, a.retry, "503 without Retry-After: %s", a.body)
		require.True(t, strings.Contains(a.body, "tenant-moving") || strings.Contains(a.body, "store-unavailable"), a.body)
	}
	t.Logf("acme: %d ops, %d refusals during the move; beta: %d ops", nEU, len(moving.refused), nHome)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// euOnOwnCluster makes pg the cell eu of a fresh home schema, with a tenant in each
// (euco in eu, homeco in home), and returns both cells' pools and both agent tokens.
func euOnOwnCluster(t *testing.T, pg *ownCluster) (home, eu *pgxpool.Pool, euTok, homeTok string) {
	t.Helper()
	ctx := context.Background()
	home = dbtest.Schema(t)
	eu, err := pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	t.Cleanup(eu.Close)
	_, err = migrations.Migrate(ctx, eu, nil)
	require.NoError(t, err)
	_, err = cells.AddCell(ctx, home, eu, "eu")
	require.NoError(t, err)
	require.NoError(t, cells.Place(ctx, home, "euco", "eu"))
	euTenant, euTok, err := tenant.NewStore(eu).Create(ctx, "euco")
	require.NoError(t, err)
	require.GreaterOrEqual(t, euTenant.ID, int64(1)<<44, "a tenant of cell 1 has an id in its range")
	_, homeTok, err = tenant.NewStore(home).Create(ctx, "homeco")
	require.NoError(t, err)
	return home, eu, euTok, homeTok
}

// TestCellsOneCellDown: the eu cell's Postgres (a private cluster) stops while both
// cells' tenants keep calling: the home cell's tenant never sees an error, the eu
// tenant gets 503 cell-unavailable with Retry-After, /readyz stays ready; once eu is
// back every op settles with one effect each.
func TestCellsOneCellDown(t *testing.T) {
	ctx := context.Background()
	pg := startOwnCluster(t, "oncebox_eu", true)
	home, _, euTok, homeTok := euOnOwnCluster(t, pg)
	r := startCells(t, dbtest.ConnString(t, home), pg.URL())

	cell, p := r.cs.RouteForTest(ctx, euTok)
	require.Nil(t, p)
	require.Equal(t, "eu", cell)
	cell, p = r.cs.RouteForTest(ctx, homeTok)
	require.Nil(t, p)
	require.Equal(t, cells.Home, cell)

	loadCtx, endLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	euCaller, homeCaller := newCaller(), newCaller()
	wg.Add(2)
	go euCaller.run(loadCtx, r, euTok, "eu", &wg)
	go homeCaller.run(loadCtx, r, homeTok, "home", &wg)
	time.Sleep(2 * time.Second)
	pg.stop(true)
	var ready int
	require.Eventually(t, func() bool {
		euCaller.mu.Lock()
		defer euCaller.mu.Unlock()
		return len(euCaller.refused) > 3
	}, 30*time.Second, 100*time.Millisecond, "the eu tenant is never refused while its cell is down")
	resp, err := http.Get(r.base + "/readyz")
	require.NoError(t, err)
	ready = resp.StatusCode
	resp.Body.Close()
	require.Equal(t, http.StatusOK, ready, "one cell down leaves the process ready")
	time.Sleep(2 * time.Second)
	pg.start()
	time.Sleep(3 * time.Second)
	endLoad()
	wg.Wait()

	require.Empty(t, homeCaller.refused, "the home cell's tenant saw an error while eu was down")
	sawCell := false
	for _, a := range euCaller.refused {
		if a.code == 0 {
			continue // the request itself failed (the client's timeout)
		}
		require.Equal(t, http.StatusServiceUnavailable, a.code, a.body)
		require.NotEmpty(t, a.retry, a.body)
		// A token routed before is sent to its cell, which answers store-unavailable;
		// one checked while the cell is down, cell-unavailable.
		require.True(t, strings.Contains(a.body, "cell-unavailable") || strings.Contains(a.body, "store-unavailable"), a.body)
		sawCell = true
	}
	require.True(t, sawCell, "no 503 while the eu cell was down")
	check, err := pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	defer check.Close()
	nEU, nHome := settled(t, check), settled(t, home)
	require.Equal(t, len(euCaller.keys), nEU)
	require.Equal(t, len(homeCaller.keys), nHome)
	perOp := map[string]int{}
	for _, e := range r.fake.Effects() {
		perOp[e.OpID]++
	}
	for id, n := range perOp {
		require.Equal(t, 1, n, "op %s sent %d times", id, n)
	}
	require.Equal(t, nEU+nHome, len(perOp))
	t.Logf("eu: %d ops, %d refusals; home: %d ops, none refused", nEU, len(euCaller.refused), nHome)
}

// BenchmarkRoute measures what the directory costs per call with two cells: the
// router's parallel token check (each cell's cache warm) and the directory lookup.
func BenchmarkRoute(b *testing.B) {
	ctx := context.Background()
	home, eu := dbtest.Schema(b), dbtest.Schema(b)
	_, err := cells.AddCell(ctx, home, eu, "eu")
	require.NoError(b, err)
	require.NoError(b, cells.Place(ctx, home, "euco", "eu"))
	_, tok, err := tenant.NewStore(eu).Create(ctx, "euco")
	require.NoError(b, err)
	cfg := server.Defaults()
	cfg.DatabaseURL = dbtest.ConnString(b, home)
	cfg.Cells = "eu=" + dbtest.ConnString(b, eu)
	cfg.Addr = "127.0.0.1:0"
	cs, err := server.NewCells(ctx, cfg, nil)
	require.NoError(b, err)
	b.Cleanup(cs.Close)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cs.Run(runCtx) }()
	b.Cleanup(func() { stop(); <-done })
	<-cs.Serving()
	time.Sleep(time.Second) // the token caches listen
	for b.Loop() {
		if cell, p := cs.RouteForTest(ctx, tok); p != nil || cell != "eu" {
			b.Fatalf("routed to %q, %v", cell, p)
		}
	}
}

// TestParseCells: pairs, a multi-host URL (its commas belong to it), and refusals.
func TestParseCells(t *testing.T) {
	got, err := server.ParseCells("eu=postgres://a:5432,b:5432/db?target_session_attrs=read-write, us=postgres://u/db")
	require.NoError(t, err)
	require.Equal(t, []server.CellURL{{Name: "eu", URL: "postgres://a:5432,b:5432/db?target_session_attrs=read-write"},
		{Name: "us", URL: "postgres://u/db"}}, got)
	for _, bad := range []string{"home=postgres://x/db", "eu=postgres://x/db,eu=postgres://y/db", "EU=postgres://x/db", "eu="} {
		_, err := server.ParseCells(bad)
		require.Error(t, err, bad)
	}
	_, err = server.ParseCells("postgres://me:hunter2@x/db")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2", "a password never reaches an error")
}

// TestCellsConsoleSignsInAtTheTenantsCell: a person of a tenant in the eu cell signs in
// to the console with a token, and with a one-time link (whose code only eu holds), and
// lands in eu's console, which the cell cookie keeps them in.
func TestCellsConsoleSignsInAtTheTenantsCell(t *testing.T) {
	ctx := context.Background()
	home, eu := dbtest.Schema(t), dbtest.Schema(t)
	_, err := cells.AddCell(ctx, home, eu, "eu")
	require.NoError(t, err)
	require.NoError(t, cells.Place(ctx, home, "euco", "eu"))
	store := tenant.NewStore(eu)
	_, _, err = store.Create(ctx, "euco")
	require.NoError(t, err)
	approver, err := store.NewTokenWithRole(ctx, "euco", tenant.RoleApprover)
	require.NoError(t, err)
	r := startCells(t, dbtest.ConnString(t, home), dbtest.ConnString(t, eu), func(c *server.Config) { c.AdminToken = "adm-cells-secret" })

	// The installation's endpoints answer through the router: River UI (the home cell's),
	// each cell's metrics, the probes.
	get := func(path string) int {
		req, _ := http.NewRequest(http.MethodGet, r.base+path, nil)
		req.Header.Set("Authorization", "Bearer adm-cells-secret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/riverui/api/jobs?limit=1", "/metrics", "/metrics?cell=eu", "/readyz", "/livez", "/healthz"} {
		require.Equal(t, http.StatusOK, get(p), p)
	}

	signIn := func(path string, form url.Values) (*http.Client, *http.Response) {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(r.base + path)
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
		require.NotNil(t, m, "no csrf field in %s", path)
		form.Set("csrf", string(m[1]))
		resp, err = c.PostForm(r.base+strings.Split(path, "?")[0], form)
		require.NoError(t, err)
		resp.Body.Close()
		return c, resp
	}
	inEU := func(c *http.Client, resp *http.Response) {
		t.Helper()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		u, _ := url.Parse(r.base + "/console/")
		var cell string
		for _, k := range c.Jar.Cookies(u) {
			if k.Name == "oncebox_cell" {
				cell = k.Value
			}
		}
		require.Equal(t, "eu", cell)
		page, err := c.Get(r.base + "/console/overview")
		require.NoError(t, err)
		body, _ := io.ReadAll(page.Body)
		page.Body.Close()
		require.Equal(t, http.StatusOK, page.StatusCode)
		require.Contains(t, string(body), "euco")
	}
	c, resp := signIn("/console/signin", url.Values{"token": {approver}})
	inEU(c, resp)

	link, err := console.SignInLink(ctx, eu, store, approver, time.Minute)
	require.NoError(t, err)
	code := strings.TrimPrefix(link, "/console/link?code=")
	c, resp = signIn(link, url.Values{"code": {code}})
	inEU(c, resp)
	_, resp = signIn(link, url.Values{"code": {code}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a used link signs in nowhere")
}

// TestCellsMoveCarriesApprovalsBudgetsAndKeys: what a tenant holds besides its settled
// ops moves with it and keeps working in its new cell. A refund waiting for a person
// moves, is approved there through the router, and Stripe holds exactly one refund; a
// budget's usage moves, so the call past it is still refused; a key used before the
// move answers its op, not a second payment; the agent's token is still not allowed
// to approve.
func TestCellsMoveCarriesApprovalsBudgetsAndKeys(t *testing.T) {
	ctx := context.Background()
	home, eu := dbtest.Schema(t), dbtest.Schema(t)
	_, err := cells.AddCell(ctx, home, eu, "eu")
	require.NoError(t, err)
	store := tenant.NewStore(home)
	_, agent, err := store.Create(ctx, "acme")
	require.NoError(t, err)
	approver, err := store.NewTokenWithRole(ctx, "acme", tenant.RoleApprover)
	require.NoError(t, err)
	fake := fakestripe.New(fakestripe.Config{})
	stripeSrv := httptest.NewServer(fake)
	t.Cleanup(stripeSrv.Close)
	r := startCells(t, dbtest.ConnString(t, home), dbtest.ConnString(t, eu), func(c *server.Config) {
		c.StripeAPIKey, c.StripeAPIBase = "sk_test_cells", stripeSrv.URL
		c.RefundApprovalAbove = 1000
		c.Budgets = []governance.Budget{{Name: "three-payments", Tool: "stripe.payment_intent",
			Window: governance.Duration(24 * time.Hour), Count: 3, OnExceed: governance.ExceedRefuse}}
	})
	call := func(method, path, token, key, body string) (int, map[string]any) {
		status, _, out := apiCall(t, ctx, r.base+path, method, token, key, body)
		return status, out
	}
	pay := func(key string) (int, map[string]any) {
		return call("POST", "/v1/ops?wait=20s", agent, key,
			`{"tool": "stripe.payment_intent", "args": {"amount": 5000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`)
	}
	status, first := pay("pay-1")
	require.Equal(t, http.StatusAccepted, status, first)
	require.Equal(t, "succeeded", first["status"], first)
	for _, k := range []string{"pay-2", "pay-3"} {
		status, op := pay(k)
		require.Equal(t, http.StatusAccepted, status, op)
	}
	status, refund := call("POST", "/v1/ops", agent, "refund-1",
		`{"tool": "stripe.refund", "args": {"payment_intent": "`+first["vendor_ref"].(string)+`", "amount": 4000}}`)
	require.Equal(t, http.StatusAccepted, status, refund)
	require.Equal(t, "awaiting_approval", refund["status"])

	m := &cells.Mover{Home: home, Cells: map[string]*pgxpool.Pool{cells.Home: home, "eu": eu},
		Wait: 30 * time.Second, Drain: 500 * time.Millisecond, Logf: t.Logf}
	_, err = m.Move(ctx, "acme", "eu")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		status, _ := call("GET", "/v1/ops/refund-1", agent, "", "")
		return status == http.StatusOK
	}, 10*time.Second, 100*time.Millisecond, "the router sends acme to eu")
	require.Equal(t, 1, dbtest.Count(t, eu, `SELECT count(*) FROM oncebox_op WHERE status = 'awaiting_approval'`))

	status, again := pay("pay-1")
	require.Equal(t, http.StatusOK, status, again)
	require.Equal(t, first["id"], again["id"], "a key from before the move answers its op")
	status, over := pay("pay-4")
	if status != http.StatusTooManyRequests {
		for name, pool := range map[string]*pgxpool.Pool{"home": home, "eu": eu} {
			rows, _ := pool.Query(ctx, `SELECT idempotency_key || ' ' || status FROM oncebox_op ORDER BY created_at`)
			ops, _ := pgx.CollectRows(rows, pgx.RowTo[string])
			rows, _ = pool.Query(ctx, `SELECT budget || ' ' || scope || ' ' || window_start::text || ' ops=' || ops FROM oncebox_budget_usage`)
			usage, _ := pgx.CollectRows(rows, pgx.RowTo[string])
			t.Logf("%s: ops %v; budget usage %v", name, ops, usage)
		}
	}
	require.Equal(t, http.StatusTooManyRequests, status, "the budget's usage moved with the tenant: %v", over)
	require.Len(t, fake.PaymentIntents(), 3)

	status, _ = call("POST", "/v1/ops/refund-1/approve", agent, "", `{"reason": "me"}`)
	require.Equal(t, http.StatusForbidden, status, "the agent still cannot approve")
	status, approved := call("POST", "/v1/ops/refund-1/approve", approver, "", `{"reason": "checked"}`)
	require.Equal(t, http.StatusOK, status, approved)
	require.Eventually(t, func() bool {
		_, op := call("GET", "/v1/ops/refund-1", agent, "", "")
		return op["status"] == "succeeded"
	}, 20*time.Second, 100*time.Millisecond)
	require.Len(t, fake.Refunds(), 1, "exactly one refund at Stripe")
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_op`), "nothing of acme is left in home")
}

// TestCellsStartWhileACellIsDown: a process started while the eu cell's Postgres is
// stopped serves within --cell-startup-wait: the home tenant's calls are accepted, the eu
// tenant's are answered 503 cell-unavailable with Retry-After (none is recorded), and
// /readyz is ready and says eu has not started. Once eu's Postgres is back the cell
// starts in the background, the eu tenant's key is accepted, and every op settles with
// one effect.
func TestCellsStartWhileACellIsDown(t *testing.T) {
	ctx := context.Background()
	pg := startOwnCluster(t, "oncebox_eu_late", false)
	home, eu, euTok, homeTok := euOnOwnCluster(t, pg)
	eu.Close()
	pg.stop(false)

	began := time.Now()
	r := startCells(t, dbtest.ConnString(t, home), pg.URL(), func(c *server.Config) { c.CellStartupWait = time.Second })
	require.Less(t, time.Since(began), 10*time.Second, "the process waited for the cell that is down")
	a := r.post(homeTok, "home-1")
	require.Equal(t, http.StatusAccepted, a.code, a.body)
	a = r.post(euTok, "eu-1")
	require.Equal(t, http.StatusServiceUnavailable, a.code, a.body)
	require.Contains(t, a.body, "cell-unavailable")
	require.NotEmpty(t, a.retry)
	resp, err := http.Get(r.base + "/readyz")
	require.NoError(t, err)
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(ready))
	require.Contains(t, string(ready), "not started")
	resp, err = http.Get(r.base + "/metrics?cell=eu")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "eu's metrics, not home's in their place")

	pg.start()
	require.Eventually(t, func() bool {
		a = r.post(euTok, "eu-1")
		return a.code == http.StatusAccepted
	}, 30*time.Second, 200*time.Millisecond, "the eu cell never started: %d %s", a.code, a.body)
	require.Equal(t, http.StatusOK, r.post(euTok, "eu-1").code, "the key answers its op")
	eu, err = pgxpool.New(ctx, pg.URL())
	require.NoError(t, err)
	t.Cleanup(eu.Close)
	require.Equal(t, 1, settled(t, eu))
	require.Equal(t, 1, settled(t, home))
	perOp := map[string]int{}
	for _, e := range r.fake.Effects() {
		perOp[e.OpID]++
	}
	require.Len(t, perOp, 2)
	for id, n := range perOp {
		require.Equal(t, 1, n, "op %s sent %d times", id, n)
	}
}

// TestCellsServeNoCallBeforeTheCellStarted: the router sends a cell no call before the
// cell's Server has stored the flags' policy and started, as a Server alone serves none
// before: a call that came first would pass the flags' budget uncounted. Under load it
// did (a fourth payment past a budget of three, in TestCellsMoveCarriesApprovalsBudgetsAndKeys
// under CI's load). Before Run the router answers 503 cell-unavailable and records
// nothing; once it runs, the budget of one webhook call admits one.
func TestCellsServeNoCallBeforeTheCellStarted(t *testing.T) {
	ctx := context.Background()
	home, eu := dbtest.Schema(t), dbtest.Schema(t)
	_, err := cells.AddCell(ctx, home, eu, "eu")
	require.NoError(t, err)
	_, token, err := tenant.NewStore(home).Create(ctx, "acme")
	require.NoError(t, err)
	hook := httptest.NewServer(fakewebhook.New(fakewebhook.Config{}))
	t.Cleanup(hook.Close)
	cfg := server.Defaults()
	cfg.DatabaseURL, cfg.Cells, cfg.Addr = dbtest.ConnString(t, home), "eu="+dbtest.ConnString(t, eu), "127.0.0.1:0"
	cfg.WebhookTargets = map[string]webhook.Target{"crm": {BaseURL: hook.URL}}
	cfg.Budgets = []governance.Budget{{Name: "one-call", Tool: "webhook.post", Window: governance.Duration(time.Hour), Count: 1,
		OnExceed: governance.ExceedRefuse}}
	cs, err := server.NewCells(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(cs.Close)
	post := func(h http.Handler, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/ops",
			strings.NewReader(`{"tool":"webhook.post","args":{"target":"crm","path":"/hook","body":{}}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	early := post(cs.Handler(), "early")
	require.Equal(t, http.StatusServiceUnavailable, early.Code, early.Body.String())
	require.Contains(t, early.Body.String(), "cell-unavailable")
	require.Zero(t, dbtest.Count(t, home, `SELECT count(*) FROM oncebox_op`), "a call before the cell started was recorded")

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cs.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { return post(cs.Handler(), "first").Code == http.StatusAccepted },
		30*time.Second, 50*time.Millisecond, "the home cell never served")
	second := post(cs.Handler(), "second")
	require.Equal(t, http.StatusTooManyRequests, second.Code, "the budget of one call admitted a second: %s", second.Body.String())
}
