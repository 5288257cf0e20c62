package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// Cookie names. Both are scoped to Prefix, HttpOnly and SameSite=Strict.
const (
	// sessionCookie holds the session's secret; the database stores its SHA-256.
	sessionCookie = "oncebox_console"
	// preCookie holds the CSRF secret of the sign-in forms, before there is a session.
	preCookie = "oncebox_console_pre"
)

// maxTokenField bounds the token a sign-in form may send.
const maxTokenField = 200

// errNoSession is a request without a live session.
var errNoSession = errors.New("no live console session")

// sessionInfo is the signed-in principal and the session's CSRF token.
type sessionInfo struct {
	principal *tenant.Principal
	csrf      string
}

// secret returns a fresh random secret, URL-safe.
func secret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("console: random secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func hashOf(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// csrfFor derives a form token from a secret (the session's, or the sign-in form's):
// a page can show it, and it proves nothing without the cookie it is derived from.
func csrfFor(secret string) string {
	sum := sha256.Sum256([]byte("oncebox console csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// session returns who the request's session acts as and its CSRF token; nil without a
// live session.
func (c *Console) session(r *http.Request) (*tenant.Principal, string, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 100 {
		return nil, "", nil
	}
	var (
		p       tenant.Principal
		expires time.Time
	)
	err = c.cfg.Pool.QueryRow(r.Context(), sqlSession, hashOf(ck.Value)).Scan(&p.ID, &p.Name, &p.CreatedAt, &p.TokenID, &p.Role, &p.Person, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("console: read session: %w", err)
	}
	return &p, csrfFor(ck.Value), nil
}

// signedInFunc is a handler for a signed-in person.
type signedInFunc func(w http.ResponseWriter, r *http.Request, s *sessionInfo)

// need is what a page asks of the session's role: the test, and the tokens that pass
// it in words, for the refusal of a role that does not.
type need struct {
	allows func(tenant.Role) bool
	tokens string
}

var (
	// toDecide: the pages of approvers (approvals, reviews, lookups, finance, the
	// overview), with the same rule as the API's approve, reject and resolve routes.
	toDecide = need{tenant.Role.CanDecide, "an approver or admin token"}
	// toAudit: the Audit page and its downloads.
	toAudit = need{tenant.Role.CanAudit, "an auditor or admin token"}
	// toSignOut: whoever may sign in.
	toSignOut = need{mayUseConsole, "a token of a person"}
)

// mayUseConsole reports whether a token of role r may sign in: one that decides or one
// that reads the audit log.
func mayUseConsole(r tenant.Role) bool { return r.CanDecide() || r.CanAudit() }

// landing is where a person of role r lands after signing in: the overview, or the
// Audit page for a role that does not decide (an auditor).
func landing(r tenant.Role) string {
	if r.CanDecide() {
		return defaultNext
	}
	return "/console/audit"
}

// signedIn runs next for a live session whose role the page's need allows, after
// checking the CSRF token of a form post; otherwise it sends the person to the sign-in
// form (a page without a session) or refuses (a post without one, or a role the page
// does not serve: 403, whatever the method).
func (c *Console) signedIn(n need, next signedInFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, csrf, err := c.session(r)
		if err != nil {
			c.internal(w, r, nil, err)
			return
		}
		if p == nil {
			ended := c.forgetStaleCookie(w, r)
			if r.Method == http.MethodGet {
				to := "/console/signin?next=" + url.QueryEscape(r.URL.RequestURI())
				if ended {
					to += "&ended=1"
				}
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			}
			c.refuse(w, r, nil, http.StatusUnauthorized, protocol.ProblemSignedOut, "Your session ended or was never opened; sign in again.")
			return
		}
		s := &sessionInfo{principal: p, csrf: csrf}
		if !mayUseConsole(p.Role) {
			c.refuse(w, r, nil, http.StatusForbidden, protocol.ProblemForbidden, fmt.Sprintf("This session's token has the role %s; the console needs an approver, auditor or admin token.", p.Role))
			return
		}
		if !n.allows(p.Role) {
			sentence := fmt.Sprintf("This session's token has the role %s; this page needs %s.", p.Role, n.tokens)
			if p.Role.CanAudit() {
				sentence += " Your role reads the Audit page."
			}
			c.refuse(w, r, c.viewFor(s, ""), http.StatusForbidden, protocol.ProblemForbidden, sentence)
			return
		}
		if r.Method == http.MethodPost {
			if !sameToken(r.PostFormValue("csrf"), csrf) {
				c.refuse(w, r, c.viewFor(s, ""), http.StatusForbidden, "csrf", "This form's security token is missing or stale; reload the page and send it again.")
				return
			}
		}
		next(w, r, s)
	}
}

// forgetStaleCookie clears a session cookie that opens no live session (it expired,
// its token was revoked, or the database forgot it) and reports whether there was one:
// the sign-in form then says the session ended.
func (c *Console) forgetStaleCookie(w http.ResponseWriter, r *http.Request) bool {
	if ck, err := r.Cookie(sessionCookie); err != nil || ck.Value == "" {
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	return true
}

// signInNotices are the sign-in form's notices, by the query parameter that asks for
// one: the sentence is fixed here, nothing of the URL is shown.
var signInNotices = []struct{ param, sentence string }{
	{"ended", "Your session ended (it expired, its token was revoked, or the server forgot it); sign in again."},
	{"signedout", "You signed out."},
}

// signInNotice returns the notice the sign-in form's query asks for, or "".
func signInNotice(r *http.Request) string {
	for _, n := range signInNotices {
		if r.URL.Query().Get(n.param) == "1" {
			return n.sentence
		}
	}
	return ""
}

// preSecret returns the sign-in forms' CSRF secret, setting its cookie when missing.
func (c *Console) preSecret(w http.ResponseWriter, r *http.Request) (string, error) {
	if ck, err := r.Cookie(preCookie); err == nil && len(ck.Value) >= 40 && len(ck.Value) <= 100 {
		return ck.Value, nil
	}
	s, err := secret()
	if err != nil {
		return "", err
	}
	http.SetCookie(w, &http.Cookie{Name: preCookie, Value: s, Path: Prefix, HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	return s, nil
}

// checkPre checks a sign-in form's CSRF token against the pre-session cookie.
func checkPre(r *http.Request) bool {
	ck, err := r.Cookie(preCookie)
	return err == nil && sameToken(r.PostFormValue("csrf"), csrfFor(ck.Value))
}

// safeNext returns where to go after signing in: a console path, never another site.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix) && !strings.HasPrefix(next, "//") && !strings.Contains(next, "\\") {
		return next
	}
	return defaultNext
}

// defaultNext is where a sign-in goes when it names no page: the person's landing page.
const defaultNext = "/console/overview"

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	pre, err := c.preSecret(w, r)
	if err != nil {
		c.internal(w, r, nil, err)
		return
	}
	c.render(w, r, http.StatusOK, "signin", &view{Title: "Sign in", CSRF: csrfFor(pre), Next: safeNext(r.URL.Query().Get("next")),
		Notice: signInNotice(r)})
}

// signIn exchanges an approver, auditor or admin token for a session.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	pre, err := c.preSecret(w, r)
	if err != nil {
		c.internal(w, r, nil, err)
		return
	}
	v := &view{Title: "Sign in", CSRF: csrfFor(pre), Next: safeNext(r.PostFormValue("next"))}
	if !checkPre(r) {
		c.refuseForm(w, r, v, http.StatusForbidden, protocol.ProblemCSRF, "This form's security token is missing or stale; reload the page and sign in again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" || len(token) > maxTokenField {
		c.refuseForm(w, r, v, http.StatusBadRequest, protocol.ProblemInvalidRequest, "Paste an approver, auditor or admin API token (obx_…) to sign in.")
		return
	}
	p, err := c.cfg.Tenants.Authenticate(r.Context(), token)
	if errors.Is(err, tenant.ErrUnauthorized) {
		c.refuseForm(w, r, v, http.StatusUnauthorized, protocol.ProblemUnauthorized, "This token is unknown or revoked.")
		return
	}
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	c.openSession(w, r, p, v)
}

// openSession signs p in, unless its role neither decides nor reads the audit log. An
// auditor sent to the default page lands on the Audit page instead.
func (c *Console) openSession(w http.ResponseWriter, r *http.Request, p *tenant.Principal, v *view) {
	if !mayUseConsole(p.Role) {
		c.refuseForm(w, r, v, http.StatusForbidden, protocol.ProblemForbidden, fmt.Sprintf(
			"This token has the role %s; the console is for people: sign in with an approver, auditor or admin token of your tenant.", p.Role))
		return
	}
	if p.TokenID == 0 {
		c.refuseForm(w, r, v, http.StatusBadRequest, protocol.ProblemInvalidRequest,
			"This is an access token of an authorization server; the console signs in with an approver, auditor or admin API token of oncebox (obx_…).")
		return
	}
	id, err := secret()
	if err != nil {
		c.internal(w, r, v, err)
		return
	}
	if _, err := c.cfg.Pool.Exec(r.Context(), sqlDeleteExpiredSessions); err != nil {
		c.internal(w, r, v, fmt.Errorf("console: forget expired sessions: %w", err))
		return
	}
	if _, err := c.cfg.Pool.Exec(r.Context(), sqlInsertSession, hashOf(id), p.TokenID, c.cfg.SessionTTL.Seconds()); err != nil {
		c.internal(w, r, v, fmt.Errorf("console: store session: %w", err))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: Prefix, HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: int(c.cfg.SessionTTL.Seconds()), Expires: c.cfg.Now().Add(c.cfg.SessionTTL)})
	if v.Next == defaultNext {
		v.Next = landing(p.Role)
	}
	http.Redirect(w, r, v.Next, http.StatusSeeOther)
}

// refuseForm shows the sign-in form again with the refusal.
func (c *Console) refuseForm(w http.ResponseWriter, r *http.Request, v *view, status int, problemType, sentence string) {
	v.Error = &refusal{Type: problemType, Sentence: sentence}
	c.render(w, r, status, "signin", v)
}

// linkPage shows a one-time link's sign-in button: the link itself changes nothing, so
// a browser or chat preview that fetches it does not use it up.
func (c *Console) linkPage(w http.ResponseWriter, r *http.Request) {
	pre, err := c.preSecret(w, r)
	if err != nil {
		c.internal(w, r, nil, err)
		return
	}
	code := r.URL.Query().Get("code")
	if code == "" || len(code) > 100 {
		c.refuse(w, r, nil, http.StatusBadRequest, protocol.ProblemInvalidRequest, "This sign-in link has no code; copy the whole link.")
		return
	}
	c.render(w, r, http.StatusOK, "link", &view{Title: "Sign in", CSRF: csrfFor(pre), Code: code, Next: defaultNext})
}

// useLink signs in with a one-time link's code, once.
func (c *Console) useLink(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	pre, err := c.preSecret(w, r)
	if err != nil {
		c.internal(w, r, nil, err)
		return
	}
	v := &view{Title: "Sign in", CSRF: csrfFor(pre), Next: defaultNext}
	if !checkPre(r) {
		c.refuseForm(w, r, v, http.StatusForbidden, protocol.ProblemCSRF, "This form's security token is missing or stale; open the link again.")
		return
	}
	code := r.PostFormValue("code")
	var tokenID int64
	err = c.cfg.Pool.QueryRow(r.Context(), sqlUseLink, hashOf(code)).Scan(&tokenID)
	if errors.Is(err, pgx.ErrNoRows) {
		c.refuseForm(w, r, v, http.StatusUnauthorized, protocol.ProblemLinkUsed,
			"This sign-in link is unknown, expired or already used; sign in with a token, or ask for a new link.")
		return
	}
	if err != nil {
		c.internal(w, r, v, fmt.Errorf("console: use link: %w", err))
		return
	}
	var p tenant.Principal
	err = c.cfg.Pool.QueryRow(r.Context(), sqlTokenPrincipal, tokenID).Scan(&p.ID, &p.Name, &p.CreatedAt, &p.TokenID, &p.Role)
	if errors.Is(err, pgx.ErrNoRows) {
		c.refuseForm(w, r, v, http.StatusUnauthorized, protocol.ProblemUnauthorized, "The token this link signs in as was revoked.")
		return
	}
	if err != nil {
		c.internal(w, r, v, fmt.Errorf("console: read link's token: %w", err))
		return
	}
	c.openSession(w, r, &p, v)
}

// signOut ends the session and clears its cookie.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request, _ *sessionInfo) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if _, err := c.cfg.Pool.Exec(r.Context(), sqlDeleteSession, hashOf(ck.Value)); err != nil {
			c.internal(w, r, nil, fmt.Errorf("console: end session: %w", err))
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/console/signin?signedout=1", http.StatusSeeOther)
}

// SignInLink stores a one-time sign-in code for the API token and returns the link's
// path and query (to be put after the server's base URL). The link signs in once, within
// ttl, as the token; the token must be an approver or admin token. `oncebox dev` prints
// one for the demo tenant.
func SignInLink(ctx context.Context, pool *pgxpool.Pool, tenants *tenant.Store, token string, ttl time.Duration) (string, error) {
	p, err := tenants.Authenticate(ctx, token)
	if err != nil {
		return "", fmt.Errorf("console: sign-in link: %w", err)
	}
	if !p.Role.CanDecide() || p.TokenID == 0 {
		return "", fmt.Errorf("console: sign-in link: the token has the role %s; a link signs in as an approver or admin API token (obx_…)", p.Role)
	}
	code, err := secret()
	if err != nil {
		return "", err
	}
	if _, err := pool.Exec(ctx, sqlInsertLink, hashOf(code), p.TokenID, ttl.Seconds()); err != nil {
		return "", fmt.Errorf("console: store sign-in link: %w", err)
	}
	return "/console/link?code=" + code, nil
}
