package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/devkit/localpg"
)

// cellsRun is the two-cell chaos run (--cells, make chaos-cells): two durable private
// clusters, the home cell and "eu"; serve processes with --cells; tenants in each cell
// and one that moves from home to eu in the middle; callers of every tenant; SIGKILLs
// of the serve processes, and eu's Postgres crashed while home serves. The verdict:
// no op sent twice (the webhook receiver honours no key: every send is an effect), none
// lost, none in a cell its tenant is not in, and the home cell's tenants never answered
// an error (a killed process's dropped connection is retried at the other one, as a
// client behind a load balancer does, and counted apart).
type cellsRun struct {
	cfg    Config
	logger *slog.Logger
	rng    *rand.Rand
	tmp    string
	bin    string

	homeCfg, euCfg localpg.Config
	pgMu           sync.Mutex
	home, eu       *localpg.Postgres

	fake  *fakewebhook.Server
	hook  *httptest.Server
	procs []*serveProc

	tenants []*cellTenant
	// euDown is set while eu's Postgres is down.
	euDown atomic.Bool
	moved  atomic.Bool
	kills  atomic.Int64
	// moveTook is how long the successful move took, its drain and wait included.
	moveTook time.Duration
	// killMu keeps the kill loop and the restart during eu's outage apart.
	killMu sync.Mutex
	// readyInOutage is how long a serve restarted while eu was down took to serve home.
	readyInOutage time.Duration
}

// cellTenant is one tenant of the run, with what its callers saw.
type cellTenant struct {
	name, cell, token string
	// moves: the tenant is moved to eu mid-run.
	moves bool

	mu      sync.Mutex
	keys    map[string]string // key -> op id, once recorded
	answers map[string]int    // "503 tenant-moving", "202", ... -> count
	bad     []string          // answers the verdict refuses
	dropped int               // requests whose connection a kill dropped
}

// cellsDowntime is how long eu's Postgres stays down after its crash.
const cellsDowntime = 8 * time.Second

// cellsStartupWait is the serve processes' --cell-startup-wait, and cellsReadyInOutage
// how soon a serve restarted while eu is down must serve the home cell: well within
// cellsDowntime, so that it is proven while eu is still down.
const (
	cellsStartupWait   = time.Second
	cellsReadyInOutage = 6 * time.Second
)

func runCells(ctx context.Context, cfg Config) (code int) {
	cfg = cfg.withDefaults()
	r := &cellsRun{cfg: cfg, logger: cfg.Logger, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 48))}
	defer func() {
		r.cleanup()
		if code == exitGreen && !cfg.Keep && r.tmp != "" {
			_ = os.RemoveAll(r.tmp)
		}
	}()
	findings, err := r.run(ctx)
	if err != nil {
		fmt.Fprintln(cfg.Out, "chaos-cells: error:", err)
		if r.tmp != "" {
			fmt.Fprintln(cfg.Out, "chaos-cells: logs in", r.tmp)
		}
		return exitError
	}
	if len(findings) > 0 {
		for _, f := range findings {
			fmt.Fprintln(cfg.Out, "chaos-cells: FINDING:", f)
		}
		fmt.Fprintln(cfg.Out, "chaos-cells: logs in", r.tmp)
		return exitBroken
	}
	return exitGreen
}

