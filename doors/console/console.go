package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/doors/pgavail"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// DefaultSessionTTL is Config.SessionTTL's default, stated once: the server's
// configuration, the CLI's --console-session-ttl and the table of docs/configuration.md take it from here.
const DefaultSessionTTL = 12 * time.Hour

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// ReportFunc builds the finance report of one tenant for a window: the same call as
// `oncebox reconcile report --tenant`, so the CSV download is the CLI's, byte for byte.
type ReportFunc func(ctx context.Context, since, until time.Time, tenantID int64) (*finance.Report, error)

// Config configures a Console.
type Config struct {
	// Outbox reads ops and records people's decisions (the API's own calls). Required.
	Outbox *outbox.Outbox
	// Tenants authenticates the API token given at sign-in. Required.
	Tenants *tenant.Store
	// Pool holds the sessions and answers the console's read-only queries. Required.
	Pool *pgxpool.Pool
	// Report builds the finance page's report. Required.
	Report ReportFunc
	// Events, when set, adds what vendors pushed about an op to its timeline.
	Events *vendorevents.Store
	// Budgets, when set, lists a tenant's budgets on the Budgets page (admins only).
	// Defaults to none: the page says no budget bounds the tenant.
	Budgets BudgetsFunc
	// Replays, when set, returns how many enqueues of a tenant were replays since the
	// process started.
	Replays func(tenantID int64) int64
	// SecureCookies marks the console's cookies Secure whatever the request's scheme:
	// set it when people reach the console over HTTPS through a proxy that ends TLS
	// (the server's --public-url is https). Defaults to false: Secure only over TLS.
	SecureCookies bool
	// TrustForwardedProto takes a request whose X-Forwarded-Proto is https for one
	// made over TLS. Set it only when every request comes through a proxy that sets
	// that header itself. Defaults to false.
	TrustForwardedProto bool
	// SessionTTL is how long a sign-in lasts. Defaults to DefaultSessionTTL.
	SessionTTL time.Duration
	// AuditDownloads bounds the Audit page's downloads streaming at once (shared with the
	// API's exports), each on a connection of Pool; past it a download is refused with
	// 429. Defaults to 2 of its own.
	AuditDownloads *audit.Slots
	// Logger receives the real cause of every 500. Tokens are never logged.
	Logger *slog.Logger
	// Now returns the time; defaults to time.Now (tests move it).
	Now func() time.Time
}

// Console is the web console for people: sign-in, approvals, reviews, lookups, the
// finance report, an overview and the audit log. It is an http.Handler serving Prefix.
type Console struct {
	cfg     Config
	mux     *http.ServeMux
	handler http.Handler
	pages   map[string]*template.Template
}

