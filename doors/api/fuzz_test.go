package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/tenant"

	"github.com/oncebox/oncebox/doors/api"
)

// FuzzPostOps sends arbitrary bodies, keys, Authorization and Content-Type headers and
// query strings to POST /v1/ops:
// the server must never panic nor answer 5xx, and must always answer an op or a
// problem document. "{token}" in the auth string stands for a valid token. All
// iterations share one schema. `go test` runs the seeds; `go test -fuzz FuzzPostOps`
// explores.
func FuzzPostOps(f *testing.F) {
	// Nothing works the ops here, so a ?wait= would wait its whole length: keep it short.
	e := newEnv(f, func(c *api.Config) { c.MaxWait = 10 * time.Millisecond })
	_, token := e.newTenant(f, "fuzz")

	seeds := []struct {
		body, key, auth string
	}{
		{paymentBody, "k1", "Bearer {token}"},
		{paymentBody, "k1", "Bearer {token}"}, // replay
		{smallRefundBody, "k1", "Bearer {token}"},
		{largeRefundBody, "k2", "bearer {token}"},
		{`{"tool": "sendgrid.mail", "args": {"from": {"email": "a@example.com"}, "to": [{"email": "b@example.com"}], "subject": "hi", "text": "x"}}`, "m1", "Bearer {token}"},
		{`{"tool": "webhook.post", "args": {"target": "crm", "path": "/hook", "body": {"a": [1, {"b": "\u0000"}]}}}`, "w1", "Bearer {token}"},
		{`{"tool": "webhook.post", "args": {"target": "crm", "path": "/hook", "body": 1e999}}`, "w2", "Bearer {token}"},
		{`{"tool": "webhook.post", "args": {"target": "crm", "path": "/hook", "body": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`, "w3", "Bearer {token}"},
		{`{"tool": "stripe.payment_intent", "args": {"amount": 1000, "currency": "usd", "metadata": {"k": "v\u0000"}}, "conversation_id": "c\u0000"}`, "n1", "Bearer {token}"},
		{`{"tool": "stripe.payment_intent", "args": null}`, "n2", "Bearer {token}"},
		{`{"tool": "stripe.payment_intent", "args": "str"}`, "n3", "Bearer {token}"},
		{`{"tool": "stripe.payment_intent", "args": {"amount": 1e2, "currency": "usd"}}`, "n4", "Bearer {token}"},
		{`{"tool": "\ud800", "args": {}}`, "n5", "Bearer {token}"},
		{"\xff\xfe{}", "n6", "Bearer {token}"},
		{`{"tool": "stripe.payment_intent", "args": {"amount": 1000, "currency": "usd"}} trailing`, "n7", "Bearer {token}"},
		{`{}`, "", "Bearer {token}"},
		{`{}`, strings.Repeat("k", 300), "Bearer {token}"},
		{`{}`, "k\x00", "Bearer {token}"},
		{`{}`, "k1", ""},
		{`{}`, "k1", "Bearer "},
		{`{}`, "k1", "Bearer obx_\x00"},
		{`{}`, "k1", "Bearer obx_" + strings.Repeat("a", 300)},
		{`{}`, "k1", "Basic {token}"},
		{``, "k1", "Bearer {token}"},
	}
	contentTypes := []string{"application/json", "application/json; charset=utf-8", "text/plain", "",
		"application/json; charset=latin1", "multipart/form-data; boundary=x", "application/\x00"}
	queries := []string{"", "wait=1ms", "wait=-1", "wait=99999h", "wait=%zz", "history=true&wait=", "a=b&a=c"}
	for i, s := range seeds {
		f.Add([]byte(s.body), s.key, s.auth, contentTypes[i%len(contentTypes)], queries[i%len(queries)])
	}

	f.Fuzz(func(t *testing.T, body []byte, key, auth, contentType, query string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/ops", bytes.NewReader(body))
		r.URL.RawQuery = query // as sent, however malformed
		r.Header.Set("Content-Type", contentType)
		r.Header.Set("Idempotency-Key", key)
		r.Header.Set("Authorization", strings.ReplaceAll(auth, "{token}", token))
		rec := e.do(r)

		require.Less(t, rec.Code, 500, rec.Body.String())
		require.True(t, json.Valid(rec.Body.Bytes()), rec.Body.String())
		switch rec.Code {
		case http.StatusOK, http.StatusAccepted:
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			require.NotEmpty(t, rec.Header().Get("Location"))
		default:
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			var p problemBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			require.True(t, strings.HasPrefix(p.Type, problemTypePrefix), p.Type)
			require.Equal(t, rec.Code, p.Status)
			require.NotContains(t, rec.Body.String(), token)
		}
	})
}

