// Package opstate owns the op state machine: the table of allowed transitions
// (transitions), and the one path that makes them (Machine), which writes the op's row,
// its event, the metric and the "op state changed" log line together, and drops the
// sealed copy of an op's arguments when it becomes terminal. No other package updates
// oncebox_op.status: the dispatch worker (outbox) and the reconciler decide; they ask a
// Machine to write.
//
// The Machine runs inside the caller's transaction where the caller has more to do in
// it (lock the op first, complete a River job); the returned *Applied then reports the
// metric and the log line once the caller has committed.
package opstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/protocol"
)

// ErrNotAllowed is returned for a change the transition table does not allow. It is a
// bug in the caller, never an answer to a request.
var ErrNotAllowed = errors.New("opstate: transition not allowed")

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config configures a Machine.
type Config struct {
	// Pool is where ops live. Required.
	Pool *pgxpool.Pool
	// Observe is called once per committed status change (from != to), for metrics.
	// Optional.
	Observe func(vendor string, from, to protocol.Status)
	// Logger receives the "op state changed" lines. Defaults to discarding them.
	Logger *slog.Logger
	// InsertJob inserts the dispatch job of an op inside tx: a change to pending makes
	// it in the same transaction. Required for Apply to pending.
	InsertJob func(ctx context.Context, tx pgx.Tx, opID, vendor string) error
	// TracerProvider, when set, gets a span for every transition, in the trace of the
	// context's span or else of the op's stored trace context. Nil: tracing is off.
	TracerProvider trace.TracerProvider
}

// Machine makes op transitions. It is safe for concurrent use.
type Machine struct {
	cfg Config
	// notify sends the settle notifications of the worker's records after their commit;
	// shared by the Machines WithLogger derives.
	notify *notifier
	tracer trace.Tracer
}

