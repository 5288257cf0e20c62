package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oncebox/oncebox/tenant"
)

// send makes one request with client and returns its status; a transport error fails t.
func send(t *testing.T, client *http.Client, method, target string, form url.Values, cookie *http.Cookie) int {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		return 0 // not a URL a browser could send
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// FuzzConsoleSignIn posts arbitrary tokens, CSRF fields and pre-session cookies to the
// sign-in form: never a 5xx. `go test -run '^$' -fuzz FuzzConsoleSignIn ./console/`.
func FuzzConsoleSignIn(f *testing.F) {
	e := start(f)
	b := newBrowser(f, e.base)
	_, page := b.get("/console/signin")
	csrf := csrfOf(f, page)
	u, _ := url.Parse(e.base + "/console/")
	pre := ""
	for _, c := range b.c.Jar.Cookies(u) {
		pre = c.Value
	}
	f.Add(e.approver, csrf, pre)
	f.Add(e.agent, csrf, pre)
	f.Add("obx_\x00", csrf, pre)
	f.Add(strings.Repeat("obx_", 2000), "", "")
	f.Add("\xff\xfe", csrf+"x", pre[:len(pre)/2])
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	f.Fuzz(func(t *testing.T, token, csrf, pre string) {
		form := url.Values{"csrf": {csrf}, "token": {token}}
		var ck *http.Cookie
		if c := (&http.Cookie{Name: "oncebox_console_pre", Value: pre}); pre != "" && c.Valid() == nil {
			ck = c
		}
		if st := send(t, client, http.MethodPost, e.base+"/console/signin", form, ck); st >= 500 {
			t.Fatalf("sign-in answered %d", st)
		}
	})
}

// FuzzConsoleDecisions posts arbitrary approve, reject and review forms (with the
// session's valid CSRF token, so they reach the decision code): never a 5xx.
func FuzzConsoleDecisions(f *testing.F) {
	e := start(f)
	b := newBrowser(f, e.base)
	b.signIn(e.approver)
	_, page := b.get("/console/approvals")
	csrf := csrfOf(f, page)
	for _, s := range [][6]string{
		{"approve", e.refundKey, "customer called", "", "", ""},
		{"reject", e.refundKey, "", "", "", ""},
		{"approve", "a\x00b", "r", "\xff", "", ""},
		{"approve", strings.Repeat("k", 5000), strings.Repeat("r", 5000), "", "", ""},
		{"review", e.refundKey, "checked", "", "resend", "on"},
		{"review", e.refundKey, "checked", "re_\x00", "succeeded", ""},
		{"review", "missing", "x", "", "failed", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, decision, key, reason, ref, outcome, newKey string) {
		path := "/console/approvals"
		form := url.Values{"csrf": {csrf}, "key": {key}, "decision": {decision}, "reason": {reason}, "fingerprint": {ref}}
		if decision == "review" {
			path = "/console/review"
			form = url.Values{"csrf": {csrf}, "key": {key}, "outcome": {outcome}, "reason": {reason}, "vendor_ref": {ref}, "new_key": {newKey}}
		}
		if st := send(t, b.c, http.MethodPost, e.base+path, form, nil); st >= 500 {
			t.Fatalf("%s answered %d to %v", path, st, form)
		}
	})
}

// FuzzConsoleFinance asks the finance page and its CSV for arbitrary windows: never a
// 5xx (a window out of range is a 400 before any vendor is listed).
func FuzzConsoleFinance(f *testing.F) {
	e := start(f)
	b := newBrowser(f, e.base)
	b.signIn(e.approver)
	for _, s := range [][2]string{
		{"0001-01-01", ""},
		{"0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z"},
		{"2026-11-01", "2026-12-01"},
		{"2026-12-01T00:00:00+14:00", "2026-12-01T00:00:00-12:00"},
		{"2026-02-30", "x"},
		{"\x00", "\xff"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, since, until string) {
		q := "?since=" + url.QueryEscape(since) + "&until=" + url.QueryEscape(until)
		for _, p := range []string{"/console/finance", "/console/finance.csv"} {
			if st := send(t, b.c, http.MethodGet, e.base+p+q, nil, nil); st >= 500 {
				t.Fatalf("%s%s answered %d", p, q, st)
			}
		}
	})
}

// FuzzConsoleAudit asks the Audit page and its downloads for arbitrary filters, as an
// auditor: never a 5xx (a bad value is a 400 before the log is read).
func FuzzConsoleAudit(f *testing.F) {
	e := start(f)
	auditor, err := e.srv.Tenants().NewTokenWithRole(f.Context(), "acme", tenant.RoleAuditor)
	if err != nil {
		f.Fatal(err)
	}
	b := newBrowser(f, e.base)
	b.signIn(auditor)
	for _, s := range [][7]string{
		{"", "", "", "", "", "", ""},
		{"0001-01-01", "9999-12-31", "stripe.refund", "ada@acme.test", "succeeded", "0", "9223372036854775807"},
		{"0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "", "", "", "-1", "20.00"},
		{"2026-12-01T00:00:00+14:00", "2026-12-01T00:00:00-12:00", "\x00", "\xff", "bogus", "9223372036854775808", ""},
		{"2026-02-30", "x", strings.Repeat("t", 300), "", "needs_review", "", "1e3"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
	}
	f.Fuzz(func(t *testing.T, since, until, tool, person, outcome, minAmount, maxAmount string) {
		q := url.Values{"since": {since}, "until": {until}, "tool": {tool}, "person": {person}, "outcome": {outcome},
			"min_amount": {minAmount}, "max_amount": {maxAmount}}.Encode()
		for _, p := range []string{"/console/audit", "/console/audit.csv", "/console/audit.jsonl"} {
			if st := send(t, b.c, http.MethodGet, e.base+p+"?"+q, nil, nil); st >= 500 {
				t.Fatalf("%s?%s answered %d", p, q, st)
			}
		}
	})
}
