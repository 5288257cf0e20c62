package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/metrics"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendors/catalog"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

func TestCountersFollowTheObservers(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	var _ outbox.Observer = m

	m.Enqueued(1, "stripe.refund", "new")
	m.Enqueued(1, "stripe.refund", "replay")
	m.Enqueued(1, "stripe.refund", "replay")
	m.Enqueued(1, "stripe.refund", "replay")
	m.Enqueued(1, "stripe.refund", "conflict")
	m.Enqueued(1, "stripe.refund", "expiry_collision")
	m.Enqueued(1, "stripe.payment_intent", "identity_match")
	m.Dispatched("stripe", "unknown", 120*time.Millisecond)
	m.Transition("stripe", protocol.StatusDispatching, protocol.StatusUnknown)
	m.Decision("stripe", "succeeded")
	m.Duplicate("sendgrid")

	out := scrape(t, m)
	for _, want := range []string{
		`oncebox_ops_enqueued_total{outcome="new",tool="stripe.refund"} 1`,
		`oncebox_ops_enqueued_total{outcome="replay",tool="stripe.refund"} 3`,
		`oncebox_ops_enqueued_total{outcome="conflict",tool="stripe.refund"} 1`,
		`oncebox_key_expiry_collisions_total{tool="stripe.refund"} 1`,
		`oncebox_identity_matches_total{tool="stripe.payment_intent"} 1`,
		`oncebox_replay_hit_ratio 0.75`,
		`oncebox_dispatch_outcomes_total{outcome="unknown",vendor="stripe"} 1`,
		`oncebox_dispatch_duration_seconds_count{outcome="unknown",vendor="stripe"} 1`,
		`oncebox_op_transitions_total{from="dispatching",to="unknown",vendor="stripe"} 1`,
		`oncebox_reconcile_decisions_total{decision="succeeded",vendor="stripe"} 1`,
		`oncebox_duplicates_found_total{vendor="sendgrid"} 1`,
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, `outcome="expiry_collision"`, "a collision is its own counter, not an enqueue outcome")
	require.NotContains(t, out, `outcome="identity_match"`, "an identity match is its own counter (its replay is counted as one)")
}

// TestReplaysPerTenant: each tenant's replays are counted apart; the ratio gauge
// still counts them all.
func TestReplaysPerTenant(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	m.Enqueued(1, "stripe.refund", "new")
	m.Enqueued(1, "stripe.refund", "replay")
	m.Enqueued(2, "stripe.refund", "replay")
	m.Enqueued(2, "stripe.refund", "replay")
	m.Enqueued(2, "stripe.refund", "conflict")
	require.Equal(t, int64(1), m.Replays(1))
	require.Equal(t, int64(2), m.Replays(2))
	require.Equal(t, int64(0), m.Replays(3), "a tenant without enqueues has none")
	require.Contains(t, scrape(t, m), `oncebox_replay_hit_ratio 0.75`)
}

func TestRegistriesAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := metrics.New(metrics.Config{}), metrics.New(metrics.Config{})
	a.Enqueued(1, "t", "new")
	require.Contains(t, scrape(t, a), `oncebox_ops_enqueued_total{outcome="new",tool="t"} 1`)
	require.NotContains(t, scrape(t, b), `oncebox_ops_enqueued_total{`, "no global registry")
}

// TestUpstreamMetrics: calls by upstream, kind and outcome with their latency, the
// session's state, restarts (0 from the first session on) and rate-limit waits.
func TestUpstreamMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	var _ catalog.Observer = m

	m.UpstreamConnected("mail", true)
	require.Contains(t, scrape(t, m), `oncebox_upstream_restarts_total{upstream="mail"} 0`)
	m.UpstreamCalled("mail", "dispatch", "result", 30*time.Millisecond)
	m.UpstreamCalled("mail", "dispatch", "lost", 3*time.Second)
	m.UpstreamCalled("mail", "read", "result", time.Millisecond)
	m.UpstreamConnected("mail", false)
	m.UpstreamRestarted("mail")
	m.UpstreamRateLimited("mail")

	out := scrape(t, m)
	for _, want := range []string{
		`oncebox_upstream_calls_total{kind="dispatch",outcome="result",upstream="mail"} 1`,
		`oncebox_upstream_calls_total{kind="dispatch",outcome="lost",upstream="mail"} 1`,
		`oncebox_upstream_calls_total{kind="read",outcome="result",upstream="mail"} 1`,
		`oncebox_upstream_call_duration_seconds_count{outcome="result",upstream="mail"} 2`,
		`oncebox_upstream_call_duration_seconds_count{outcome="lost",upstream="mail"} 1`,
		`oncebox_upstream_connected{upstream="mail"} 0`,
		`oncebox_upstream_restarts_total{upstream="mail"} 1`,
		`oncebox_upstream_rate_limited_total{upstream="mail"} 1`,
	} {
		require.Contains(t, out, want)
	}
}
