package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"pgregory.net/rapid"

	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/devkit/scratch"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
)

// modelCatalog is the model's catalog: accounts at the crm target (no lookup path, so
// a lost answer waits for a person in needs_review; close_account acts only on the
// tenant's own accounts), and a composite note_then_wipe at the notes target whose
// note (short TTL) is compensated by an unnote and whose wipe is unsafe (it waits for
// an approval).
func modelCatalog(crm, notes, noteTTL string) string {
	return `
targets:
  crm: {base_url: ` + crm + `}
  notes: {base_url: ` + notes + `, lookup_path: /_lookup}
tools:
  crm.open_account:
    description: Open an account.
    class: write
    target: crm
    path: /accounts
    input_schema: {type: object, properties: {ref: {type: string}}, required: [ref]}
  crm.close_account:
    description: Close an account.
    class: write
    target: crm
    path: /accounts/{account}/close
    owned: [account]
    input_schema: {type: object, properties: {account: {type: string}, ref: {type: string}}, required: [account, ref]}
  crm.note:
    description: Write a short-lived note.
    class: write
    target: notes
    path: /short
    ttl: ` + noteTTL + `
    input_schema: {type: object, properties: {ref: {type: string}}, required: [ref]}
  crm.unnote:
    description: Strike a note out.
    class: write
    target: notes
    path: /unnote
    input_schema: {type: object, properties: {ref: {type: string}, note: {type: string}}, required: [ref]}
  crm.wipe:
    description: Wipe the records.
    class: unsafe
    target: notes
    path: /wipe
    input_schema: {type: object, properties: {ref: {type: string}}, required: [ref]}
  crm.note_then_wipe:
    description: Note, then wipe.
    input_schema: {type: object, properties: {ref: {type: string}}, required: [ref]}
    steps:
      - name: note
        tool: crm.note
        args: {ref: {$from: /call/ref}}
        compensate:
          tool: crm.unnote
          args: {ref: {$from: /call/ref}, note: {$from: /steps/note/vendor_ref}}
      - name: wipe
        tool: crm.wipe
        args: {ref: {$from: /call/ref}}
`
}

// modelEnv is what every check of the model shares: the Postgres to make schemas in,
// and whether its worlds run two cells (TestModelCells).
type modelEnv struct {
	pgURL string
	cells bool
}

// modelTenant is one tenant of a check: its agent's and its approver's tokens.
type modelTenant struct {
	name            string
	id              int64
	agent, approver string
	mcp             *mcp.ClientSession
}

// modelWorld is one check's system: a fresh schema (two, one per cell, with cells), an
// API process and a worker process (restarted by the model), the two fake targets
// behind a front that loses answers on demand, and two tenants.
type modelWorld struct {
	ctx              context.Context
	pool             *pgxpool.Pool // the home cell's
	cellPools        map[string]*pgxpool.Pool
	cellNames        []string // the home cell first
	cellOf           [2]string
	cfg              server.Config
	api, worker      *modelProcess
	base             string
	crm, notes       *fakewebhook.Server
	crmURL, notesURL string
	lossy            *lossyFront
	rivercs          map[string]*river.Client[pgx.Tx]
	tenants          [2]*modelTenant
	noteTTL          string
	m                *model
	// seenOps are the ops checkAudited has seen, by id, with their tenant's id: one gone
	// since was purged, and its story must outlive it.
	seenOps map[string]int64
}

// modelProcess is one oncebox process of the world: a Server, or with cells a Cells
// router and a Server per cell.
type modelProcess struct {
	srv  *server.Server
	cs   *server.Cells
	base string
	stop func()
}

// in returns the process's Server of the named cell.
func (p *modelProcess) in(cell string) *server.Server {
	if p.cs != nil {
		return p.cs.Server(cell)
	}
	return p.srv
}

// servers returns every Server of the process.
func (p *modelProcess) servers() []*server.Server {
	if p.cs != nil {
		return p.cs.Servers()
	}
	return []*server.Server{p.srv}
}

func (e *modelEnv) newWorld(t *rapid.T) *modelWorld {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &modelWorld{ctx: ctx, crm: fakewebhook.New(fakewebhook.Config{}), notes: fakewebhook.New(fakewebhook.Config{}),
		noteTTL: "30s", m: newModel(), seenOps: map[string]int64{}, cellOf: [2]string{cells.Home, cells.Home},
		cellPools: map[string]*pgxpool.Pool{}, rivercs: map[string]*river.Client[pgx.Tx]{}}
	w.lossy = &lossyFront{next: w.crm, drop: map[string]string{}}
	crm, notes := httptest.NewServer(w.lossy), httptest.NewServer(w.notes)
	t.Cleanup(crm.Close)
	t.Cleanup(notes.Close)
	w.crmURL, w.notesURL = crm.URL, notes.URL
	w.cellNames = []string{cells.Home}
	if e.cells {
		w.cellNames = append(w.cellNames, "eu")
	}
	for _, name := range w.cellNames {
		sc, err := scratch.New(ctx, e.pgURL, "t_", func(c *pgxpool.Config) { c.MaxConns = 20 })
		if err != nil {
			t.Fatalf("test schema: %v", err)
		}
		t.Cleanup(func() { _ = sc.Close(context.Background()) })
		w.cellPools[name] = sc.Pool
		if w.rivercs[name], err = river.NewClient(riverpgxv5.New(sc.Pool), &river.Config{}); err != nil {
			t.Fatalf("river client: %v", err)
		}
	}
	w.pool = w.cellPools[cells.Home]
	if e.cells {
		if _, err := cells.AddCell(ctx, w.pool, w.cellPools["eu"], "eu"); err != nil {
			t.Fatalf("add cell eu: %v", err)
		}
	}
	w.cfg = w.serverConfig(t, e.pgURL)
	apiCfg := w.cfg
	apiCfg.Roles = server.Roles{API: true}
	w.api = startModelProcess(t, ctx, apiCfg)
	w.base = w.api.base
	t.Cleanup(func() { w.api.stop() })
	w.startWorker(t)
	t.Cleanup(func() { w.worker.stop() })
	w.makeTenants(t)
	return w
}

