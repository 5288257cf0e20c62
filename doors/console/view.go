package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/steps"
)

// view is what every page template is given.
type view struct {
	Title string
	// Nav is the page's entry in the navigation ("" on signed-out pages).
	Nav      string
	SignedIn bool
	Tenant   string
	Actor    string
	Role     string
	// Decides and Audits say what the session's role may open: the approvers' pages
	// (tenant.Role.CanDecide), the Audit page (tenant.Role.CanAudit). The navigation
	// shows only those.
	Decides, Audits bool
	// CSRF is the token every form carries.
	CSRF   string
	Error  *refusal
	Notice string
	Next   string
	Code   string

	// OnlyOp, on the approvals page, is the op the page was opened for (?op=, the link
	// an MCP tool call answers while it waits): only that op is shown.
	OnlyOp    string
	Approvals []approvalRow
	Reject    *rejectView
	Reviews   []reviewRow
	Query     string
	Searched  bool
	Found     []opView
	Finance   *financeView
	Overview  *overviewView
	Budgets   []BudgetLine
	Vendors   []vendorRow
	Audit     *auditView
}

// refusal is why a request was refused: a problem type (one of protocol's Problem*
// constants) and a sentence.
type refusal struct {
	Type     string
	Sentence string
}

// Reason is the machine-readable reason of the refusal, the page's data-reason
// attribute: its problem type's slug, such as "wrong-state".
func (r *refusal) Reason() string { return protocol.ProblemSlug(r.Type) }

func (c *Console) viewFor(s *sessionInfo, nav string) *view {
	role := s.principal.Role
	return &view{Nav: nav, SignedIn: true, Tenant: s.principal.Name, Actor: s.principal.Actor(), Role: string(role), CSRF: s.csrf,
		Decides: role.CanDecide(), Audits: role.CanAudit()}
}

var pageNames = []string{"signin", "link", "error", "overview", "approvals", "reject", "review", "lookup", "finance", "budgets", "vendors", "audit"}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"whenp": func(t *time.Time) string {
		if t == nil {
			return "running"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"money": money.Format,
	// limit writes a budget's figure: a count, money, or a "*" amount in words.
	"limit": money.Limit,
	"dash": func(s string) string {
		if s == "" {
			return "—"
		}
		return s
	},
	"join":  strings.Join,
	"upper": strings.ToUpper,
	// parentOf is the parent op id of a composite op's step (its key is
	// steps.Key), "" for any other op.
	"parentOf": parentOf,
	"words":    StatusWords,
	"actor":    ActorName,
	"sub":      func(a, b int) int { return a - b },
}

func parsePages() (map[string]*template.Template, error) {
	layout, err := fs.ReadFile(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout").Funcs(funcs).Parse(string(layout))
		if err != nil {
			return nil, fmt.Errorf("console: template layout: %w", err)
		}
		if t, err = t.ParseFS(templateFiles, "templates/"+name+".html"); err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes a page with the given status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.cfg.Logger.Error("console: render page", "page", page, "error", err)
		http.Error(w, "the console could not render this page; the cause has been logged", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(labelCells(buf.Bytes()))
}

// since says how long ago t was, roughly.
func since(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

func queryEscape(s string) string { return url.QueryEscape(s) }

// parentOf is the parent op id of a composite op's step (its key is steps.Key),
// "" for any other op.
func parentOf(key string) string {
	rest, ok := strings.CutPrefix(key, steps.KeyPrefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}
