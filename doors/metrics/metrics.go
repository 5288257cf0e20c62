package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncebox/oncebox/protocol"
)

// Config configures Metrics.
type Config struct {
	// Pool, when set, is queried at scrape time for ops by status and queue depth.
	Pool *pgxpool.Pool
	// Logger receives scrape errors. Defaults to discarding them.
	Logger *slog.Logger
	// ScrapeTimeout bounds one reading of the database gauges. Defaults to 5 seconds.
	ScrapeTimeout time.Duration
	// RefreshInterval is how old the database gauges (ops by status, queue depth) may
	// be before a scrape starts a new reading in the background; scrapes in between
	// answer from the last reading and cost Postgres nothing. Defaults to 15 seconds.
	RefreshInterval time.Duration
}

// Metrics holds oncebox's collectors and their registry.
type Metrics struct {
	registry    *prometheus.Registry
	enqueued    *prometheus.CounterVec
	collisions  *prometheus.CounterVec
	identity    *prometheus.CounterVec
	dispatch    *prometheus.HistogramVec
	outcomes    *prometheus.CounterVec
	transitions *prometheus.CounterVec
	decisions   *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	unavailable *prometheus.CounterVec
	budgets     *prometheus.CounterVec
	storeUp     prometheus.Gauge
	events      *prometheus.CounterVec
	// The upstream MCP servers' calls and sessions (catalog.Observer).
	upCalls     *prometheus.CounterVec
	upLatency   *prometheus.HistogramVec
	upRestarts  *prometheus.CounterVec
	upConnected *prometheus.GaugeVec
	upLimited   *prometheus.CounterVec
	upLoosening *prometheus.CounterVec
	newOps      atomic.Int64
	replays     atomic.Int64
	// tenantReplays holds each tenant's replay count (int64 tenant id → *atomic.Int64),
	// for the console's overview; not a label, so a metric has no series per tenant.
	tenantReplays sync.Map
}

// New builds the collectors and registers them, with Go and process collectors, on a
// registry of its own.
func New(cfg Config) *Metrics {
	cfg = cfg.withDefaults()
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_ops_enqueued_total",
			Help: "Enqueue calls by tool and outcome: new, replay (same key and payload) or conflict (same key, other payload).",
		}, []string{"tool", "outcome"}),
		collisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_key_expiry_collisions_total",
			Help: "New ops whose idempotency key had been used by an op since purged: the TTL is shorter than the caller's workflow.",
		}, []string{"tool"}),
		identity: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_identity_matches_total",
			Help: "MCP calls matched to an op by their tool's identity fields although other arguments differed, and not executed: a rise means a model is rewording its calls.",
		}, []string{"tool"}),
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oncebox_dispatch_duration_seconds",
			Help:    "Time spent in vendor calls, by vendor and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"vendor", "outcome"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_dispatch_outcomes_total",
			Help: "Vendor calls by vendor and outcome class: succeeded, retryable, permanent, unknown.",
		}, []string{"vendor", "outcome"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_op_transitions_total",
			Help: "Op state changes by vendor, from and to.",
		}, []string{"vendor", "from", "to"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_reconcile_decisions_total",
			Help: "Reconciler decisions by vendor and decision.",
		}, []string{"vendor", "decision"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_duplicates_found_total",
			Help: "Ops for which the reconciler found two or more vendor objects.",
		}, []string{"vendor"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncebox_store_unavailable_total",
			Help: "Requests answered 503 (MCP: a JSON-RPC error) because Postgres could not be reached, by where: api, mcp, healthz.",
		}, []string{"where"}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oncebox_store_up",
			Help: "1 when this process's last check of Postgres (every second) succeeded, 0 during an outage.",
		}),
	}
	m.storeUp.Set(1)
	replayRate := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oncebox_replay_hit_ratio",
		Help: "Share of successful enqueue calls since start that were replays of an existing key.",
	}, func() float64 {
		n, r := m.newOps.Load(), m.replays.Load()
		if n+r == 0 {
			return 0
		}
		return float64(r) / float64(n+r)
	})
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncebox_vendor_events_total",
		Help: "Vendor events received, by vendor and outcome: stored, orphan (stored; its tag names no op), duplicate, untagged, ignored, refused (bad signature).",
	}, []string{"vendor", "outcome"})
	m.budgets = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncebox_budget_checks_total",
		Help: "New ops checked against a budget, by budget and outcome: admitted, or exceeded (sent to approval or refused).",
	}, []string{"budget", "outcome"})
	m.registry.MustRegister(m.upstreamCollectors()...)
	m.registry.MustRegister(m.enqueued, m.collisions, m.identity, m.dispatch, m.outcomes, m.transitions, m.decisions,
		m.duplicates, m.events, m.unavailable, m.budgets, m.storeUp, replayRate, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Pool != nil {
		m.registry.MustRegister(&dbCollector{pool: cfg.Pool, logger: cfg.Logger, timeout: cfg.ScrapeTimeout, interval: cfg.RefreshInterval})
	}
	return m
}

