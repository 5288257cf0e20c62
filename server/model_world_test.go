package server_test

import (
	"context"
	"fmt"
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

// modelEnv is what every check of the model shares: the Postgres to make schemas in.
type modelEnv struct{ pgURL string }

// modelTenant is one tenant of a check: its agent's and its approver's tokens.
type modelTenant struct {
	name            string
	id              int64
	agent, approver string
	mcp             *mcp.ClientSession
}

// modelWorld is one check's system: a fresh schema, an API process and a worker process
// (restarted by the model), the two fake targets behind a front that loses answers on
// demand, and two tenants.
type modelWorld struct {
	ctx                 context.Context
	pool                *pgxpool.Pool
	cfg                 server.Config
	api, worker         *server.Server
	base                string
	stopAPI, stopWorker func()
	crm, notes          *fakewebhook.Server
	crmURL, notesURL    string
	lossy               *lossyFront
	riverc              *river.Client[pgx.Tx]
	tenants             [2]*modelTenant
	noteTTL             string
	m                   *model
	// seenOps are the ops checkAudited has seen, by id, with their tenant's id: one gone
	// since was purged, and its story must outlive it.
	seenOps map[string]int64
}

func (e *modelEnv) newWorld(t *rapid.T) *modelWorld {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &modelWorld{ctx: ctx, crm: fakewebhook.New(fakewebhook.Config{}), notes: fakewebhook.New(fakewebhook.Config{}),
		noteTTL: "30s", m: newModel(), seenOps: map[string]int64{}}
	w.lossy = &lossyFront{next: w.crm, drop: map[string]string{}}
	crm, notes := httptest.NewServer(w.lossy), httptest.NewServer(w.notes)
	t.Cleanup(crm.Close)
	t.Cleanup(notes.Close)
	w.crmURL, w.notesURL = crm.URL, notes.URL
	sc, err := scratch.New(ctx, e.pgURL, "t_", func(c *pgxpool.Config) { c.MaxConns = 20 })
	if err != nil {
		t.Fatalf("test schema: %v", err)
	}
	t.Cleanup(func() { _ = sc.Close(context.Background()) })
	w.pool = sc.Pool
	w.cfg = w.serverConfig(t, e.pgURL)
	apiCfg := w.cfg
	apiCfg.Roles = server.Roles{API: true}
	w.api, w.base, w.stopAPI = startModelServer(t, ctx, apiCfg)
	t.Cleanup(func() { w.stopAPI() })
	w.startWorker(t)
	t.Cleanup(func() { w.stopWorker() })
	w.riverc, err = river.NewClient(riverpgxv5.New(w.pool), &river.Config{})
	if err != nil {
		t.Fatalf("river client: %v", err)
	}
	w.makeTenants(t)
	return w
}

// serverConfig is a server's configuration on the check's schema: reconciles often, and
// purges only when the model says so.
func (w *modelWorld) serverConfig(t *rapid.T, pgURL string) server.Config {
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatalf("database URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", w.pool.Config().ConnConfig.RuntimeParams["search_path"])
	u.RawQuery = q.Encode()
	cfg := server.Defaults()
	cfg.DatabaseURL = u.String()
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

// startModelServer builds and runs a server; stop cancels it and waits for its end.
func startModelServer(t *rapid.T, ctx context.Context, cfg server.Config) (*server.Server, string, func()) {
	ctx, cancel := context.WithCancel(ctx)
	srv, err := server.New(ctx, cfg, nil)
	if err != nil {
		cancel()
		t.Fatalf("server.New: %v", err)
	}
	addr, err := srv.Listen()
	if err != nil {
		cancel()
		srv.Close()
		t.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	base := ""
	if addr != nil {
		base = "http://" + addr.String()
	}
	return srv, base, func() {
		once.Do(func() { cancel(); <-done; srv.Close() })
	}
}

// startWorker starts the worker process: dispatch, steps, the sweeper.
func (w *modelWorld) startWorker(t *rapid.T) {
	cfg := w.cfg
	cfg.Roles = server.Roles{Worker: true, Periodic: true}
	cfg.Addr = "127.0.0.1:0"
	w.worker, _, w.stopWorker = startModelServer(t, w.ctx, cfg)
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