// schemaURL is pgURL bound to pool's schema.
func schemaURL(t *rapid.T, pgURL string, pool *pgxpool.Pool) *url.URL {
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatalf("database URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", pool.Config().ConnConfig.RuntimeParams["search_path"])
	u.RawQuery = q.Encode()
	return u
}

// serverConfig is a server's configuration on the check's schema: reconciles often, and
// purges only when the model says so.
func (w *modelWorld) serverConfig(t *rapid.T, pgURL string) server.Config {
	u := schemaURL(t, pgURL, w.pool)
	q := u.Query()
	cfg := server.Defaults()
	cfg.DatabaseURL = u.String()
	if eu, ok := w.cellPools["eu"]; ok {
		cfg.Cells = "eu=" + schemaURL(t, pgURL, eu).String()
		cfg.CellDirectoryRefresh = 100 * time.Millisecond
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = filepath.Join(os.TempDir(), fmt.Sprintf("oncebox-model-%d-%s.yaml", os.Getpid(),
		strings.TrimPrefix(q.Get("search_path"), "t_")))
	t.Cleanup(func() { _ = os.Remove(cfg.ToolsFile) })
	w.writeCatalog(t, cfg.ToolsFile)
	cfg.ReconcileInterval = time.Second
	cfg.WebhookTimeout = 2 * time.Second
	cfg.WebhookLookupLag = 3 * time.Second
	cfg.Queues["webhook"] = dispatch.QueueConfig{MaxWorkers: 5, JobTimeout: 3 * time.Second}
	cfg.PurgeInterval = time.Hour // the model purges by hand, after it moved the clock
	return cfg
}

func (w *modelWorld) writeCatalog(t *rapid.T, path string) {
	if err := os.WriteFile(path, []byte(modelCatalog(w.crmURL, w.notesURL, w.noteTTL)), 0o600); err != nil {
		t.Fatalf("write catalog: %v", err)
	}
}

// startModelProcess builds and runs a process (a Server, or a Cells router when cfg
// names cells); its stop cancels it and waits for its end.
func startModelProcess(t *rapid.T, ctx context.Context, cfg server.Config) *modelProcess {
	ctx, cancel := context.WithCancel(ctx)
	p := &modelProcess{}
	var (
		run     func(context.Context) error
		release func()
		addr    net.Addr
		err     error
	)
	if cfg.Cells != "" {
		if p.cs, err = server.NewCells(ctx, cfg, nil); err == nil {
			run, release = p.cs.Run, p.cs.Close
			addr, err = p.cs.Listen()
		}
	} else if p.srv, err = server.New(ctx, cfg, nil); err == nil {
		run, release = p.srv.Run, p.srv.Close
		addr, err = p.srv.Listen()
	}
	if err != nil {
		cancel()
		if release != nil {
			release()
		}
		t.Fatalf("start a process: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	if p.cs != nil {
		select {
		case <-p.cs.Serving():
		case err := <-done:
			cancel()
			release()
			t.Fatalf("a process stopped before it served: %v", err)
		}
	}
	if addr != nil {
		p.base = "http://" + addr.String()
	}
	var once sync.Once
	p.stop = func() { once.Do(func() { cancel(); <-done; release() }) }
	return p
}

// startWorker starts the worker process: dispatch, steps, the sweeper.
func (w *modelWorld) startWorker(t *rapid.T) {
	cfg := w.cfg
	cfg.Roles = server.Roles{Worker: true, Periodic: true}
	cfg.Addr = "127.0.0.1:0"
	w.worker = startModelProcess(t, w.ctx, cfg)
}

func (w *modelWorld) makeTenants(t *rapid.T) {
	store := tenant.NewStore(w.pool)
	for i, name := range []string{"acme", "globex"} {
		tn, agent, err := store.Create(w.ctx, name)
		if err != nil {
			t.Fatalf("tenant %s: %v", name, err)
		}
		approver, err := store.NewTokenWithRole(w.ctx, name, tenant.RoleApprover)
		if err != nil {
			t.Fatalf("approver of %s: %v", name, err)
		}
		w.tenants[i] = &modelTenant{name: name, id: tn.ID, agent: agent, approver: approver}
	}
}

// mcpSession returns the tenant's MCP session, opened at its first use.
func (w *modelWorld) mcpSession(t *rapid.T, tn *modelTenant) *mcp.ClientSession {
	if tn.mcp != nil {
		return tn.mcp
	}
	transport := &mcp.StreamableClientTransport{Endpoint: w.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: tn.agent}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, nil).Connect(w.ctx, transport, nil)
	if err != nil {
		t.Fatalf("MCP session of %s: %v", tn.name, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	tn.mcp = cs
	return cs
}
