package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

// ScopeName is the instrumentation scope of the streamed audit records.
const ScopeName = "github.com/oncebox/oncebox/audit"

// StreamConfig configures a Streamer.
type StreamConfig struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// Exporter receives the records: autoexport.NewLogExporter in oncebox serve, which
	// reads OTEL_LOGS_EXPORTER and OTEL_EXPORTER_OTLP_(LOGS_)ENDPOINT. Required. The
	// Streamer owns it: Run shuts it down when it returns.
	Exporter sdklog.Exporter
	// Resource describes this process in every record (service.name, ...). Defaults to
	// the SDK's default resource.
	Resource *resource.Resource
	// Interval is how often Run streams. Defaults to 5 seconds.
	Interval time.Duration
	// Batch is how many entries of a tenant one export carries at most. Defaults to 512.
	Batch int
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// WithDefaults returns c with its defaults filled in.
func (c StreamConfig) WithDefaults() StreamConfig {
	if c.Interval <= 0 {
		c.Interval = 5 * time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 512
	}
	if c.Resource == nil {
		c.Resource = resource.Default()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c StreamConfig) validate() error {
	if c.Pool == nil {
		return errors.New("audit: StreamConfig.Pool is required")
	}
	if c.Exporter == nil {
		return errors.New("audit: StreamConfig.Exporter is required (autoexport.NewLogExporter builds one from OTEL_LOGS_EXPORTER)")
	}
	return nil
}

// Streamer exports the sealed audit log as OpenTelemetry log records, each tenant's
// entries in chain order, at least once: a tenant's cursor (oncebox_audit_stream, migration
// 032) moves past an entry only after the exporter accepted it, so a failed export or a
// crash sends it again, and a receiver dedupes by tenant and seq.
type Streamer struct {
	cfg    StreamConfig
	mu     sync.Mutex // one round at a time in this process
	logger otellog.Logger
	buf    *recordBuffer
}

// NewStreamer returns a Streamer for cfg.
func NewStreamer(cfg StreamConfig) (*Streamer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	buf := &recordBuffer{}
	provider := sdklog.NewLoggerProvider(sdklog.WithResource(cfg.Resource), sdklog.WithProcessor(buf))
	return &Streamer{cfg: cfg, logger: provider.Logger(ScopeName), buf: buf}, nil
}

// Run streams every Interval (at once again while a tenant has more than a batch
// waiting) until ctx ends, then shuts the Exporter down. Every process may run it: one
// streams at a time (an advisory lock), the others skip.
func (s *Streamer) Run(ctx context.Context) {
	defer s.shutdown(ctx)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		_, more, err := s.streamOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "audit streaming failed; the entries are sent again next round", slog.String("error", err.Error()))
		}
		if more && err == nil && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Streamer) shutdown(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.cfg.Exporter.Shutdown(sctx); err != nil {
		s.cfg.Logger.WarnContext(ctx, "audit streaming: exporter shutdown failed", slog.String("error", err.Error()))
	}
}

// StreamOnce exports each tenant's sealed entries past its cursor (one batch per
// tenant), moving the cursor after each accepted export. It returns how many entries it
// exported (0 when another process holds the streamer's lock). It stops at the first
// export that fails: that tenant's cursor stays, and the next round sends again.
func (s *Streamer) StreamOnce(ctx context.Context) (int, error) {
	n, _, err := s.streamOnce(ctx)
	return n, err
}

// streamOnce is StreamOnce; more says a tenant had a whole batch (more may be waiting).
func (s *Streamer) streamOnce(ctx context.Context) (exported int, more bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A session lock on a connection of its own, and no transaction around the export: a
	// slow receiver holds neither the sealer's horizon back nor a transaction open.
	conn, err := s.cfg.Pool.Acquire(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("audit: stream: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, sqlStreamLock).Scan(&locked); err != nil || !locked {
		return 0, false, err
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), sqlStreamUnlock); err != nil {
			// A session that may still hold the lock does not go back to the pool.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	rows, err := conn.Query(ctx, sqlStreamTenants)
	if err != nil {
		return 0, false, fmt.Errorf("audit: stream: tenants: %w", err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowToStructByPos[streamCursor])
	if err != nil {
		return 0, false, fmt.Errorf("audit: stream: tenants: %w", err)
	}
	for _, c := range tenants {
		n, err := s.streamTenant(ctx, conn, c)
		exported += n
		if err != nil {
			return exported, false, fmt.Errorf("audit: stream tenant %d: %w", c.Tenant, err)
		}
		more = more || n == s.cfg.Batch
	}
	return exported, more, nil
}

// streamCursor is a tenant with sealed entries past its cursor: the last exported entry
// (tx 0, seq 0: none yet).
type streamCursor struct {
	Tenant  int64
	Name    string
	Tx, Seq int64
}

func (s *Streamer) streamTenant(ctx context.Context, conn *pgxpool.Conn, c streamCursor) (int, error) {
	rows, err := conn.Query(ctx, sqlSealedAfter, c.Tenant, strconv.FormatInt(c.Tx, 10), c.Seq, s.cfg.Batch)
	if err != nil {
		return 0, err
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	now := time.Now()
	for _, e := range entries {
		s.logger.Emit(ctx, LogRecord(e, c.Name, now))
	}
	records := s.buf.take()
	if len(records) != len(entries) {
		return 0, fmt.Errorf("the log SDK kept %d records of %d", len(records), len(entries))
	}
	if err := s.cfg.Exporter.Export(ctx, records); err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	if err := s.cfg.Exporter.ForceFlush(ctx); err != nil {
		return 0, fmt.Errorf("export: flush: %w", err)
	}
	last := entries[len(entries)-1]
	if _, err := conn.Exec(ctx, sqlAdvanceStream, c.Tenant, strconv.FormatUint(last.Tx, 10), last.Seq, len(entries)); err != nil {
		return 0, fmt.Errorf("move the cursor: %w", err)
	}
	return len(entries), nil
}

// recordBuffer is the log SDK's processor of a Streamer: it keeps the records emitted, for
// the Streamer to export them itself and learn whether the exporter accepted them.
type recordBuffer struct {
	mu      sync.Mutex
	records []sdklog.Record
}

func (b *recordBuffer) take() []sdklog.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.records
	b.records = nil
	return r
}

// OnEmit implements sdklog.Processor.
func (b *recordBuffer) OnEmit(_ context.Context, r *sdklog.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.records = append(b.records, r.Clone())
	return nil
}

// Enabled implements sdklog.Processor.
func (b *recordBuffer) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

// Shutdown implements sdklog.Processor.
func (b *recordBuffer) Shutdown(context.Context) error { return nil }

// ForceFlush implements sdklog.Processor.
func (b *recordBuffer) ForceFlush(context.Context) error { return nil }