// withDefaults fills in the defaults of the fields left zero.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ScrapeTimeout == 0 {
		cfg.ScrapeTimeout = 5 * time.Second
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = 15 * time.Second
	}
	return cfg
}

// upstreamCollectors builds the collectors of the calls to upstream MCP servers and
// returns them, to register.
func (m *Metrics) upstreamCollectors() []prometheus.Collector {
	m.upCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncebox_upstream_calls_total",
		Help: "tools/call requests to upstream MCP servers, by upstream, kind (dispatch, read, lookup) and outcome: result, is_error, refused, error, lost, not_sent.",
	}, []string{"upstream", "kind", "outcome"})
	m.upLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "oncebox_upstream_call_duration_seconds",
		Help:    "Time spent in tools/call requests to upstream MCP servers, by upstream and outcome.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	}, []string{"upstream", "outcome"})
	m.upRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncebox_upstream_restarts_total",
		Help: "Upstream MCP sessions opened again after one ended or broke (a stdio upstream's program started again), by upstream.",
	}, []string{"upstream"})
	m.upConnected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "oncebox_upstream_connected",
		Help: "1 while this process has a session open with the upstream MCP server, 0 while it is down.",
	}, []string{"upstream"})
	m.upLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncebox_upstream_rate_limited_total",
		Help: "Calls to an upstream MCP server that waited for its rate limit (a dispatch's job snoozed, not counted as an attempt), by upstream.",
	}, []string{"upstream"})
	m.upLoosening = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncebox_upstream_tool_loosening_refused_total",
		Help: "Relists (tools/list_changed) and reloads that would have loosened an upstream tool (a lower class or its approval rule dropped), refused for that tool, which kept its definition in force; by upstream and tool.",
	}, []string{"upstream", "tool"})
	return []prometheus.Collector{m.upCalls, m.upLatency, m.upRestarts, m.upConnected, m.upLimited, m.upLoosening}
}

