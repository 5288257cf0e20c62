package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// openAPIFixture holds what the scenarios need: a working server with a tenant, and
// a server whose database pool is closed (for 500 and 503).
type openAPIFixture struct {
	e, broken *env
	// token is an agent token, approver an approver token, of the same tenant.
	token, approver string
	n               atomic.Int64
}

// key returns a fresh idempotency key.
func (f *openAPIFixture) key() string { return fmt.Sprintf("doc-%d", f.n.Add(1)) }

// scenario drives a server into one documented (path, method, status).
type scenario func(t *testing.T, f *openAPIFixture) (*env, *http.Request)

// openAPIScenarios returns the scenarios keyed "METHOD path status" as the document
// spells them.
func openAPIScenarios() map[string]scenario {
	scenarios := map[string]scenario{
		"POST /v1/ops 200": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			k := f.key()
			require.Equal(t, http.StatusAccepted, f.e.post(f.token, k, paymentBody).Code)
			return f.e, req("POST", "/v1/ops", f.token, k, paymentBody)
		},
		"POST /v1/ops 202": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", "/v1/ops", f.token, f.key(), paymentBody)
		},
		"POST /v1/ops 400": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", "/v1/ops", f.token, "", paymentBody)
		},
		"POST /v1/ops 401": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", "/v1/ops", "", f.key(), paymentBody)
		},
		"POST /v1/ops 403": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", "/v1/ops", f.approver, f.key(), paymentBody)
		},
		"POST /v1/ops 413": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", "/v1/ops", f.token, f.key(), `{"tool": "`+strings.Repeat("x", 70<<10)+`"}`)
		},
		"POST /v1/ops 415": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			r := req("POST", "/v1/ops", f.token, f.key(), paymentBody)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return f.e, r
		},
		"POST /v1/ops 422": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			k := f.key()
			require.Equal(t, http.StatusAccepted, f.e.post(f.token, k, paymentBody).Code)
			return f.e, req("POST", "/v1/ops", f.token, k, smallRefundBody)
		},
		"POST /v1/ops 404": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", "/v1/ops", f.token, f.key(), `{"tool": "stripe.refund", "args": {"payment_intent": "pi_someone_elses"}}`)
		},
		"POST /v1/ops 500": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.broken, req("POST", "/v1/ops", f.token, f.key(), paymentBody)
		},

		"POST /v1/ops 429": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			e, token := heldWait(t)
			return e, req("POST", "/v1/ops?wait=10s", token, f.key(), paymentBody)
		},
		"GET /v1/ops/{key} 429": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			e, token := heldWait(t)
			return e, req("GET", "/v1/ops/held?wait=10s", token, "", "")
		},
		"GET /v1/ops/{key} 200": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			k := f.key()
			require.Equal(t, http.StatusAccepted, f.e.post(f.token, k, largeRefundBody).Code)
			return f.e, req("GET", "/v1/ops/"+k+"?history=true&wait=2s", f.token, "", "")
		},
		"GET /v1/ops/{key} 400": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("GET", "/v1/ops/"+f.key()+"?wait=later", f.token, "", "")
		},
		"GET /v1/ops/{key} 401": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("GET", "/v1/ops/"+f.key(), "obx_wrong", "", "")
		},
		"GET /v1/ops/{key} 404": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("GET", "/v1/ops/"+f.key(), f.token, "", "")
		},
		"GET /v1/ops/{key} 500": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.broken, req("GET", "/v1/ops/"+f.key(), f.token, "", "")
		},

		"GET /openapi.json 200": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("GET", "/openapi.json", "", "", "")
		},
		"GET /healthz 200": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("GET", "/healthz", "", "", "")
		},
		"GET /healthz 503": func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.broken, req("GET", "/healthz", "", "", "")
		},
	}
	// Approve and reject share their scenarios.
	for _, action := range []string{"approve", "reject"} {
		path := "/v1/ops/{key}/" + action
		at := func(k string) string { return "/v1/ops/" + k + "/" + action }
		awaiting := func(t *testing.T, f *openAPIFixture) string {
			k := f.key()
			require.Equal(t, http.StatusAccepted, f.e.post(f.token, k, largeRefundBody).Code)
			return k
		}
		scenarios["POST "+path+" 200"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", at(awaiting(t, f)), f.approver, "", `{"reason": "ok"}`)
		}
		scenarios["POST "+path+" 400"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", at(awaiting(t, f)), f.approver, "", `{"reason": "ok", "extra": 1}`)
		}
		scenarios["POST "+path+" 401"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", at(f.key()), "", "", "")
		}
		scenarios["POST "+path+" 403"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", at(awaiting(t, f)), f.token, "", "")
		}
		scenarios["POST "+path+" 404"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", at(f.key()), f.approver, "", "")
		}
		scenarios["POST "+path+" 409"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			k := f.key()
			require.Equal(t, http.StatusAccepted, f.e.post(f.token, k, smallRefundBody).Code)
			return f.e, req("POST", at(k), f.approver, "", "")
		}
		scenarios["POST "+path+" 413"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.e, req("POST", at(awaiting(t, f)), f.approver, "", `{"reason": "`+strings.Repeat("r", 70<<10)+`"}`)
		}
		scenarios["POST "+path+" 415"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			r := req("POST", at(awaiting(t, f)), f.approver, "", `{"reason": "ok"}`)
			r.Header.Set("Content-Type", "text/plain")
			return f.e, r
		}
		scenarios["POST "+path+" 500"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			return f.broken, req("POST", at(f.key()), f.approver, "", "")
		}
	}
	resolveAt := func(k string) string { return "/v1/ops/" + k + "/resolve" }
	inReview := func(t *testing.T, f *openAPIFixture) string {
		k := f.key()
		require.Equal(t, http.StatusAccepted, f.e.post(f.token, k, paymentBody).Code)
		_, err := f.e.pool.Exec(t.Context(), "UPDATE oncebox_op SET status = 'needs_review' WHERE idempotency_key = $1", k)
		require.NoError(t, err)
		return k
	}
	const resolveBody = `{"outcome": "failed", "reason": "nothing at the vendor"}`
	scenarios["POST /v1/ops/{key}/resolve 200"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("POST", resolveAt(inReview(t, f)), f.approver, "", resolveBody)
	}
	scenarios["POST /v1/ops/{key}/resolve 400"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("POST", resolveAt(inReview(t, f)), f.approver, "", `{"outcome": "failed"}`)
	}
	scenarios["POST /v1/ops/{key}/resolve 401"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("POST", resolveAt(f.key()), "", "", resolveBody)
	}
	scenarios["POST /v1/ops/{key}/resolve 403"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("POST", resolveAt(inReview(t, f)), f.token, "", resolveBody)
	}
	scenarios["POST /v1/ops/{key}/resolve 404"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("POST", resolveAt(f.key()), f.approver, "", resolveBody)
	}
	scenarios["POST /v1/ops/{key}/resolve 409"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		k := f.key()
		require.Equal(t, http.StatusAccepted, f.e.post(f.token, k, paymentBody).Code)
		return f.e, req("POST", resolveAt(k), f.approver, "", resolveBody)
	}
	scenarios["POST /v1/ops/{key}/resolve 413"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("POST", resolveAt(f.key()), f.approver, "", `{"reason": "`+strings.Repeat("r", 70<<10)+`"}`)
	}
	scenarios["POST /v1/ops/{key}/resolve 415"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		r := req("POST", resolveAt(f.key()), f.approver, "", resolveBody)
		r.Header.Set("Content-Type", "text/plain")
		return f.e, r
	}
	scenarios["GET /v1/budgets 200"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/budgets", f.token, "", "")
	}
	scenarios["GET /v1/budgets 401"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/budgets", "", "", "")
	}
	scenarios["GET /v1/budgets 500"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.broken, req("GET", "/v1/budgets", f.approver, "", "")
	}
	scenarios["GET /v1/tools 200"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/tools", f.token, "", "")
	}
	scenarios["GET /v1/tools 401"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/tools", "", "", "")
	}
	scenarios["GET /v1/tools 500"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.broken, req("GET", "/v1/tools", f.token, "", "")
	}
	scenarios["POST /v1/ops 502"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		e := newEnv(t, func(c *api.Config) { c.Reads = fakeReads{} })
		_, token := e.newTenant(t, "reads")
		return e, req("POST", "/v1/ops", token, "", `{"tool":"crm.down","args":{}}`)
	}
	scenarios["GET /v1/approvals 200"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		require.Equal(t, http.StatusAccepted, f.e.post(f.token, f.key(), largeRefundBody).Code)
		return f.e, req("GET", "/v1/approvals", f.approver, "", "")
	}
	scenarios["GET /v1/approvals 400"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/approvals?limit=0", f.approver, "", "")
	}
	scenarios["GET /v1/approvals 401"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/approvals", "", "", "")
	}
	scenarios["GET /v1/approvals 403"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/approvals", f.token, "", "")
	}
	scenarios["GET /v1/approvals 500"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.broken, req("GET", "/v1/approvals", f.approver, "", "")
	}
	auditor := func(t *testing.T, e *env, tenantName string) string {
		return e.newToken(t, tenantName, tenant.RoleAuditor)
	}
	scenarios["GET /v1/audit 200"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		require.Equal(t, http.StatusAccepted, f.e.post(f.token, f.key(), paymentBody).Code)
		// One line, so that the test reads it as one AuditEntry.
		return f.e, req("GET", "/v1/audit?tool=stripe.payment_intent&limit=1", auditor(t, f.e, "doc"), "", "")
	}
	scenarios["GET /v1/audit 400"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/audit?since=yesterday", auditor(t, f.e, "doc"), "", "")
	}
	scenarios["GET /v1/audit 401"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/audit", "", "", "")
	}
	scenarios["GET /v1/audit 403"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.e, req("GET", "/v1/audit", f.token, "", "")
	}
	scenarios["GET /v1/audit 500"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.broken, req("GET", "/v1/audit", f.approver, "", "")
	}
	scenarios["GET /v1/audit 429"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		log := blockingLog{started: make(chan struct{}, 1), release: make(chan struct{})}
		e := newEnv(t, func(c *api.Config) {
			log.Querier = c.AuditLog
			c.AuditLog = log
			c.AuditExports = audit.NewSlots(1)
		})
		e.newTenant(t, "acme")
		token := auditor(t, e, "acme")
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.do(req("GET", "/v1/audit", token, "", ""))
		}()
		<-log.started
		t.Cleanup(func() { close(log.release); <-done })
		return e, req("GET", "/v1/audit", token, "", "")
	}
	scenarios["GET /v1/audit 503"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		e, _, _ := outageEnv(t, false)
		return e, req("GET", "/v1/audit", auditor(t, e, "acme"), "", "")
	}
	scenarios["POST /v1/ops/{key}/resolve 500"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
		return f.broken, req("POST", resolveAt(f.key()), f.approver, "", resolveBody)
	}
	for name, sc := range vendorEventScenarios() {
		scenarios[name] = sc
	}
	// 503: the database cannot be reached.
	for _, route := range []struct{ method, path, target, body string }{
		{"POST", "/v1/ops", "/v1/ops", paymentBody},
		{"GET", "/v1/ops/{key}", "/v1/ops/k", ""},
		{"POST", "/v1/ops/{key}/approve", "/v1/ops/k/approve", ""},
		{"POST", "/v1/ops/{key}/reject", "/v1/ops/k/reject", ""},
		{"POST", "/v1/ops/{key}/resolve", "/v1/ops/k/resolve", resolveBody},
	} {
		scenarios[route.method+" "+route.path+" 503"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			e, agent, approver := outageEnv(t, false)
			token := approver
			if route.path == "/v1/ops" || route.method == "GET" {
				token = agent
			}
			return e, req(route.method, route.target, token, f.key(), route.body)
		}
	}
	return scenarios
}

