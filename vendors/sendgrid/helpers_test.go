package sendgrid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
)

// testKey is the API key every test uses; it must never show up anywhere.
const testKey = "SG.oncebox-test-secret.k3yMaterial-0123456789"

// wire is a test server in front of a fake SendGrid: it records what reached
// it and can answer in the fake's stead.
type wire struct {
	fake *fakesendgrid.Server
	srv  *httptest.Server
	// conns counts the TCP connections clients opened.
	conns atomic.Int64

	mu       sync.Mutex
	sends    [][]byte      // bodies of POST /v3/mail/send that reached the server
	headers  []http.Header // their headers
	queries  []string      // raw "query" parameters of GET /v3/messages
	activity int           // activity requests that reached the server
	refuse   []refusal     // answers given instead of the fake's, first in first out
}

// refusal is an answer to a POST /v3/mail/send given instead of the fake's.
type refusal struct {
	status int
	body   string
}

// startWire starts a fake SendGrid configured by cfg behind a recording server.
func startWire(t *testing.T, cfg fakesendgrid.Config) *wire {
	t.Helper()
	return startWireWith(t, cfg, nil)
}

// startWireWith is startWire with a handler answering instead of the recording
// server and the fake, when not nil.
func startWireWith(t *testing.T, cfg fakesendgrid.Config, handler http.Handler) *wire {
	t.Helper()
	w := &wire{fake: fakesendgrid.New(cfg)}
	if handler == nil {
		handler = http.HandlerFunc(w.serve)
	}
	w.srv = httptest.NewUnstartedServer(handler)
	w.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			w.conns.Add(1)
		}
	}
	w.srv.Start()
	t.Cleanup(w.srv.Close)
	return w
}

func (w *wire) serve(rw http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v3/mail/send" {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		w.mu.Lock()
		w.sends = append(w.sends, body)
		w.headers = append(w.headers, r.Header.Clone())
		var ref *refusal
		if len(w.refuse) > 0 {
			ref = &w.refuse[0]
			w.refuse = w.refuse[1:]
		}
		w.mu.Unlock()
		if ref != nil {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(ref.status)
			_, _ = io.WriteString(rw, ref.body)
			return
		}
	} else if r.Method == http.MethodGet && len(r.URL.Path) >= len("/v3/messages") && r.URL.Path[:len("/v3/messages")] == "/v3/messages" {
		w.mu.Lock()
		w.activity++
		if r.URL.Path == "/v3/messages" {
			w.queries = append(w.queries, r.URL.Query().Get("query"))
		}
		w.mu.Unlock()
	}
	w.fake.ServeHTTP(rw, r)
}

// refuseNext makes the next POST /v3/mail/send answer status with body.
func (w *wire) refuseNext(status int, body string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refuse = append(w.refuse, refusal{status, body})
}

// posts returns how many POST /v3/mail/send reached the server, refused or not.
func (w *wire) posts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sends)
}

// lastSend decodes the body of the latest POST /v3/mail/send.
func (w *wire) lastSend(t *testing.T) map[string]any {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotEmpty(t, w.sends)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(w.sends[len(w.sends)-1]))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m))
	return m
}

// activityRequests returns how many Email Activity requests reached the server.
func (w *wire) activityRequests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.activity
}

// newVendor returns a Vendor pointed at w with no activity rate cap, adjusted by
// adjust.
func newVendor(t *testing.T, w *wire, adjust func(*sendgrid.Config)) *sendgrid.Vendor {
	t.Helper()
	cfg := sendgrid.Config{APIKey: testKey, BaseURL: w.srv.URL, ActivityRatePerMinute: -1}
	if adjust != nil {
		adjust(&cfg)
	}
	v, err := sendgrid.New(cfg)
	require.NoError(t, err)
	return v
}

// unlimited is a fake configuration without an activity rate limit.
func unlimited() fakesendgrid.Config { return fakesendgrid.Config{ActivityRatePerMinute: -1} }

// simpleArgs is a sendgrid.mail with a text body to the given recipients.
func simpleArgs(to ...string) json.RawMessage {
	type addr struct {
		Email string `json:"email"`
	}
	a := struct {
		From    addr   `json:"from"`
		To      []addr `json:"to"`
		Subject string `json:"subject"`
		Text    string `json:"text"`
	}{From: addr{"shop@example.com"}, Subject: "Your receipt", Text: "Thank you."}
	for _, e := range to {
		a.To = append(a.To, addr{e})
	}
	b, err := json.Marshal(a)
	if err != nil {
		panic(err)
	}
	return b
}

// dispatchParams is an op of sendgrid.mail with args.
func dispatchParams(opID string, args json.RawMessage) vendorapi.DispatchParams {
	return vendorapi.DispatchParams{OpID: opID, TenantID: 1, Tool: "sendgrid.mail", Args: args, VendorKey: "vk-" + opID, Attempt: 1}
}

// requireOutcome asserts that err is a DispatchError of the given class and code.
func requireOutcome(t *testing.T, err error, outcome vendorapi.Outcome, code string) *vendorapi.DispatchError {
	t.Helper()
	require.Error(t, err)
	var de *vendorapi.DispatchError
	require.ErrorAs(t, err, &de)
	require.Equal(t, outcome, de.Outcome, "%v", de)
	require.Equal(t, code, de.Code, "%v", de)
	return de
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// contextWithTimeout is context.WithTimeout on the test's context.
func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}