// Registry returns the registry the collectors live in.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Replays returns how many enqueue calls of one tenant were replays of an existing key
// since the process started.
func (m *Metrics) Replays(tenantID int64) int64 {
	if n, ok := m.tenantReplays.Load(tenantID); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// Enqueued implements outbox.Observer.
func (m *Metrics) Enqueued(tenantID int64, tool, kind string) {
	switch kind {
	case "expiry_collision":
		m.collisions.WithLabelValues(tool).Inc()
		return
	case "identity_match":
		m.identity.WithLabelValues(tool).Inc()
		return
	case "new":
		m.newOps.Add(1)
	case "replay":
		m.replays.Add(1)
		n, _ := m.tenantReplays.LoadOrStore(tenantID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	m.enqueued.WithLabelValues(tool, kind).Inc()
}

// Dispatched implements outbox.Observer.
func (m *Metrics) Dispatched(vendor, outcome string, took time.Duration) {
	m.dispatch.WithLabelValues(vendor, outcome).Observe(took.Seconds())
	m.outcomes.WithLabelValues(vendor, outcome).Inc()
}

// Transition implements outbox.Observer.
func (m *Metrics) Transition(vendor string, from, to protocol.Status) {
	m.transitions.WithLabelValues(vendor, string(from), string(to)).Inc()
}

// BudgetCharged implements governance.BudgetObserver.
func (m *Metrics) BudgetCharged(budget string, exceeded bool) {
	outcome := "admitted"
	if exceeded {
		outcome = "exceeded"
	}
	m.budgets.WithLabelValues(budget, outcome).Inc()
}

// Decision implements reconcile.Observer.
func (m *Metrics) Decision(vendor, decision string) {
	m.decisions.WithLabelValues(vendor, decision).Inc()
}

// VendorEvent implements vendorevents.Observer.
func (m *Metrics) VendorEvent(vendor, outcome string) {
	m.events.WithLabelValues(vendor, outcome).Inc()
}

// StoreUnavailable implements api.Observer: one more request answered 503 because
// Postgres could not be reached.
func (m *Metrics) StoreUnavailable(where string) {
	m.unavailable.WithLabelValues(where).Inc()
}

// WatchMCPSessions exports count, the number of open MCP sessions over HTTP, as the
// gauge oncebox_mcp_sessions. Call it once.
func (m *Metrics) WatchMCPSessions(count func() int) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oncebox_mcp_sessions",
		Help: "MCP sessions over HTTP open in this process (closed by the client, or after --mcp-session-idle-timeout).",
	}, func() float64 { return float64(count()) }))
}

// SetStoreUp sets oncebox_store_up.
func (m *Metrics) SetStoreUp(up bool) {
	if up {
		m.storeUp.Set(1)
	} else {
		m.storeUp.Set(0)
	}
}

// UpstreamCalled implements catalog.Observer.
func (m *Metrics) UpstreamCalled(upstream, kind, outcome string, took time.Duration) {
	m.upCalls.WithLabelValues(upstream, kind, outcome).Inc()
	m.upLatency.WithLabelValues(upstream, outcome).Observe(took.Seconds())
}

// UpstreamConnected implements catalog.Observer.
func (m *Metrics) UpstreamConnected(upstream string, connected bool) {
	v := 0.0
	if connected {
		v = 1
	}
	m.upConnected.WithLabelValues(upstream).Set(v)
	m.upRestarts.WithLabelValues(upstream) // exported at 0 from the first session on
}

// UpstreamRestarted implements catalog.Observer.
func (m *Metrics) UpstreamRestarted(upstream string) {
	m.upRestarts.WithLabelValues(upstream).Inc()
}

// UpstreamRateLimited implements catalog.Observer.
func (m *Metrics) UpstreamRateLimited(upstream string) {
	m.upLimited.WithLabelValues(upstream).Inc()
}

// UpstreamToolLooseningRefused implements catalog.Observer.
func (m *Metrics) UpstreamToolLooseningRefused(upstream, tool string) {
	m.upLoosening.WithLabelValues(upstream, tool).Inc()
}

// Duplicate implements reconcile.Observer.
func (m *Metrics) Duplicate(vendor string) {
	m.duplicates.WithLabelValues(vendor).Inc()
}

// dbCollector serves gauges read from Postgres, cached: a scrape answers from the
// last reading and, when that reading is older than the refresh interval, starts one
// new reading in the background. Only the first scrape waits for Postgres. So a scrape
// costs nothing in the database, however many ops are stored and however often it
// comes; the counts are at most one interval (plus one scrape period) old.
type dbCollector struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	timeout  time.Duration
	interval time.Duration

	mu         sync.Mutex
	snapshot   *dbSnapshot
	refreshing bool
	// done is closed when the running refresh ends.
	done chan struct{}
}

// dbSnapshot is one reading of the gauges.
type dbSnapshot struct {
	at      time.Time
	ops     []labeledCount
	queues  []labeledCount
	budgets []labeledCount
	ok      bool
}

type labeledCount struct {
	a, b string
	n    int64
}