// TestOpenAPIDocumentMatchesHandlers walks the document: every (path, method, status)
// it lists is produced by a real request, with the documented content type, headers
// and top-level members; and every problem type the handlers answer is a constant of
// package protocol that the document names.
func TestOpenAPIDocumentMatchesHandlers(t *testing.T) {
	t.Parallel()
	requireProblemTypesDocumented(t, api.OpenAPI())
	var doc map[string]any
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	require.Equal(t, "3.1.0", doc["openapi"])
	requireRefsResolve(t, doc, doc)
	require.NotNil(t, lookup(doc, "components", "securitySchemes", "bearer"))

	f := &openAPIFixture{e: newEnv(t)}
	_, f.token = f.e.newTenant(t, "doc")
	f.approver = f.e.newToken(t, "doc", tenant.RoleApprover)
	f.broken = newEnv(t)
	f.broken.pool.Close()

	scenarios := openAPIScenarios()
	covered := map[string]bool{}
	paths := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method, opAny := range item.(map[string]any) {
			op := opAny.(map[string]any)
			for status, respAny := range op["responses"].(map[string]any) {
				name := strings.ToUpper(method) + " " + path + " " + status
				covered[name] = true
				t.Run(name, func(t *testing.T) {
					sc, ok := scenarios[name]
					require.True(t, ok, "no scenario drives the documented response %q", name)
					e, r := sc(t, f)
					rec := e.do(r)
					require.Equal(t, status, fmt.Sprint(rec.Code), rec.Body.String())

					resp := resolve(t, doc, respAny)
					if headers, ok := resp["headers"].(map[string]any); ok {
						for h := range headers {
							require.NotEmpty(t, rec.Header().Get(h), "documented header %s", h)
						}
					}
					mt, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
					require.NoError(t, err)
					media, ok := lookup(resp, "content", mt).(map[string]any)
					require.True(t, ok, "response content type %s is not documented", mt)
					schema := resolve(t, doc, media["schema"])
					props, ok := schema["properties"].(map[string]any)
					if !ok {
						return
					}
					var members map[string]json.RawMessage
					require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &members))
					for m := range members {
						require.Contains(t, props, m, "member %q is not in the documented schema", m)
					}
					if req, ok := schema["required"].([]any); ok {
						for _, m := range req {
							require.Contains(t, members, m.(string), "required member %q is missing", m)
						}
					}
				})
			}
		}
	}
	for name := range scenarios {
		require.True(t, covered[name], "scenario %q drives a response the document does not list", name)
	}
	var securedWithout401 []string
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			sec, hasOwn := op.(map[string]any)["security"].([]any)
			if hasOwn && len(sec) == 0 {
				continue
			}
			if lookup(op, "responses", "401") == nil {
				securedWithout401 = append(securedWithout401, method+" "+path)
			}
		}
	}
	slices.Sort(securedWithout401)
	require.Empty(t, securedWithout401, "operations that need a token must document 401")
}

