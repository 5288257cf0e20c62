package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnroutedRequestsAnswerProblems checks that a path the API does not serve, or a
// method a path does not allow, is answered like every other refusal: a problem
// document, with an Allow header on 405, whether or not a token is sent.
func TestUnroutedRequestsAnswerProblems(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, token := e.newTenant(t, "routes")

	for _, tc := range []struct {
		method, target string
		status         int
		slug, allow    string
	}{
		{"GET", "/nope", http.StatusNotFound, "no-route", ""},
		{"POST", "/v2/ops", http.StatusNotFound, "no-route", ""},
		{"GET", "/v1/ops/", http.StatusNotFound, "no-route", ""},
		{"GET", "/v1/ops/a/b/c", http.StatusNotFound, "no-route", ""},
		{"DELETE", "/v1/ops/x", http.StatusMethodNotAllowed, "method-not-allowed", "GET, HEAD"},
		{"PUT", "/v1/ops/x", http.StatusMethodNotAllowed, "method-not-allowed", "GET, HEAD"},
		{"GET", "/v1/ops", http.StatusMethodNotAllowed, "method-not-allowed", "POST"},
		{"GET", "/v1/ops/x/approve", http.StatusMethodNotAllowed, "method-not-allowed", "POST"},
		{"DELETE", "/v1/ops/x/reject", http.StatusMethodNotAllowed, "method-not-allowed", "POST"},
		{"POST", "/healthz", http.StatusMethodNotAllowed, "method-not-allowed", "GET, HEAD"},
		{"POST", "/openapi.json", http.StatusMethodNotAllowed, "method-not-allowed", "GET, HEAD"},
	} {
		for _, tok := range []string{"", token} {
			name := tc.method + " " + tc.target
			if tok != "" {
				name += " with token"
			}
			t.Run(name, func(t *testing.T) {
				rec := e.do(req(tc.method, tc.target, tok, "", ""))
				p := requireProblem(t, rec, tc.status, tc.slug)
				require.Equal(t, tc.allow, rec.Header().Get("Allow"))
				require.Contains(t, p.Detail, tc.target)
				if tc.allow != "" {
					require.Contains(t, p.Detail, tc.allow)
				}
				// The body is the problem alone: the mux's plain text is dropped.
				var members map[string]any
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &members), rec.Body.String())
				require.NotContains(t, rec.Body.String(), "page not found")
				require.NotContains(t, rec.Body.String(), "Method Not Allowed")
			})
		}
	}

	t.Run("HEAD without a route has no body", func(t *testing.T) {
		rec := e.do(req("HEAD", "/v1/ops", "", "", ""))
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
		require.Equal(t, "POST", rec.Header().Get("Allow"))
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	})

	t.Run("a path to clean is still redirected", func(t *testing.T) {
		rec := e.do(req("GET", "/nope//x", "", "", ""))
		require.Equal(t, http.StatusTemporaryRedirect, rec.Code, rec.Body.String())
		require.Equal(t, "/nope/x", rec.Header().Get("Location"))
		rec = e.do(req("GET", "/nope/x", "", "", ""))
		requireProblem(t, rec, http.StatusNotFound, "no-route")
	})

	t.Run("routed refusals keep their own types", func(t *testing.T) {
		requireProblem(t, e.do(req("GET", "/v1/ops/missing", token, "", "")), http.StatusNotFound, "not-found")
		requireProblem(t, e.do(req("GET", "/v1/ops/missing", "", "", "")), http.StatusUnauthorized, "unauthorized")
	})
}