// New returns a Machine.
func New(cfg Config) *Machine {
	if cfg.Observe == nil {
		cfg.Observe = func(string, protocol.Status, protocol.Status) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Machine{cfg: cfg}
	m.notify = &notifier{m: m}
	if cfg.TracerProvider != nil {
		m.tracer = cfg.TracerProvider.Tracer(tracing.ScopeName)
	}
	return m
}

// WithLogger returns a Machine that logs to l (the reconciler's own logger).
func (m *Machine) WithLogger(l *slog.Logger) *Machine {
	if l == nil {
		return m
	}
	c := m.cfg
	c.Logger = l
	return &Machine{cfg: c, notify: m.notify, tracer: m.tracer}
}

// Pool returns the pool the Machine writes to.
func (m *Machine) Pool() *pgxpool.Pool { return m.cfg.Pool }

// Ident names an op in a log line and a metric.
type Ident struct {
	ID             string
	TenantID       int64
	Key            string
	ConversationID string
	ToolCallID     string
	Vendor         string
	// Attempts is the op's attempts so far; VendorRef its vendor object, if known.
	Attempts  int
	VendorRef string
	// TraceParent is the W3C traceparent the op's log lines name (trace_id, span_id):
	// the one it was created under, or the span that is acting on it.
	TraceParent string
}

// IdentityAttrs are the attributes that name the op in a log line, without the ones a
// dispatch adds as it goes (attempt, vendor_ref): tenant, op_id, idempotency_key,
// conversation_id, tool_call_id, vendor, and trace_id and span_id when the op has a
// trace context.
func (i Ident) IdentityAttrs() []any {
	return append([]any{
		slog.Int64("tenant", i.TenantID), slog.String("op_id", i.ID), slog.String("idempotency_key", i.Key),
		slog.String("conversation_id", i.ConversationID), slog.String("tool_call_id", i.ToolCallID),
		slog.String("vendor", i.Vendor),
	}, tracing.LogAttrs(i.TraceParent)...)
}

// LogAttrs are IdentityAttrs with the attempt count and the vendor_ref.
func (i Ident) LogAttrs() []any {
	return append(i.IdentityAttrs(), slog.Int("attempt", i.Attempts), slog.String("vendor_ref", i.VendorRef))
}

func (i *Ident) scanDest() []any {
	return []any{&i.TenantID, &i.Key, &i.ConversationID, &i.ToolCallID, &i.Vendor, &i.Attempts, &i.VendorRef, &i.TraceParent}
}

// Applied is a transition written in a transaction. Report tells the observer and the
// log once that transaction committed. A nil *Applied (the change did not apply) reports
// nothing.
type Applied struct {
	m        *Machine
	Ident    Ident
	From, To protocol.Status
	By       Actor
	// actor is the name logged: a person's, or By.
	actor  string
	attrs  []any
	msg    string
	level  slog.Level
	silent bool
	// notifyAfterCommit: the change's transaction left the settle notification to
	// Report (a worker's record).
	notifyAfterCommit bool
}

// Report counts the change and logs it, and wakes the long polls of an op the worker's
// record settled. Call it after the commit.
func (a *Applied) Report() {
	if a == nil || a.silent {
		return
	}
	if a.notifyAfterCommit && notifySettled(a.To) {
		a.m.notify.add(a.Ident)
	}
	if a.From != a.To {
		a.m.cfg.Observe(a.Ident.Vendor, a.From, a.To)
	}
	msg := a.msg
	if msg == "" {
		msg = "op state changed"
	}
	attrs := append(a.Ident.LogAttrs(), slog.String("from", string(a.From)), slog.String("to", string(a.To)),
		slog.String("actor", a.actor))
	a.m.cfg.Logger.Log(context.Background(), a.level, msg, append(attrs, a.attrs...)...)
}

// step is one transition about to be written.
type step struct {
	from   []protocol.Status
	to     protocol.Status
	by     Actor
	action Action
	ident  Ident
	event  *event
	attrs  []any
	msg    string
	level  slog.Level
	// silent: nothing to count or log (a claim that keeps the op dispatching).
	silent bool
	// notifyAfterCommit: the write turned the settle trigger's notification off; Report
	// sends it.
	notifyAfterCommit bool
}

type event struct {
	kind, actor string
	detail      any
}

// transition is the one path of every status change: it checks the table, lets write
// update the row (write gets whether the sealed args go, which is the case exactly
// when the target is terminal, and reports whether the guarded row matched), inserts
// the event, and returns what Report tells once committed. It returns nil, nil when the
// row did not match its guard (someone else moved the op meanwhile).
func (m *Machine) transition(ctx context.Context, q Querier, s *step, write func(dropSealed bool) (bool, error)) (*Applied, error) {
	for _, from := range s.from {
		if !Allowed(from, s.to, s.by, s.action) {
			return nil, fmt.Errorf("%w: %s -> %s by %s (action %q)", ErrNotAllowed, from, s.to, s.by, s.action)
		}
	}
	ok, err := write(s.to.Terminal())
	if err != nil || !ok {
		return nil, err
	}
	actor := string(s.by)
	if s.event != nil && s.event.actor != "" {
		actor = s.event.actor
	}
	m.trace(ctx, s, actor)
	if s.event != nil {
		d, err := json.Marshal(s.event.detail)
		if err != nil {
			return nil, fmt.Errorf("marshal event detail: %w", err)
		}
		if _, err := q.Exec(ctx, sqlInsertEvent, s.ident.ID, s.event.kind, string(s.from[0]), string(s.to), actor, d); err != nil {
			return nil, fmt.Errorf("insert op event: %w", err)
		}
	}
	return &Applied{m: m, Ident: s.ident, From: s.from[0], To: s.to, By: s.by, actor: actor, attrs: s.attrs, msg: s.msg,
		level: s.level, silent: s.silent, notifyAfterCommit: s.notifyAfterCommit}, nil
}

// trace records the transition s as a span in the op's trace: a child of ctx's span
// when that is in the op's trace (a dispatch attempt's), else of the op's stored trace
// context, linked to ctx's span (an approval asked for in a trace of its own; a
// reconcile decision). The log line then names that span.
func (m *Machine) trace(ctx context.Context, s *step, actor string) {
	if m.tracer == nil {
		return
	}
	var opts []trace.SpanStartOption
	cur, stored := trace.SpanContextFromContext(ctx), tracing.Parse(s.ident.TraceParent)
	if stored.IsValid() && cur.TraceID() != stored.TraceID() {
		if cur.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cur}))
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, stored)
	}
	kind := ""
	if s.event != nil {
		kind = s.event.kind
	}
	_, span := m.tracer.Start(ctx, "oncebox.transition", append(opts, trace.WithAttributes(
		tracing.AttrTenant.Int64(s.ident.TenantID), tracing.AttrOpID.String(s.ident.ID), tracing.AttrKey.String(s.ident.Key),
		tracing.AttrConversationID.String(s.ident.ConversationID), tracing.AttrToolCallID.String(s.ident.ToolCallID),
		tracing.AttrVendor.String(s.ident.Vendor), tracing.AttrAttempt.Int(s.ident.Attempts),
		attribute.String("oncebox.from", string(s.from[0])), attribute.String("oncebox.to", string(s.to)),
		attribute.String("oncebox.actor", actor), attribute.String("oncebox.event", kind)))...)
	span.End()
	if sc := span.SpanContext(); sc.IsValid() {
		s.ident.TraceParent = tracing.Traceparent(sc)
	}
}

// scanIdent reads the identColumns a guarded update returned; no row means the guard
// did not match.
func scanIdent(row pgx.Row, id *Ident) (bool, error) {
	err := row.Scan(id.scanDest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// withTx runs fn in a transaction of its own and reports its change after the commit.
func (m *Machine) withTx(ctx context.Context, fn func(tx pgx.Tx) (*Applied, error)) (*Applied, error) {
	var a *Applied
	err := pgx.BeginFunc(ctx, m.cfg.Pool, func(tx pgx.Tx) error {
		var err error
		a, err = fn(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	a.Report()
	return a, nil
}

// nullJSON passes an empty document as SQL NULL.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// nullTime passes a zero time as SQL NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