// lookup walks nested objects by member names; it returns nil when one is missing.
func lookup(v any, names ...string) any {
	for _, n := range names {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[n]
	}
	return v
}

// resolve follows a local $ref, if any.
func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "expected an object, got %v", v)
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	require.True(t, strings.HasPrefix(ref, "#/"), "only local references: %s", ref)
	target := lookup(doc, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
	require.NotNil(t, target, "dangling $ref %s", ref)
	return resolve(t, doc, target)
}

// requireRefsResolve checks every $ref in the document.
func requireRefsResolve(t *testing.T, doc map[string]any, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["$ref"]; ok {
			resolve(t, doc, v)
		}
		for _, x := range v {
			requireRefsResolve(t, doc, x)
		}
	case []any:
		for _, x := range v {
			requireRefsResolve(t, doc, x)
		}
	}
}

// heldWait returns a server that allows one open wait per tenant and a tenant that
// holds it (until the test ends).
func heldWait(t *testing.T) (*env, string) {
	e := newEnv(t, func(c *api.Config) { c.MaxWaitsPerTenant = 1 })
	_, token := e.newTenant(t, "held")
	require.Equal(t, http.StatusAccepted, e.post(token, "held", paymentBody).Code)
	done := make(chan struct{})
	go func() { defer close(done); e.do(req("GET", "/v1/ops/held?wait=30s", token, "", "")) }()
	t.Cleanup(func() { e.srv.EndWaits(); <-done })
	require.Eventually(t, func() bool { return e.srv.Waiting() == 1 }, 10*time.Second, 10*time.Millisecond)
	return e, token
}