func (r *cellsRun) run(parent context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(parent, r.cfg.DurationCap)
	defer cancel()
	var err error
	if r.tmp, err = os.MkdirTemp("", "oncebox-chaos-cells-"); err != nil {
		return nil, err
	}
	if err := os.Chmod(r.tmp, 0o755); err != nil { // the clusters may run as an unprivileged user
		return nil, err
	}
	r.logger.Info("chaos-cells run", slog.Int64("seed", r.cfg.Seed), slog.Duration("enqueue_for", r.cfg.EnqueueFor))
	if err := r.build(ctx); err != nil {
		return nil, err
	}
	if r.homeCfg, r.home, err = r.startCluster(ctx, "home"); err != nil {
		return nil, err
	}
	if r.euCfg, r.eu, err = r.startCluster(ctx, "eu"); err != nil {
		return nil, err
	}
	if out, err := r.oncebox(ctx, "migrate", "--database-url", r.home.URL); err != nil {
		return nil, fmt.Errorf("migrate home: %w\n%s", err, out)
	}
	if out, err := r.oncebox(ctx, "cell", "add", "eu", "--cell-url", r.eu.URL, "--database-url", r.home.URL); err != nil {
		return nil, fmt.Errorf("cell add eu: %w\n%s", err, out)
	}
	for _, t := range []*cellTenant{{name: "home-a", cell: "home"}, {name: "home-b", cell: "home"},
		{name: "eu-a", cell: "eu"}, {name: "mover", cell: "home", moves: true}} {
		args := []string{"tenant", "create", t.name, "--database-url", r.home.URL}
		if t.cell == "eu" {
			args = append(args, "--cell", "eu", "--cells", "eu="+r.eu.URL)
		}
		out, err := r.oncebox(ctx, args...)
		if err != nil {
			return nil, fmt.Errorf("tenant create %s: %w\n%s", t.name, err, out)
		}
		t.token = strings.TrimSpace(string(out))
		t.keys, t.answers = map[string]string{}, map[string]int{}
		r.tenants = append(r.tenants, t)
	}
	r.fake = fakewebhook.New(fakewebhook.Config{LookupLag: lag})
	r.hook = httptest.NewServer(r.fake)
	for i := range 2 {
		if err := r.startServe(ctx, i); err != nil {
			return nil, err
		}
	}
	for _, p := range r.procs {
		if err := p.waitHealthy(ctx, time.Minute); err != nil {
			return nil, err
		}
	}

	// The chaos: callers of every tenant, kills, eu's crash at a quarter, the move at
	// half time.
	loadCtx, endLoad := context.WithTimeout(ctx, r.cfg.EnqueueFor)
	defer endLoad()
	var callers, chaos sync.WaitGroup
	for _, t := range r.tenants {
		for c := range 2 {
			callers.Go(func() { r.call(loadCtx, ctx, t, c) })
		}
	}
	var crashErr, moveErr error
	chaos.Go(func() { r.killLoop(loadCtx) })
	chaos.Go(func() {
		if sleepCtx(loadCtx, r.cfg.EnqueueFor/4) {
			crashErr = r.crashEU(ctx)
		}
	})
	chaos.Go(func() {
		if sleepCtx(loadCtx, r.cfg.EnqueueFor/2) {
			moveErr = r.move(ctx)
		}
	})
	callers.Wait()
	chaos.Wait()
	if err := errors.Join(crashErr, moveErr); err != nil {
		return nil, err
	}
	for i, p := range r.procs {
		if !p.running() {
			if err := r.procs[i].start(); err != nil {
				return nil, err
			}
		}
		if err := p.waitHealthy(ctx, time.Minute); err != nil {
			return nil, err
		}
	}
	return r.verdict(ctx)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (r *cellsRun) build(ctx context.Context) error {
	r.bin = filepath.Join(r.tmp, "oncebox")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", r.bin, "./cmd/oncebox")
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/oncebox: %w\n%s", err, out)
	}
	return nil
}

func (r *cellsRun) oncebox(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Env = baseEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.String()...), err
	}
	return out, nil
}

// startCluster starts a durable private cluster (fsync, synchronous commit and full
// page writes on: a crash must lose no answered commit).
func (r *cellsRun) startCluster(ctx context.Context, name string) (localpg.Config, *localpg.Postgres, error) {
	port, err := freePort()
	if err != nil {
		return localpg.Config{}, nil, err
	}
	cfg := localpg.Config{Env: func(string) (string, bool) { return "", false }, DataDir: filepath.Join(r.tmp, "pg-"+name),
		Port: port, Database: "oncebox_" + name, DisableDocker: true, Durable: true,
		Logger: r.logger.With(slog.String("component", "localpg-"+name))}
	pg, err := localpg.Start(ctx, cfg)
	if err != nil {
		return cfg, nil, fmt.Errorf("start the %s cell's Postgres: %w", name, err)
	}
	return cfg, pg, nil
}

