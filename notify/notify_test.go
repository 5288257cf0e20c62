package notify_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestApprovalNotification: an op that starts waiting makes a signed JSON POST, through
// a job inserted with the op, retried until the receiver says 2xx; an op that does not
// wait makes none.
func TestApprovalNotification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu     sync.Mutex
		bodies [][]byte
		heads  []http.Header
		calls  int
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first try fails: River retries
			return
		}
		bodies, heads = append(bodies, b), append(heads, r.Header.Clone())
	}))
	t.Cleanup(receiver.Close)

	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(optest.MoneyTool())
	require.NoError(t, err)
	work := true
	secret := []byte("s3cret")
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Work: &work, NoDispatch: true,
		FetchPollInterval: 50 * time.Millisecond, RetryBackoff: func(int) time.Duration { return 100 * time.Millisecond },
		Gate:   newGate(t, pool, reg, governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalAbove, Above: map[string]int64{"*": 100}}}),
		Notify: &notify.Config{URL: receiver.URL + "/hook", Secret: secret, LinkBase: "https://ob.example"}})
	require.NoError(t, err)
	tenant := optest.Tenant(t, pool, "acme")
	for key, args := range map[string]string{"small": `{"amount": 50, "currency": "usd"}`, "big": `{"amount": 5000, "currency": "usd"}`} {
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: key, Tool: "test.money", Args: json.RawMessage(args), ConversationID: "c-1"})
		require.NoError(t, err)
	}
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM river_job WHERE kind = 'oncebox.notify_approval'"))
	require.NoError(t, ob.Start(ctx))
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) == 1
	}, 30*time.Second, 50*time.Millisecond)
	mu.Lock()
	body, h := bodies[0], heads[0]
	mu.Unlock()
	var n struct {
		Event, OpID, Key, Tool, Currency, Why, Link, Text string
		Amount                                            int64
		ConversationID                                    string `json:"conversation_id"`
	}
	require.NoError(t, json.Unmarshal(body, &n))
	op, err := ob.Get(ctx, tenant, "big")
	require.NoError(t, err)
	require.Equal(t, "approval_requested", n.Event)
	require.Equal(t, "big", n.Key)
	require.Equal(t, "test.money", n.Tool)
	require.EqualValues(t, 5000, n.Amount)
	require.Equal(t, "usd", n.Currency)
	require.Equal(t, "c-1", n.ConversationID)
	require.Equal(t, "https://ob.example/v1/ops/big", n.Link)
	require.Contains(t, n.Why, "above the approval threshold")
	require.Contains(t, n.Text, "test.money ($50.00 USD) awaits approval")
	require.Equal(t, op.ID, h.Get("Oncebox-Notification-Id"), "the receiver deduplicates by the op id")

	ts := h.Get("Oncebox-Timestamp")
	sig := h.Get("Oncebox-Signature")
	require.True(t, strings.HasPrefix(sig, "t="+ts+",v1="), sig)
	want := notify.Sign(secret, ts, body)
	require.True(t, hmac.Equal([]byte(strings.TrimPrefix(sig, "t="+ts+",v1=")), []byte(want)), "HMAC-SHA256 over timestamp and body")
	require.NotEqual(t, want, notify.Sign([]byte("other"), ts, body))
}

// TestApprovalNotificationRedirectNotFollowed: a receiver answering 307 to another
// host: the notification is not re-sent there (no body, no signature), and the refusal
// is logged, naming the other origin.
func TestApprovalNotificationRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu           sync.Mutex
		stolen, hits int
	)
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		stolen++
		mu.Unlock()
	}))
	t.Cleanup(other.Close)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(receiver.Close)

	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(optest.MoneyTool())
	require.NoError(t, err)
	work := true
	var logs strings.Builder
	var logMu sync.Mutex
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Work: &work, NoDispatch: true,
		FetchPollInterval: 50 * time.Millisecond, RetryBackoff: func(int) time.Duration { return 100 * time.Millisecond },
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil)),
		Gate:   newGate(t, pool, reg, governance.ApprovalPolicy{"test.money": {Mode: governance.ApprovalAbove, Above: map[string]int64{"*": 100}}}),
		Notify: &notify.Config{URL: receiver.URL + "/hook", Secret: []byte("s3cret")}})
	require.NoError(t, err)
	tenant := optest.Tenant(t, pool, "acme")
	_, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "big", Tool: "test.money", Args: json.RawMessage(`{"amount": 5000, "currency": "usd"}`)})
	require.NoError(t, err)
	require.NoError(t, ob.Start(ctx))
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hits >= 2
	}, 30*time.Second, 50*time.Millisecond, "River retries the notification")
	mu.Lock()
	require.Zero(t, stolen, "the other host received the notification")
	mu.Unlock()
	logMu.Lock()
	defer logMu.Unlock()
	require.Contains(t, logs.String(), "another origin")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