// docStripeSecret is the Stripe signing secret of the vendor event scenarios.
const docStripeSecret = "whsec_doc"

// docTenantSecrets is tenant doc's own Stripe signing secret, docStripeSecret too.
type docTenantSecrets struct{}

func (docTenantSecrets) StripeEventSecret(_ context.Context, name string) (int64, string, error) {
	if name != "doc" {
		return 0, "", nil
	}
	return 1, docStripeSecret, nil
}

// vendorEventsEnv serves the vendor event endpoints on pool with a 1 KiB body limit;
// with sgKey nil neither vendor is configured.
func vendorEventsEnv(t *testing.T, pool *pgxpool.Pool, sgKey *ecdsa.PrivateKey) *env {
	t.Helper()
	store, err := vendorevents.New(vendorevents.Config{Pool: pool})
	require.NoError(t, err)
	cfg := vendorevents.HandlerConfig{Store: store, MaxBodyBytes: 1024}
	if sgKey != nil {
		der, err := x509.MarshalPKIXPublicKey(&sgKey.PublicKey)
		require.NoError(t, err)
		cfg.StripeSecret, cfg.SendGridPublicKey = docStripeSecret, base64.StdEncoding.EncodeToString(der)
		cfg.TenantSecrets = docTenantSecrets{}
	}
	h, err := vendorevents.NewHandler(cfg)
	require.NoError(t, err)
	return &env{pool: pool, handler: h}
}

