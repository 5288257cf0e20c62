package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// CellURL names one cell's database.
type CellURL struct {
	Name string
	URL  string
}

// cellStart is how a --cells pair starts: a cell's name and "=". A comma followed by
// anything else belongs to the URL before it (a multi-host URL: postgres://a,b/db).
var cellStart = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}=`)

// ParseCells parses --cells: name=postgres-URL pairs separated by commas.
func ParseCells(s string) ([]CellURL, error) {
	var out []CellURL
	seen := map[string]bool{cells.Home: true}
	var parts []string
	for part := range strings.SplitSeq(s, ",") {
		if len(parts) > 0 && !cellStart.MatchString(strings.TrimSpace(part)) {
			parts[len(parts)-1] += "," + part
			continue
		}
		parts = append(parts, part)
	}
	for _, part := range parts {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, u, ok := strings.Cut(part, "=")
		if !ok || u == "" {
			return nil, fmt.Errorf("--cells: want name=postgres-URL pairs separated by commas, not %q", redactURL(part))
		}
		if err := cells.CheckName(name); err != nil {
			return nil, fmt.Errorf("--cells: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("--cells: cell %q named twice (the home cell is DATABASE_URL's)", name)
		}
		seen[name] = true
		out = append(out, CellURL{Name: name, URL: u})
	}
	return out, nil
}

// redactURL returns s with a URL's password cut out, for an error.
func redactURL(s string) string {
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		rest, name = s, ""
	}
	if u, err := url.Parse(rest); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		rest = u.String()
	}
	if name == "" {
		return rest
	}
	return name + "=" + rest
}

// routeTimeout bounds how long the router waits for the cells to check a credential.
const routeTimeout = 5 * time.Second

// cellCookie names the cell of a console session: the console's pages go to the cell
// that signed the person in.
const cellCookie = "oncebox_cell"

// Cells is one oncebox process serving several cells (docs/scaling.md): a whole Server
// per cell (its pools, River client, periodic jobs and doors), and in front of them a
// router that sends each call to its tenant's cell, read from the directory.
type Cells struct {
	cfg    Config
	logger *slog.Logger
	names  []string // the home cell first
	// servers holds each cell's Server once it is built: a cell whose Postgres did not
	// answer at the start (pending) is built in the background by Run, and is absent
	// until then.
	serversMu sync.RWMutex
	servers   map[string]*Server
	pending   []CellURL
	dir       *cells.Directory
	handler   http.Handler
	listener  net.Listener
	healthL   net.Listener
	stopping  chan struct{}
	stopOnce  sync.Once
	// serving is closed when Run starts serving: every cell built so far serves.
	serving chan struct{}
	// routes remembers, for up to the token cache's TTL, which cell a token's tenant
	// was found in, so that the other cells are asked once, not at every call (a cell
	// caches only the tokens it holds). The cell still checks the token itself; the
	// directory is read again at every call.
	routesMu sync.Mutex
	routes   map[[sha256.Size]byte]route
}

// route is a remembered routing of a token.
type route struct {
	cell, tenant string
	expires      time.Time
}

// maxRoutes bounds the remembered routings; past it they start over.
const maxRoutes = 10000

// NewCells builds a Server for the home cell (cfg.DatabaseURL) and each of cfg.Cells,
// checks that each database is the directory's cell of that name, and the router. The
// home cell must answer (it holds the directory); a cell that does not answer within
// cfg.CellStartupWait is left pending: Run builds it in the background, and its tenants
// are answered 503 cell-unavailable until then.
func NewCells(ctx context.Context, cfg Config, logger *slog.Logger) (*Cells, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	list, err := ParseCells(cfg.Cells)
	if err != nil {
		return nil, err
	}
	if cfg.CellDirectoryRefresh <= 0 || cfg.CellStartupWait <= 0 {
		return nil, errors.New("--cell-directory-refresh and --cell-startup-wait must be positive")
	}
	c := &Cells{cfg: cfg, logger: logger, servers: map[string]*Server{}, stopping: make(chan struct{}), serving: make(chan struct{}),
		routes: map[[sha256.Size]byte]route{}, names: []string{cells.Home}}
	home, err := New(ctx, c.cellConfig(CellURL{Name: cells.Home, URL: cfg.DatabaseURL}, cfg.StartupWait), logger.With(slog.String("cell", cells.Home)))
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w", cells.Home, err)
	}
	c.servers[cells.Home] = home
	for _, cu := range list {
		c.names = append(c.names, cu.Name)
		srv, err := c.buildCell(ctx, cu)
		switch {
		case errors.Is(err, errNoAnswer):
			logger.Warn("cells: a cell's Postgres does not answer; it starts in the background and its tenants get 503 cell-unavailable meanwhile",
				slog.String("cell", cu.Name), slog.Any("error", err))
			c.pending = append(c.pending, cu)
		case err != nil:
			c.Close()
			return nil, err
		default:
			c.servers[cu.Name] = srv
		}
	}
	c.dir = cells.NewDirectory(home.pool)
	if err := c.dir.Refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if cfg.Roles.API {
		c.handler = home.hsts(http.HandlerFunc(c.serve))
	}
	return c, nil
}

// cellConfig is the configuration of one cell's Server.
func (c *Cells) cellConfig(cu CellURL, wait time.Duration) Config {
	ccfg := c.cfg
	ccfg.Cells, ccfg.DatabaseURL, ccfg.HealthAddr, ccfg.Listener, ccfg.embedded = "", cu.URL, "", nil, true
	ccfg.StartupWait = wait
	return ccfg
}

// buildCell builds a cell's Server, waiting up to CellStartupWait for its Postgres, and
// checks that its database is the directory's cell of that name.
func (c *Cells) buildCell(ctx context.Context, cu CellURL) (*Server, error) {
	srv, err := New(ctx, c.cellConfig(cu, c.cfg.CellStartupWait), c.logger.With(slog.String("cell", cu.Name)))
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w", cu.Name, err)
	}
	if err := cells.CheckCell(ctx, c.built(cells.Home).pool, srv.pool, cu.Name); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// Servers returns the Server of every cell that is built, the home cell's first.
func (c *Cells) Servers() []*Server {
	var out []*Server
	for _, name := range c.names {
		if s := c.built(name); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Server returns the Server of the named cell (nil: no such cell, or not built yet).
func (c *Cells) Server(name string) *Server { return c.built(name) }

func (c *Cells) built(name string) *Server {
	c.serversMu.RLock()
	defer c.serversMu.RUnlock()
	return c.servers[name]
}

// server returns the Server of the named cell once it serves (nil before): built, and
// its Run has stored the flags' policy and started its outbox. A call routed to a cell
// before would pass the gates the flags set without them.
func (c *Cells) server(name string) *Server {
	s := c.built(name)
	if s == nil {
		return nil
	}
	select {
	case <-s.started:
		return s
	default:
		return nil
	}
}

// ReloadCatalog reloads the tool catalog of every cell that is built (SIGHUP); a cell
// built later reads the file as it is then.
func (c *Cells) ReloadCatalog(ctx context.Context) error {
	var errs []error
	for _, s := range c.Servers() {
		errs = append(errs, s.ReloadCatalog(ctx))
	}
	return errors.Join(errs...)
}

// Serving is closed once Run serves: every cell built at the start serves (a cell that
// did not answer then is served once it does).
func (c *Cells) Serving() <-chan struct{} { return c.serving }

// Directory returns the process's directory cache.
func (c *Cells) Directory() *cells.Directory { return c.dir }

// Handler returns the router.
func (c *Cells) Handler() http.Handler { return c.handler }

// Listen binds the API address and the probes' (so a caller can learn a random port
// before Run).
func (c *Cells) Listen() (net.Addr, error) {
	if c.healthL == nil && c.cfg.HealthAddr != "" {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", c.cfg.HealthAddr)
		if err != nil {
			return nil, fmt.Errorf("listen on --health-addr %s: %w", c.cfg.HealthAddr, err)
		}
		c.healthL = l
	}
	if c.handler == nil {
		return nil, nil
	}
	if c.listener == nil && c.cfg.Listener != nil {
		c.listener = c.cfg.Listener
	}
	if c.listener == nil {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", c.cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", c.cfg.Addr, err)
		}
		c.listener = l
	}
	return c.listener.Addr(), nil
}

// Run runs every cell's Server and the router until ctx ends. A cell whose Server
// stops with an error (its Postgres gone past the startup wait does not: a running
// Server rides out an outage) stops the process.
func (c *Cells) Run(ctx context.Context) error {
	if _, err := c.Listen(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(c.names))
	runCell := func(name string, s *Server) {
		err := s.Run(ctx)
		if err != nil {
			err = fmt.Errorf("cell %s: %w", name, err)
		}
		errs <- err
		cancel()
	}
	for _, name := range c.names {
		if s := c.built(name); s != nil {
			go runCell(name, s)
		}
	}
	for _, cu := range c.pending {
		go c.startLater(ctx, cu, runCell, errs)
	}
	// The probes answer at once (ready once a cell serves); the router serves once every
	// cell built so far serves (or one failed, which ends ctx), as a Server alone does: a
	// pending cell's tenants are refused until it serves.
	var hsrv *http.Server
	if c.healthL != nil {
		mux := http.NewServeMux()
		c.registerHealth(mux)
		hsrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second}
		go func() { _ = hsrv.Serve(c.healthL) }()
	}
	for _, s := range c.Servers() {
		select {
		case <-s.started:
		case <-ctx.Done():
		}
	}
	if ctx.Err() == nil {
		close(c.serving)
	}
	dirDone := make(chan struct{})
	go func() {
		defer close(dirDone)
		c.dir.Run(ctx, c.cfg.CellDirectoryRefresh, func(err error) {
			c.logger.Warn("cells: the directory could not be read; the last one read stays in force", slog.Any("error", err))
		})
	}()
	var srv *http.Server
	if c.listener != nil {
		srv = &http.Server{Handler: c.handler, ReadHeaderTimeout: min(10*time.Second, c.cfg.HTTPReadTimeout),
			ReadTimeout: c.cfg.HTTPReadTimeout, WriteTimeout: c.cfg.HTTPWriteTimeout, IdleTimeout: c.cfg.HTTPIdleTimeout}
		go func() { _ = srv.Serve(c.listener) }()
		c.logger.Info("oncebox serving", slog.String("addr", c.listener.Addr().String()), slog.Any("cells", c.names))
	}
	<-ctx.Done()
	c.stopOnce.Do(func() { close(c.stopping) })
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownGrace)
		go func() { defer scancel(); _ = srv.Shutdown(sctx) }()
	}
	var first error
	for range c.names {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	<-dirDone
	if hsrv != nil {
		_ = hsrv.Close()
	}
	return first
}

// startLater builds a pending cell in the background, trying again until it is built
// (each try waits up to CellStartupWait for its Postgres), then runs it with run; it
// reports on errs itself only when ctx ends first.
func (c *Cells) startLater(ctx context.Context, cu CellURL, run func(string, *Server), errs chan<- error) {
	for {
		srv, err := c.buildCell(ctx, cu)
		if err == nil {
			c.serversMu.Lock()
			c.servers[cu.Name] = srv
			c.serversMu.Unlock()
			c.logger.Info("cells: a cell that did not answer at the start now serves", slog.String("cell", cu.Name))
			run(cu.Name, srv)
			return
		}
		if ctx.Err() != nil {
			errs <- nil
			return
		}
		pause := time.Second
		if !errors.Is(err, errNoAnswer) {
			pause = max(pause, c.cfg.CellStartupWait) // not an outage: say it less often
		}
		c.logger.Warn("cells: a cell is still not started; its tenants get 503 cell-unavailable", slog.String("cell", cu.Name), slog.Any("error", err))
		select {
		case <-ctx.Done():
			errs <- nil
			return
		case <-time.After(pause):
		}
	}
}

// Close releases every cell's pools.
func (c *Cells) Close() {
	c.serversMu.RLock()
	defer c.serversMu.RUnlock()
	for _, s := range c.servers {
		s.Close()
	}
}

// registerHealth adds the probes: live while the process runs a handler; ready while
// at least one cell can serve (a cell down answers its own tenants 503, and must not
// take the others' traffic away).
func (c *Cells) registerHealth(mux *http.ServeMux) {
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		writeHealth(w, http.StatusOK, map[string]any{"live": true})
	})
	mux.HandleFunc("GET /readyz", c.readyz)
}

func (c *Cells) readyz(w http.ResponseWriter, r *http.Request) {
	type res struct{ name, reason, detail string }
	ch := make(chan res, len(c.names))
	for _, name := range c.names {
		go func() {
			s := c.server(name)
			if s == nil {
				ch <- res{name, ReadyStoreUnavailable, "not started yet: its Postgres has not answered, or it is starting"}
				return
			}
			reason, detail := s.health.check(r.Context())
			ch <- res{name, reason, detail}
		}()
	}
	body := map[string]any{}
	ready := false
	for range c.names {
		x := <-ch
		if x.reason == "" {
			ready = true
			body[x.name] = "ready"
		} else {
			body[x.name] = x.reason + ": " + x.detail
		}
	}
	if ready {
		writeHealth(w, http.StatusOK, map[string]any{"ready": true, "cells": body})
		return
	}
	writeHealth(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": ReadyStoreUnavailable,
		"detail": "No cell can serve.", "cells": body})
}

// serve routes one request.
func (c *Cells) serve(w http.ResponseWriter, r *http.Request) {
	home := c.server(cells.Home)
	if home == nil {
		c.refuse(w, cellUnavailable()) // only while the process stops before it served
		return
	}
	p := r.URL.Path
	switch {
	case p == "/livez" || p == "/readyz":
		mux := http.NewServeMux()
		c.registerHealth(mux)
		mux.ServeHTTP(w, r)
		return
	case p == "/metrics":
		// Each cell's metrics: ?cell=NAME (the home cell's without).
		name := r.URL.Query().Get("cell")
		if s := c.server(name); s != nil {
			s.handler.ServeHTTP(w, r)
			return
		}
		if slices.Contains(c.names, name) {
			c.refuse(w, cellUnavailable()) // not started yet
			return
		}
		home.handler.ServeHTTP(w, r)
		return
	case p == "/console" || strings.HasPrefix(p, "/console/"):
		c.serveConsole(w, r)
		return
	case strings.HasPrefix(p, "/v1/vendor-events/"):
		c.serveVendorEvent(w, r)
		return
	}
	token, ok := bearer(r)
	if !ok {
		// Public routes (the OpenAPI document, discovery, River UI's basic auth) and
		// the 401s of calls without a token: the home cell answers them.
		home.handler.ServeHTTP(w, r)
		return
	}
	s, refusal := c.routeTo(r.Context(), token)
	if refusal != nil {
		c.refuse(w, refusal)
		return
	}
	s.handler.ServeHTTP(w, r)
}

// routeTo is route, with the cell's Server.
func (c *Cells) routeTo(ctx context.Context, token string) (*Server, *protocol.Problem) {
	cell, refusal := c.route(ctx, token)
	if refusal != nil {
		return nil, refusal
	}
	if s := c.server(cell); s != nil {
		return s, nil
	}
	return nil, cellUnavailable()
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}

// route returns the cell of the tenant whose credential token is: every cell checks it
// at once (each with its token cache), and the first whose tenant the directory places
// in that cell wins. A tenant being moved, or whose cell did not answer, gets a refusal.
// A token no cell knows goes to the home cell, which answers it 401.
func (c *Cells) route(ctx context.Context, token string) (string, *protocol.Problem) {
	if len(c.names) == 1 {
		return cells.Home, nil
	}
	key := sha256.Sum256([]byte(token))
	c.routesMu.Lock()
	known, ok := c.routes[key]
	c.routesMu.Unlock()
	if ok && time.Now().Before(known.expires) {
		placed := c.dir.Lookup(known.tenant)
		if placed.MovingTo != "" {
			return "", movingProblem(known.tenant)
		}
		if placed.Cell == known.cell {
			return known.cell, nil
		}
	}
	// The cells that lose the race finish their checks in the background: cancelling
	// a query would cost its connection.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), routeTimeout)
	type answer struct {
		cell string
		p    *tenant.Principal
		err  error
	}
	ch := make(chan answer, len(c.names))
	var wg sync.WaitGroup
	for _, name := range c.names {
		s := c.server(name)
		if s == nil {
			ch <- answer{name, nil, errNoAnswer}
			continue
		}
		wg.Go(func() {
			p, err := s.tenants.Authenticate(ctx, token)
			ch <- answer{name, p, err}
		})
	}
	go func() { wg.Wait(); cancel() }()
	var down []string
	for range c.names {
		a := <-ch
		var refused *tenant.RefusedError
		switch {
		case a.err == nil:
			placed := c.dir.Lookup(a.p.Name)
			if placed.MovingTo != "" {
				return "", movingProblem(a.p.Name)
			}
			if placed.Cell == a.cell {
				c.remember(key, route{cell: a.cell, tenant: a.p.Name})
				return a.cell, nil
			}
			// A copy left in a cell the tenant has left: not its cell.
		case errors.Is(a.err, tenant.ErrUnauthorized), errors.As(a.err, &refused):
		default:
			down = append(down, a.cell)
		}
	}
	if len(down) > 0 {
		return "", cellUnavailable()
	}
	return cells.Home, nil
}

func cellUnavailable() *protocol.Problem {
	return protocol.NewProblem(http.StatusServiceUnavailable, protocol.ProblemCellUnavailable,
		"The cell that holds this tenant cannot be reached; nothing was recorded. Retry after the Retry-After seconds.")
}

func movingProblem(tenant string) *protocol.Problem {
	return protocol.NewProblem(http.StatusServiceUnavailable, protocol.ProblemTenantMoving,
		fmt.Sprintf("Tenant %s is being moved to another cell; nothing was recorded. Retry after the Retry-After seconds.", tenant))
}

// remember keeps a token's routing for the token cache's TTL (none without one).
func (c *Cells) remember(key [sha256.Size]byte, r route) {
	if c.cfg.AuthCacheTTL <= 0 {
		return
	}
	r.expires = time.Now().Add(c.cfg.AuthCacheTTL)
	c.routesMu.Lock()
	if len(c.routes) >= maxRoutes {
		c.routes = map[[sha256.Size]byte]route{}
	}
	c.routes[key] = r
	c.routesMu.Unlock()
}

// refuse answers a routing refusal: 503 with Retry-After.
func (c *Cells) refuse(w http.ResponseWriter, p *protocol.Problem) {
	body, _ := json.Marshal(p) // strings and an int always marshal
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(c.cfg.UnavailableRetryAfter/time.Second))))
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// maxSignInBody bounds the console's sign-in form the router reads for its token.
const maxSignInBody = 64 << 10

// serveConsole sends a console request to the cell of the person's session (the cell
// cookie set at sign-in); a sign-in goes to the cell of the token it carries.
func (c *Cells) serveConsole(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/console/signin" && len(c.names) > 1 {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxSignInBody+1))
		if err != nil || len(body) > maxSignInBody {
			c.server(cells.Home).handler.ServeHTTP(w, r)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		cell, refusal := c.route(r.Context(), strings.TrimSpace(form.Get("token")))
		s := c.server(cell)
		if refusal == nil && s == nil {
			refusal = cellUnavailable()
		}
		if refusal != nil {
			c.refuse(w, refusal)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cellCookie, Value: cell, Path: "/console", HttpOnly: true,
			Secure: c.cfg.PublicHTTPS(), SameSite: http.SameSiteLaxMode})
		s.handler.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/console/link" && len(c.names) > 1 {
		c.serveConsoleLink(w, r)
		return
	}
	if k, err := r.Cookie(cellCookie); err == nil {
		if s := c.server(k.Value); s != nil {
			// The cookie only picks a cell: that cell's own session check decides.
			s.handler.ServeHTTP(w, r)
			return
		}
	}
	c.server(cells.Home).handler.ServeHTTP(w, r)
}

// serveConsoleLink signs a person in with a one-time link: its code is stored hashed
// in the cell of the tenant it was made for, which the router cannot tell from the code,
// so each cell is asked in turn until one does not refuse it (a cell without the code
// refuses it and consumes nothing).
func (c *Cells) serveConsoleLink(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSignInBody+1))
	if err != nil || len(body) > maxSignInBody {
		c.server(cells.Home).handler.ServeHTTP(w, r)
		return
	}
	var refused *recorder
	for _, name := range c.names {
		rec := c.askCell(name, r, body)
		if rec.status == http.StatusUnauthorized || rec.status >= 500 {
			// Not this cell's code, or this cell is down: a 5xx is the answer unless
			// another cell signs the person in.
			if refused == nil || rec.status >= 500 {
				refused = rec
			}
			continue
		}
		http.SetCookie(w, &http.Cookie{Name: cellCookie, Value: name, Path: "/console", HttpOnly: true,
			Secure: c.cfg.PublicHTTPS(), SameSite: http.SameSiteLaxMode})
		rec.writeTo(w)
		return
	}
	refused.writeTo(w)
}

// serveVendorEvent sends a vendor's event to the cell of the tenant its path names
// (a tenant's own Stripe endpoint), or to every cell (the installation's endpoints:
// an event names an op, which one cell holds); a cell that failed to store it gets the
// vendor's retry, which the others deduplicate.
func (c *Cells) serveVendorEvent(w http.ResponseWriter, r *http.Request) {
	if name, ok := strings.CutPrefix(r.URL.Path, vendorevents.PathStripeTenant); ok && name != "" {
		placed := c.dir.Lookup(name)
		s := c.server(placed.Cell)
		switch {
		case placed.MovingTo != "":
			c.refuse(w, protocol.NewProblem(http.StatusServiceUnavailable, protocol.ProblemTenantMoving,
				"This tenant is being moved to another cell; the event was not stored. Retry later."))
		case s == nil:
			c.refuse(w, protocol.NewProblem(http.StatusServiceUnavailable, protocol.ProblemCellUnavailable,
				"This tenant's cell cannot be reached; the event was not stored. Retry later."))
		default:
			s.handler.ServeHTTP(w, r)
		}
		return
	}
	if len(c.names) == 1 {
		c.server(cells.Home).handler.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, c.cfg.VendorEventMaxBodyBytes+1))
	if err != nil {
		c.server(cells.Home).handler.ServeHTTP(w, r)
		return
	}
	var worst *recorder
	for _, name := range c.names {
		rec := c.askCell(name, r, body)
		if worst == nil || (rec.status >= 300 && worst.status < 300) {
			worst = rec
		}
	}
	worst.writeTo(w)
}

// writeTo copies the kept answer to w.
func (r *recorder) writeTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = append(w.Header()[k], v...)
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}

// askCell serves r, with body, by the named cell's handler, and keeps its answer.
func (c *Cells) askCell(name string, r *http.Request, body []byte) *recorder {
	rr := r.Clone(r.Context())
	rr.Body = io.NopCloser(bytes.NewReader(body))
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	s := c.server(name)
	if s == nil {
		c.refuse(rec, cellUnavailable())
		return rec
	}
	s.handler.ServeHTTP(rec, rr)
	return rec
}

// recorder keeps one cell's answer to a broadcast vendor event.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