// FuzzDecide sends arbitrary bodies, Content-Types and path keys to approve and
// reject, each time on a fresh op that awaits approval (or on the fuzzed key): the
// server must never panic nor answer 5xx, and must answer an op or a problem document.
// `go test -fuzz FuzzDecide` explores.
func FuzzDecide(f *testing.F) {
	e := newEnv(f)
	_, token := e.newTenant(f, "fuzz")
	approver := e.newToken(f, "fuzz", tenant.RoleApprover)
	seeds := []struct {
		body, contentType, pathKey string
		reject                     bool
	}{
		{`{"reason": "ok"}`, "application/json", "", false},
		{`{"reason": "no"}`, "application/json", "", true},
		{``, "", "", false},
		{`{"reason": "a\u0000b"}`, "application/json", "", true},
		{`{"reason": "\ud800"}`, "application/json", "", false},
		{"{\"reason\": \"\xff\"}", "application/json", "", true},
		{`{"reason": 1e999}`, "application/json", "", false},
		{`{"reason": "x", "extra": 1}`, "application/json", "", true},
		{`{"reason": "x"}`, "text/plain", "", false},
		{`[]`, "application/json", "", true},
		{`{"reason": "x"}`, "application/json", "k%00", false},
		{`{"reason": "x"}`, "application/json", "missing", true},
		{`{"reason": "x"}`, "application/json", strings.Repeat("k", 300), false},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.contentType, s.pathKey, s.reject)
	}
	n := 0
	f.Fuzz(func(t *testing.T, body []byte, contentType, pathKey string, reject bool) {
		n++
		key := fmt.Sprintf("refund-%d", n)
		require.Equal(t, http.StatusAccepted, e.post(token, key, largeRefundBody).Code)
		if pathKey != "" {
			key = pathKey
		}
		action := "approve"
		if reject {
			action = "reject"
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/ops/x/"+action, bytes.NewReader(body))
		r.URL.Path, r.URL.RawPath = "/v1/ops/"+key+"/"+action, "" // the key as sent, however malformed
		r.Header.Set("Content-Type", contentType)
		r.Header.Set("Authorization", "Bearer "+approver)
		rec := e.do(r)

		require.Less(t, rec.Code, 500, rec.Body.String())
		if rec.Code >= 300 && rec.Code < 400 {
			// A path with "." or ".." segments is redirected to its cleaned form.
			require.NotEmpty(t, rec.Header().Get("Location"))
			return
		}
		require.True(t, json.Valid(rec.Body.Bytes()), rec.Body.String())
		if rec.Code != http.StatusOK {
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		}
	})
}

// FuzzAuditExport sends arbitrary query strings, Accept headers and tokens to GET
// /v1/audit: the server must never panic nor answer 5xx, must answer a problem document
// or an export in the media type it names, and must never put a token in either.
// `go test -fuzz FuzzAuditExport` explores.
func FuzzAuditExport(f *testing.F) {
	e := newEnv(f)
	_, agent := e.newTenant(f, "fuzz")
	require.Equal(f, http.StatusAccepted, e.post(agent, "k1", largeRefundBody).Code)
	tokens := []string{e.newToken(f, "fuzz", tenant.RoleAuditor), e.newToken(f, "fuzz", tenant.RoleAdmin), agent, "obx_wrong", ""}
	for i, s := range []struct{ query, accept string }{
		{"", ""},
		{"format=csv", ""},
		{"", "text/csv"},
		{"since=2026-01-01&until=2026-02-01T00:00:00Z", "application/jsonl"},
		{"tool=stripe.refund&person=ada&outcome=succeeded&min_amount=1&max_amount=99999999999&limit=5", "*/*"},
		{"tool=%00", ""},
		{"person=%ff%fe", ""},
		{"min_amount=9223372036854775808", ""},
		{"limit=-1&limit=2", ""},
		{"since=0000-01-01&until=9999-12-31", ""},
		{"since=2026-01-01T00:00:00%2B14:00", "text/csv;;"},
		{"outcome=succeeded%00", "text/\x00csv"},
		{"%zz", ""},
		{"tenant=1&tenant_id=1", "text/csv, application/jsonl"},
	} {
		f.Add(s.query, s.accept, uint8(i))
	}
	f.Fuzz(func(t *testing.T, query, accept string, who uint8) {
		token := tokens[int(who)%len(tokens)]
		r := httptest.NewRequest(http.MethodGet, "/v1/audit", nil)
		r.URL.RawQuery = query // as sent, however malformed
		r.Header.Set("Accept", accept)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		rec := e.do(r)

		require.Less(t, rec.Code, 500, rec.Body.String())
		if token != "" {
			require.NotContains(t, rec.Body.String(), token)
		}
		if rec.Code == http.StatusOK {
			require.Contains(t, []string{"application/jsonl", "text/csv; charset=utf-8"}, rec.Header().Get("Content-Type"))
			return
		}
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		var p problemBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.True(t, strings.HasPrefix(p.Type, problemTypePrefix), p.Type)
	})
}