var (
	opsDesc = prometheus.NewDesc("oncebox_ops", "Ops currently stored, by tool and status (read at most --metrics-refresh ago).",
		[]string{"tool", "status"}, nil)
	queueDesc = prometheus.NewDesc("oncebox_river_queue_depth", "River jobs by queue and state, not yet finalized (read at most --metrics-refresh ago).",
		[]string{"queue", "state"}, nil)
	budgetDesc = prometheus.NewDesc("oncebox_budget_used",
		"What budgets admitted in their current window, summed over tenants and scopes: ops (currency \"ops\") or minor units per currency (read at most --metrics-refresh ago; GET /v1/budgets shows each tenant's used and left).",
		[]string{"budget", "currency"}, nil)
	readAtDesc = prometheus.NewDesc("oncebox_db_gauges_read_timestamp_seconds", "When oncebox_ops and oncebox_river_queue_depth were last read from Postgres.",
		nil, nil)
)

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- opsDesc
	ch <- queueDesc
	ch <- budgetDesc
	ch <- readAtDesc
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.current()
	if snap == nil {
		return
	}
	for _, o := range snap.ops {
		ch <- prometheus.MustNewConstMetric(opsDesc, prometheus.GaugeValue, float64(o.n), o.a, o.b)
	}
	for _, q := range snap.queues {
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(q.n), q.a, q.b)
	}
	for _, b := range snap.budgets {
		ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, float64(b.n), b.a, b.b)
	}
	ch <- prometheus.MustNewConstMetric(readAtDesc, prometheus.GaugeValue, float64(snap.at.UnixNano())/1e9)
}

// current returns the last good reading, starting a refresh when it is stale; with no
// reading yet, it waits for the first one.
func (c *dbCollector) current() *dbSnapshot {
	c.mu.Lock()
	snap := c.snapshot
	stale := snap == nil || time.Since(snap.at) >= c.interval
	if stale && !c.refreshing {
		c.refreshing = true
		c.done = make(chan struct{})
		go c.refresh(c.done)
	}
	done := c.done
	c.mu.Unlock()
	if snap == nil && done != nil {
		<-done
		c.mu.Lock()
		snap = c.snapshot
		c.mu.Unlock()
	}
	return snap
}

// refresh reads the gauges once and keeps the reading if it succeeded.
func (c *dbCollector) refresh(done chan struct{}) {
	defer close(done)
	snap := c.read()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if snap != nil {
		c.snapshot = snap
	}
}

// The metrics package's SQL: the gauges it reads from Postgres.
const (
	sqlOpsByStatus = `SELECT tool, status, count(*) FROM oncebox_op GROUP BY tool, status`
	sqlQueueDepth  = `SELECT queue, state::text, count(*) FROM river_job
		WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending') GROUP BY queue, state`
	// sqlBudgetUsed sums what each budget admitted in its current windows: ops, or the
	// amount per currency.
	sqlBudgetUsed = `SELECT budget, CASE WHEN currency = '' THEN 'ops' ELSE currency END,
		sum(CASE WHEN currency = '' THEN ops ELSE amount END)::bigint FROM oncebox_budget_usage
		WHERE window_start <= now() AND window_end > now() GROUP BY 1, 2`
)

func (c *dbCollector) read() *dbSnapshot {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	snap := &dbSnapshot{at: time.Now()}
	for _, q := range []struct {
		what, sql string
		dst       *[]labeledCount
	}{
		{"ops by status", sqlOpsByStatus, &snap.ops},
		{"queue depth", sqlQueueDepth, &snap.queues},
		{"budget usage", sqlBudgetUsed, &snap.budgets},
	} {
		rows, err := c.pool.Query(ctx, q.sql)
		if err != nil {
			c.logger.Warn("metrics: read "+q.what, slog.Any("error", err))
			return nil
		}
		for rows.Next() {
			var lc labeledCount
			if err := rows.Scan(&lc.a, &lc.b, &lc.n); err != nil {
				rows.Close()
				c.logger.Warn("metrics: read "+q.what, slog.Any("error", err))
				return nil
			}
			*q.dst = append(*q.dst, lc)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			c.logger.Warn("metrics: read "+q.what, slog.Any("error", err))
			return nil
		}
	}
	return snap
}
