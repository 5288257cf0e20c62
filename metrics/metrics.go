package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncebox/oncebox/outbox"
)

// Config configures Metrics.
type Config struct {
	// Pool, when set, is queried at scrape time for ops by status and queue depth.
	Pool *pgxpool.Pool
	// Logger receives scrape errors. Defaults to discarding them.
	Logger *slog.Logger
	// ScrapeTimeout bounds the database queries of one scrape. Defaults to 5 seconds.
	ScrapeTimeout time.Duration
}

// Metrics holds oncebox's collectors and their registry.
type Metrics struct {
	registry    *prometheus.Registry
	enqueued    *prometheus.CounterVec
	collisions  *prometheus.CounterVec
	dispatch    *prometheus.HistogramVec
	outcomes    *prometheus.CounterVec
	transitions *prometheus.CounterVec
	decisions   *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	events      *prometheus.CounterVec
	newOps      atomic.Int64
	replays     atomic.Int64
}

// New builds the collectors and registers them, with Go and process collectors, on a
// registry of its own.
func New(cfg Config) *Metrics {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ScrapeTimeout == 0 {
		cfg.ScrapeTimeout = 5 * time.Second
	}
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
	}
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
	m.registry.MustRegister(m.enqueued, m.collisions, m.dispatch, m.outcomes, m.transitions, m.decisions,
		m.duplicates, m.events, replayRate, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Pool != nil {
		m.registry.MustRegister(&dbCollector{pool: cfg.Pool, logger: cfg.Logger, timeout: cfg.ScrapeTimeout})
	}
	return m
}

// Registry returns the registry the collectors live in.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Enqueued implements outbox.Observer.
func (m *Metrics) Enqueued(tool, kind string) {
	switch kind {
	case "expiry_collision":
		m.collisions.WithLabelValues(tool).Inc()
		return
	case "new":
		m.newOps.Add(1)
	case "replay":
		m.replays.Add(1)
	}
	m.enqueued.WithLabelValues(tool, kind).Inc()
}

// Dispatched implements outbox.Observer.
func (m *Metrics) Dispatched(vendor, outcome string, took time.Duration) {
	m.dispatch.WithLabelValues(vendor, outcome).Observe(took.Seconds())
	m.outcomes.WithLabelValues(vendor, outcome).Inc()
}

// Transition implements outbox.Observer.
func (m *Metrics) Transition(vendor string, from, to outbox.Status) {
	m.transitions.WithLabelValues(vendor, string(from), string(to)).Inc()
}

// Decision implements reconcile.Observer.
func (m *Metrics) Decision(vendor, decision string) {
	m.decisions.WithLabelValues(vendor, decision).Inc()
}

// VendorEvent implements vendorevents.Observer.
func (m *Metrics) VendorEvent(vendor, outcome string) {
	m.events.WithLabelValues(vendor, outcome).Inc()
}

// Duplicate implements reconcile.Observer.
func (m *Metrics) Duplicate(vendor string) {
	m.duplicates.WithLabelValues(vendor).Inc()
}

// dbCollector reads gauges from Postgres at scrape time.
type dbCollector struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	timeout time.Duration
}

var (
	opsDesc = prometheus.NewDesc("oncebox_ops", "Ops currently stored, by tool and status.",
		[]string{"tool", "status"}, nil)
	queueDesc = prometheus.NewDesc("oncebox_river_queue_depth", "River jobs by queue and state (not yet finalized).",
		[]string{"queue", "state"}, nil)
)

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- opsDesc
	ch <- queueDesc
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rows, err := c.pool.Query(ctx, "SELECT tool, status, count(*) FROM oncebox_op GROUP BY tool, status")
	if err != nil {
		c.logger.Warn("metrics: read ops by status", slog.Any("error", err))
		return
	}
	for rows.Next() {
		var tool, status string
		var n int64
		if err := rows.Scan(&tool, &status, &n); err != nil {
			rows.Close()
			c.logger.Warn("metrics: read ops by status", slog.Any("error", err))
			return
		}
		ch <- prometheus.MustNewConstMetric(opsDesc, prometheus.GaugeValue, float64(n), tool, status)
	}
	rows.Close()
	rows, err = c.pool.Query(ctx, `SELECT queue, state::text, count(*) FROM river_job
		WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending') GROUP BY queue, state`)
	if err != nil {
		c.logger.Warn("metrics: read queue depth", slog.Any("error", err))
		return
	}
	defer rows.Close()
	for rows.Next() {
		var queue, state string
		var n int64
		if err := rows.Scan(&queue, &state, &n); err != nil {
			c.logger.Warn("metrics: read queue depth", slog.Any("error", err))
			return
		}
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n), queue, state)
	}
}
