package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/client"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendors/catalog"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// catalogFor is tools.yaml, as shipped, pointed at the target at url.
func catalogFor(t *testing.T, url string) string {
	t.Helper()
	b, err := os.ReadFile("tools.yaml")
	require.NoError(t, err)
	require.Contains(t, string(b), "http://127.0.0.1:9090")
	path := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "http://127.0.0.1:9090", url)), 0o600))
	return path
}

// dropFirst answers the first POST's request by acting on it and then closing the
// connection without an answer: the outcome oncebox must settle without acting twice.
type dropFirst struct {
	next    http.Handler
	dropped atomic.Bool
}

func (d *dropFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && d.dropped.CompareAndSwap(false, true) {
		d.next.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	d.next.ServeHTTP(w, r)
}

// TestExampleTargetBehindOncebox runs the example target behind a real oncebox with the
// shipped tools.yaml: the same call twice opens one ticket, which received the op id,
// its key and the secret; a call whose answer was lost opens one ticket too, its result
// the dispatched shape; and `tools check`'s verdicts agree with the file.
func TestExampleTargetBehindOncebox(t *testing.T) {
	// Not parallel: the catalog reads its secret from the environment (t.Setenv).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("HELPDESK_API_KEY", "dev-secret")
	helpdesk := NewHelpdesk("dev-secret")
	var seen atomic.Value
	target := httptest.NewServer(&dropFirst{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			seen.Store(r.Header.Clone())
		}
		helpdesk.ServeHTTP(w, r)
	})})
	t.Cleanup(target.Close)
	file := catalogFor(t, target.URL)

	pool := dbtest.Schema(t)
	cfg := server.Defaults()
	cfg.DatabaseURL = dbtest.ConnString(t, pool)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = file
	cfg.WebhookTimeout = 2 * time.Second
	srv, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	c, err := client.New(client.Config{BaseURL: "http://" + addr.String(), Token: token})
	require.NoError(t, err)

	// The first call's answer is lost after the ticket was opened: resent under the
	// same key, the target replays its answer.
	args := json.RawMessage(`{"customer_id":"c1","subject":"Printer on fire"}`)
	res, err := c.Enqueue(ctx, "ticket-lost", "helpdesk.create_ticket", args, &client.Opts{Wait: 30 * time.Second})
	require.NoError(t, err)
	lost := res.Op
	require.Equal(t, "succeeded", lost.Status)
	require.Len(t, helpdesk.Tickets(), 1, "a lost answer opens no second ticket")

	var ops [2]*protocol.Op
	for i := range ops {
		res, err := c.Enqueue(ctx, "ticket-2", "helpdesk.create_ticket", json.RawMessage(`{"customer_id":"c2","subject":"Paper jam"}`), &client.Opts{Wait: 20 * time.Second})
		require.NoError(t, err)
		ops[i] = res.Op
		require.Equal(t, "succeeded", ops[i].Status)
	}
	tickets := helpdesk.Tickets()
	require.Len(t, tickets, 2, "the same call twice opens one ticket")
	require.Equal(t, ops[0].ID, tickets[1].OpID, "the ticket is tagged with the op id (Oncebox-Op)")
	require.Equal(t, tickets[1].ID, ops[0].VendorRef)
	h := seen.Load().(http.Header)
	require.Equal(t, ops[0].ID, h.Get("Oncebox-Op"))
	require.NotEmpty(t, h.Get("Idempotency-Key"))
	require.Equal(t, "dev-secret", h.Get("X-Api-Key"))
	require.Equal(t, "application/json", h.Get("Content-Type"))

	var dispatched, replayed struct {
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	}
	require.NoError(t, json.Unmarshal(ops[0].Result, &dispatched))
	require.NoError(t, json.Unmarshal(lost.Result, &replayed))
	require.Equal(t, http.StatusCreated, dispatched.Status)
	require.Equal(t, tickets[1].ID, dispatched.Body["id"])
	require.Equal(t, http.StatusCreated, replayed.Status, "the lost call's op has the same result shape")
	require.Equal(t, tickets[0].ID, replayed.Body["id"])

	// tools check against the same target: native_keys: true holds, the lookup finds
	// a dropped call; nothing contradicts the file.
	cat, err := catalog.Load(file, nil)
	require.NoError(t, err)
	rt, err := cat.Connect(catalog.Options{})
	require.NoError(t, err)
	rep, err := rt.Check(ctx, "helpdesk.create_ticket", args, catalog.CheckOptions{Settle: time.Second})
	require.NoError(t, err)
	require.True(t, *rep.NativeKeysSafe, rep.String())
	require.True(t, *rep.LookupFindsDropped, rep.String())
	require.Empty(t, rep.Contradiction())
}

// TestExampleLookupAnswersTheDispatchShape: the lookup path lists an op's tickets with
// the answer their call got, so oncebox settles an op from it with the dispatched
// result.
func TestExampleLookupAnswersTheDispatchShape(t *testing.T) {
	t.Parallel()
	h := NewHelpdesk("")
	req := httptest.NewRequest(http.MethodPost, "/customers/c1/tickets", strings.NewReader(`{"subject":"Hi"}`))
	req.Header.Set("Oncebox-Op", "op-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusCreated, rec.Code)
	created := rec.Body.String()

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/tickets/by-op?oncebox_op=op-1", nil))
	var page struct {
		Objects []struct {
			ID      string          `json:"id"`
			Created string          `json:"created"`
			Status  int             `json:"status"`
			Body    json.RawMessage `json:"body"`
		} `json:"objects"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
	require.Len(t, page.Objects, 1)
	o := page.Objects[0]
	require.Equal(t, "T-1", o.ID)
	_, err := time.Parse(time.RFC3339, o.Created)
	require.NoError(t, err, "created is RFC 3339")
	require.Equal(t, http.StatusCreated, o.Status)
	require.JSONEq(t, created, string(o.Body))
}