// New builds a Console from cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Outbox == nil || cfg.Tenants == nil || cfg.Pool == nil || cfg.Report == nil {
		return nil, errors.New("console: Config.Outbox, Tenants, Pool and Report are required")
	}
	if cfg.SessionTTL < 0 {
		return nil, fmt.Errorf("console: SessionTTL %s is negative; leave it 0 for the default of %s", cfg.SessionTTL, DefaultSessionTTL)
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.AuditDownloads == nil {
		cfg.AuditDownloads = audit.NewSlots(2)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, mux: http.NewServeMux(), pages: pages}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, fmt.Errorf("console: static files: %w", err)
	}
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/{$}", c.home)
	c.mux.HandleFunc("GET /console/signin", c.signInPage)
	c.mux.HandleFunc("POST /console/signin", c.signIn)
	c.mux.HandleFunc("GET /console/link", c.linkPage)
	c.mux.HandleFunc("POST /console/link", c.useLink)
	c.mux.HandleFunc("POST /console/signout", c.signedIn(toSignOut, c.signOut))
	c.mux.HandleFunc("GET /console/overview", c.signedIn(toDecide, c.overview))
	c.mux.HandleFunc("GET /console/approvals", c.signedIn(toDecide, c.approvals))
	c.mux.HandleFunc("POST /console/approvals", c.signedIn(toDecide, c.decide))
	c.mux.HandleFunc("GET /console/review", c.signedIn(toDecide, c.review))
	c.mux.HandleFunc("POST /console/review", c.signedIn(toDecide, c.resolve))
	c.mux.HandleFunc("GET /console/lookup", c.signedIn(toDecide, c.lookup))
	c.mux.HandleFunc("GET /console/finance", c.signedIn(toDecide, c.finance))
	c.mux.HandleFunc("GET /console/finance.csv", c.signedIn(toDecide, c.financeCSV))
	c.mux.HandleFunc("GET /console/finance-totals.csv", c.signedIn(toDecide, c.financeCSV))
	c.mux.HandleFunc("GET /console/budgets", c.signedIn(toDecide, c.adminOnly("Budgets", c.budgets)))
	c.mux.HandleFunc("GET /console/vendors", c.signedIn(toDecide, c.adminOnly("Vendors", c.vendors)))
	c.mux.HandleFunc("GET /console/audit", c.signedIn(toAudit, c.auditPage))
	c.mux.HandleFunc("GET /console/audit.csv", c.signedIn(toAudit, c.auditDownload))
	c.mux.HandleFunc("GET /console/audit.jsonl", c.signedIn(toAudit, c.auditDownload))
	c.mux.HandleFunc("/console/", c.notFound)
	// Cross-origin posts are refused before anything else (Sec-Fetch-Site, else Origin
	// against Host); every form also carries a CSRF token checked by the handlers.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.refuse(w, r, nil, http.StatusForbidden, protocol.ProblemCrossOrigin,
			"This form was posted from another site; the console only accepts forms from its own pages.")
	}))
	c.handler = cop.Handler(c.mux)
	return c, nil
}

// ServeHTTP serves the console's pages. Every answer is private and never cached.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	c.handler.ServeHTTP(w, r)
}

// home sends a person to their landing page (landing), or to the sign-in form.
func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	p, _, err := c.session(r)
	if err != nil {
		c.internal(w, r, nil, err)
		return
	}
	if p != nil {
		http.Redirect(w, r, landing(p.Role), http.StatusSeeOther)
		return
	}
	to := "/console/signin"
	if c.forgetStaleCookie(w, r) {
		to += "?ended=1"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.refuse(w, r, nil, http.StatusNotFound, protocol.ProblemNoPage, fmt.Sprintf("The console has no page at %s.", r.URL.Path))
}

// internal logs the real cause of a failure and answers a page without it.
func (c *Console) internal(w http.ResponseWriter, r *http.Request, v *view, err error) {
	if pgavail.Unavailable(err) {
		c.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "console request failed: the database is unavailable",
			slog.String("route", r.Pattern), slog.Any("error", err))
		w.Header().Set("Retry-After", "5")
		c.refuse(w, r, v, http.StatusServiceUnavailable, protocol.ProblemStoreUnavailable, "The database is unavailable; reload the page in a few seconds.")
		return
	}
	c.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "console request failed", slog.String("route", r.Pattern), slog.Any("error", err))
	c.refuse(w, r, v, http.StatusInternalServerError, protocol.ProblemInternal, "The console could not show this page. The cause has been logged; retry later.")
}

// refuse answers an error page: a status code, a problem type (the page's data-reason
// is its slug) and a sentence.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, v *view, status int, problemType, sentence string) {
	if v == nil {
		v = &view{}
	}
	v.Title = http.StatusText(status)
	v.Error = &refusal{Type: problemType, Sentence: sentence}
	c.render(w, r, status, "error", v)
}

// secure reports whether r reached the console over HTTPS, so that its cookies are
// marked Secure: over TLS, with Config.SecureCookies, or with a trusted proxy's
// X-Forwarded-Proto.
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || c.cfg.SecureCookies || (c.cfg.TrustForwardedProto && ForwardedHTTPS(r))
}

// ForwardedHTTPS reports whether a proxy said, in X-Forwarded-Proto, that r was made
// over HTTPS (the first value, when proxies chained theirs). It says nothing about
// whether the header can be trusted: only a proxy in front of every request can be.
func ForwardedHTTPS(r *http.Request) bool {
	v, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(v), "https")
}