func (r *cellsRun) startServe(_ context.Context, i int) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := baseEnv()
	for k, v := range map[string]string{
		"DATABASE_URL":                    r.home.URL,
		"ONCEBOX_CELLS":                   "eu=" + r.eu.URL,
		"ONCEBOX_CELL_DIRECTORY_REFRESH":  "300ms",
		"ONCEBOX_CELL_STARTUP_WAIT":       cellsStartupWait.String(),
		"ONCEBOX_ADDR":                    addr,
		"ONCEBOX_MAX_ATTEMPTS":            "100",
		"ONCEBOX_RESCUE_AFTER":            "10s",
		"ONCEBOX_FETCH_POLL_INTERVAL":     "200ms",
		"ONCEBOX_SHUTDOWN_GRACE":          "3s",
		"ONCEBOX_RECONCILE_INTERVAL":      "2s",
		"ONCEBOX_RECONCILE_RETRY_AFTER":   "2s",
		"ONCEBOX_RETRY_MAX_BACKOFF":       "2s",
		"ONCEBOX_WEBHOOK_JOB_TIMEOUT":     "3s",
		"ONCEBOX_STRIPE_JOB_TIMEOUT":      "3s",
		"ONCEBOX_SENDGRID_JOB_TIMEOUT":    "3s",
		"ONCEBOX_RECONCILE_SWEEP_TIMEOUT": "8s",
		"ONCEBOX_STRIPE_TIMEOUT":          "2s",
		"ONCEBOX_SENDGRID_TIMEOUT":        "2s",
		"ONCEBOX_MCP_WAIT":                "2s",
		"ONCEBOX_WEBHOOK_TIMEOUT":         "2s",
		"ONCEBOX_WEBHOOK_LOOKUP_LAG":      (3*time.Second + lag).String(),
		"ONCEBOX_WEBHOOK_LOOKUP_PATH":     "/_lookup",
		"ONCEBOX_WEBHOOK_TARGETS":         fmt.Sprintf(`{"crm":{"base_url":%q}}`, r.hook.URL),
		"ONCEBOX_UNAVAILABLE_RETRY_AFTER": "1s",
		"ONCEBOX_LOG_LEVEL":               "info",
	} {
		env = append(env, k+"="+v)
	}
	p := &serveProc{name: fmt.Sprintf("serve-%d", i), bin: r.bin, addr: addr, eventAddr: addr, env: env,
		logPath: filepath.Join(r.tmp, fmt.Sprintf("serve-%d.log", i)), logger: r.logger}
	r.procs = append(r.procs, p)
	return p.start()
}