// vendorEventScenarios drive the two vendor event endpoints, each to every documented
// answer: a signed event tagged with an op id, a bad signature, no secret configured,
// a body over the limit, the database down.
func vendorEventScenarios() map[string]scenario {
	opTag := "0192b6c4-7a3e-7cde-8f01-23456789abcd"
	stripeEvent := []byte(`{"id": "evt_doc", "object": "event", "api_version": "2024-06-20", "created": 1700000000,
		"type": "payment_intent.succeeded", "data": {"object": {"id": "pi_doc", "object": "payment_intent", "amount": 500,
		"currency": "usd", "status": "succeeded", "created": 1700000000, "metadata": {"oncebox_op": "` + opTag + `"}}}}`)
	sendGridEvents := []byte(`[{"event": "delivered", "email": "ada@example.com", "timestamp": 1700000000,
		"sg_message_id": "doc.filterdrecv-0", "oncebox_op": "` + opTag + `"}]`)
	type endpoint struct {
		path, doc string
		body      []byte
		sign      func(t *testing.T, r *http.Request, key *ecdsa.PrivateKey, body []byte)
	}
	endpoints := []endpoint{
		{vendorevents.PathStripe, vendorevents.PathStripe, stripeEvent, func(_ *testing.T, r *http.Request, _ *ecdsa.PrivateKey, body []byte) {
			r.Header.Set("Stripe-Signature", fakestripe.SignPayload(docStripeSecret, body, time.Now()))
		}},
		{vendorevents.PathStripeTenant + "doc", vendorevents.PathStripeTenant + "{tenant}", stripeEvent,
			func(_ *testing.T, r *http.Request, _ *ecdsa.PrivateKey, body []byte) {
				r.Header.Set("Stripe-Signature", fakestripe.SignPayload(docStripeSecret, body, time.Now()))
			}},
		{vendorevents.PathSendGrid, vendorevents.PathSendGrid, sendGridEvents, func(t *testing.T, r *http.Request, key *ecdsa.PrivateKey, body []byte) {
			sig, ts, err := fakesendgrid.SignEvents(key, body, time.Now())
			require.NoError(t, err)
			r.Header.Set(fakesendgrid.SignatureHeader, sig)
			r.Header.Set(fakesendgrid.TimestampHeader, ts)
		}},
	}
	scenarios := map[string]scenario{}
	for _, ep := range endpoints {
		signed := func(t *testing.T, body []byte) (*http.Request, *ecdsa.PrivateKey) {
			key, _, err := fakesendgrid.NewEventKey()
			require.NoError(t, err)
			r := req("POST", ep.path, "", "", string(body))
			ep.sign(t, r, key, body)
			return r, key
		}
		scenarios["POST "+ep.doc+" 200"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			r, key := signed(t, ep.body)
			return vendorEventsEnv(t, f.e.pool, key), r
		}
		scenarios["POST "+ep.doc+" 400"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			_, key := signed(t, ep.body)
			return vendorEventsEnv(t, f.e.pool, key), req("POST", ep.path, "", "", string(ep.body))
		}
		scenarios["POST "+ep.doc+" 404"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			r, _ := signed(t, ep.body)
			return vendorEventsEnv(t, f.e.pool, nil), r
		}
		scenarios["POST "+ep.doc+" 413"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			r, key := signed(t, []byte(strings.Repeat(" ", 2048)+string(ep.body)))
			return vendorEventsEnv(t, f.e.pool, key), r
		}
		scenarios["POST "+ep.doc+" 503"] = func(t *testing.T, f *openAPIFixture) (*env, *http.Request) {
			r, key := signed(t, ep.body)
			return vendorEventsEnv(t, f.broken.pool, key), r
		}
	}
	return scenarios
}

// TestOpenAPIOpSchemaHasEveryMember: every JSON member of protocol.Op and of its steps
// (protocol.StepRef) is a property of the documented schema, so a member no scenario
// renders (a composite op's steps) is documented too.
func TestOpenAPIOpSchemaHasEveryMember(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	for schema, v := range map[string]any{"Op": protocol.Op{}, "StepRef": protocol.StepRef{}} {
		props, ok := lookup(doc, "components", "schemas", schema, "properties").(map[string]any)
		require.True(t, ok, "schema %s", schema)
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			require.Contains(t, props, name, "%s.%s is not in the documented schema %s", typ.Name(), typ.Field(i).Name, schema)
		}
	}
}