// call sends the tenant's keys one after the other while ctx lasts, each retried with
// the same key until it is recorded (or the run's cap, runCtx, ends), at one serve
// process and then the other.
func (r *cellsRun) call(ctx, runCtx context.Context, t *cellTenant, c int) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s-%d-%d", t.name, c, i)
		body := fmt.Sprintf(`{"tool":"webhook.post","args":{"target":"crm","path":"/hook","body":{"key":%q}}}`, key)
		for try := 0; runCtx.Err() == nil; try++ {
			p := r.procs[(c+try)%len(r.procs)]
			req, _ := http.NewRequest(http.MethodPost, p.base()+"/v1/ops", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+t.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			resp, err := client.Do(req)
			if err != nil {
				t.mu.Lock()
				t.dropped++
				t.mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var op struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			}
			_ = json.Unmarshal(b, &op)
			kind := fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimPrefix(op.Type, "https://oncebox.dev/problems/"))
			t.mu.Lock()
			t.answers[strings.TrimSpace(kind)]++
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted {
				t.keys[key] = op.ID
				t.mu.Unlock()
				break
			}
			if why := r.refusedAnswer(t, resp, op.Type); why != "" {
				t.bad = append(t.bad, fmt.Sprintf("%s: %s (%s)", key, why, strings.TrimSpace(string(b))))
			}
			t.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refusedAnswer says why a refusal breaks a promise ("" when it does not): a home
// tenant is never refused; eu's tenants and the mover only with 503 and Retry-After,
// for their cell down or their move.
func (r *cellsRun) refusedAnswer(t *cellTenant, resp *http.Response, typ string) string {
	if t.cell == "home" && !t.moves {
		return fmt.Sprintf("a home cell tenant answered %d", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		return fmt.Sprintf("answered %d (Retry-After %q)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	slug := strings.TrimPrefix(typ, "https://oncebox.dev/problems/")
	if !slices.Contains([]string{"cell-unavailable", "store-unavailable", "tenant-moving"}, slug) {
		return "503 " + slug
	}
	return ""
}

// killLoop SIGKILLs a serve process every few seconds while the other answers, and
// starts it again.
func (r *cellsRun) killLoop(ctx context.Context) {
	for sleepCtx(ctx, time.Duration(3000+r.rng.IntN(3000))*time.Millisecond) {
		i := r.rng.IntN(len(r.procs))
		p, other := r.procs[i], r.procs[1-i]
		if !other.running() || !p.running() {
			continue
		}
		if err := other.waitHealthy(ctx, 2*time.Second); err != nil {
			continue
		}
		r.killMu.Lock()
		p.kill()
		r.kills.Add(1)
		r.logger.Info("chaos-cells: SIGKILL", slog.String("proc", p.name))
		ok := sleepCtx(ctx, 500*time.Millisecond)
		if err := p.start(); err != nil {
			r.logger.Warn("chaos-cells: restart failed", slog.Any("error", err))
		}
		r.killMu.Unlock()
		if !ok {
			break
		}
	}
}

// restartInOutage SIGKILLs a serve process while eu's Postgres is down and starts it
// again: it must serve the home cell within cellsReadyInOutage (--cell-startup-wait
// holds it no longer), not wait for eu. With a --cell-startup-wait of 30 s it fails.
func (r *cellsRun) restartInOutage(ctx context.Context) error {
	r.killMu.Lock()
	defer r.killMu.Unlock()
	p := r.procs[0]
	if p.running() {
		p.kill()
		r.kills.Add(1)
	}
	t0 := time.Now()
	if err := p.start(); err != nil {
		return fmt.Errorf("restart %s while eu is down: %w", p.name, err)
	}
	if err := p.waitHealthy(ctx, cellsReadyInOutage); err != nil {
		return fmt.Errorf("a serve restarted while eu was down did not serve the home cell: %w", err)
	}
	r.readyInOutage = time.Since(t0)
	r.logger.Info("chaos-cells: a serve restarted while eu is down serves home", slog.String("proc", p.name),
		slog.Duration("in", r.readyInOutage))
	return nil
}

// crashEU SIGKILLs eu's postmaster, keeps it down cellsDowntime while a serve process is
// restarted (restartInOutage), and starts it again.
func (r *cellsRun) crashEU(ctx context.Context) error {
	r.pgMu.Lock()
	defer r.pgMu.Unlock()
	r.logger.Info("chaos-cells: crashing eu's Postgres")
	r.euDown.Store(true)
	if err := r.eu.Crash(ctx); err != nil {
		return fmt.Errorf("crash eu: %w", err)
	}
	crashed := time.Now()
	restartErr := r.restartInOutage(ctx)
	time.Sleep(max(0, cellsDowntime-time.Since(crashed)))
	if restartErr != nil {
		return restartErr
	}
	pg, err := localpg.Start(ctx, r.euCfg)
	if err != nil {
		return fmt.Errorf("restart eu: %w", err)
	}
	r.eu = pg
	r.euDown.Store(false)
	r.logger.Info("chaos-cells: eu's Postgres is back")
	return nil
}

// move moves the mover tenant to eu with `oncebox tenant move`, under load and kills;
// a move that gives up (work in flight did not settle) is tried again.
func (r *cellsRun) move(ctx context.Context) error {
	var last error
	for try := range 4 {
		began := time.Now()
		out, err := r.oncebox(ctx, "tenant", "move", "mover", "--to", "eu", "--database-url", r.home.URL,
			"--cells", "eu="+r.eu.URL, "--wait", "30s", "--drain", "1s", "--log-level", "info")
		if err == nil {
			r.moved.Store(true)
			r.moveTook = time.Since(began)
			r.logger.Info("chaos-cells: mover moved to eu", slog.Int("try", try+1), slog.Duration("took", time.Since(began)),
				slog.String("out", strings.TrimSpace(string(out))))
			return nil
		}
		last = fmt.Errorf("tenant move: %w\n%s", err, out)
		r.logger.Warn("chaos-cells: move failed; trying again", slog.Any("error", last))
		if !sleepCtx(ctx, 2*time.Second) {
			break
		}
	}
	return last
}

// opRow is one op as a cell holds it.
type opRow struct {
	id, tenant, key, status string
}

func readOps(ctx context.Context, url string) ([]opRow, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT o.id::text, t.name, o.idempotency_key, o.status FROM oncebox_op o
JOIN oncebox_tenant t ON t.id = o.tenant_id`)
	if err != nil {
		return nil, err
	}
	var out []opRow
	for rows.Next() {
		var o opRow
		if err := rows.Scan(&o.id, &o.tenant, &o.key, &o.status); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// verdict waits for every op to settle (or the run's cap), then checks the promises.
func (r *cellsRun) verdict(ctx context.Context) ([]string, error) {
	var cellOps map[string][]opRow
	for {
		cellOps = map[string][]opRow{}
		open := 0
		for cell, url := range map[string]string{"home": r.home.URL, "eu": r.eu.URL} {
			ops, err := readOps(ctx, url)
			if err != nil {
				return nil, fmt.Errorf("read %s's ops: %w", cell, err)
			}
			cellOps[cell] = ops
			for _, o := range ops {
				if o.status != "succeeded" && o.status != "failed" && o.status != "needs_review" {
					open++
				}
			}
		}
		if open == 0 || !sleepCtx(ctx, time.Second) {
			break
		}
	}
	var findings []string
	byID := map[string]opRow{}
	where := map[string]string{}
	statuses := map[string]int{}
	for cell, ops := range cellOps {
		for _, o := range ops {
			if _, twice := byID[o.id]; twice {
				findings = append(findings, fmt.Sprintf("op %s is in two cells", o.id))
			}
			byID[o.id], where[o.id] = o, cell
			statuses[o.status]++
		}
	}
	effects := map[string]int{}
	for _, e := range r.fake.Effects() {
		effects[e.OpID]++
	}
	dups, lost, wrong, unsettled, noEffect := 0, 0, 0, 0, 0
	for id, n := range effects {
		if n > 1 {
			dups++
			findings = append(findings, fmt.Sprintf("duplicate: op %s sent %d times", id, n))
		}
		if _, ok := byID[id]; !ok {
			lost++
			findings = append(findings, fmt.Sprintf("lost: a side effect of op %s, which no cell holds", id))
		}
	}
	total := 0
	for _, t := range r.tenants {
		want := t.cell
		if t.moves && r.moved.Load() {
			want = "eu"
		}
		t.mu.Lock()
		total += len(t.keys)
		for key, id := range t.keys {
			o, ok := byID[id]
			switch {
			case !ok:
				lost++
				findings = append(findings, fmt.Sprintf("lost: %s's key %s answered op %s, which no cell holds", t.name, key, id))
			case where[id] != want:
				wrong++
				findings = append(findings, fmt.Sprintf("wrong cell: %s's op %s is in %s, the tenant in %s", t.name, id, where[id], want))
			case o.status != "succeeded" && o.status != "failed" && o.status != "needs_review":
				unsettled++
				findings = append(findings, fmt.Sprintf("unsettled: %s's op %s is %s at the cap", t.name, id, o.status))
			case o.status == "succeeded" && effects[id] == 0:
				noEffect++
				findings = append(findings, fmt.Sprintf("lost: %s's op %s succeeded with no side effect", t.name, id))
			}
		}
		for _, b := range t.bad {
			findings = append(findings, fmt.Sprintf("%s: %s", t.name, b))
		}
		r.logger.Info("chaos-cells: tenant", slog.String("tenant", t.name), slog.String("cell", want), slog.Int("ops", len(t.keys)),
			slog.Any("answers", t.answers), slog.Int("dropped_by_kills", t.dropped))
		t.mu.Unlock()
	}
	for _, ops := range cellOps {
		for _, o := range ops {
			if !slices.ContainsFunc(r.tenants, func(t *cellTenant) bool { return t.keys[o.key] == o.id }) {
				findings = append(findings, fmt.Sprintf("op %s (%s, key %s) answered no caller", o.id, o.tenant, o.key))
			}
		}
	}
	if !r.moved.Load() {
		findings = append(findings, "the mover was never moved")
	}
	fmt.Fprintf(r.cfg.Out, "chaos-cells: %d ops in 2 cells (%v), %d kills, eu crashed for %s (a serve restarted meanwhile served home in %s), mover moved=%t in %s: %d duplicates, %d lost, %d in the wrong cell, %d unsettled, %d findings\n",
		total, statuses, r.kills.Load(), cellsDowntime, r.readyInOutage.Round(100*time.Millisecond), r.moved.Load(), r.moveTook.Round(100*time.Millisecond), dups, lost+noEffect, wrong, unsettled, len(findings))
	return findings, nil
}

func (r *cellsRun) cleanup() {
	for _, p := range r.procs {
		p.stop(5 * time.Second)
		p.closeLog()
	}
	if r.hook != nil {
		r.hook.Close()
	}
	r.pgMu.Lock()
	defer r.pgMu.Unlock()
	for _, pg := range []*localpg.Postgres{r.home, r.eu} {
		if pg != nil {
			_ = pg.Close(context.Background())
		}
	}
}
