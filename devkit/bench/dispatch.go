package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// DispatchSettings are the River settings shared by oncebox's dispatch and the River
// baseline, so that both fetch the same way.
type DispatchSettings struct {
	// Workers is the queue's MaxWorkers.
	Workers int
	// FetchCooldown is River's minimum pause between two fetches.
	FetchCooldown time.Duration
	// FetchPollInterval is how often River polls without a notification.
	FetchPollInterval time.Duration
}

// Tuned returns the tuned fetch settings of the end-to-end rows of docs/performance.md (2 ms cooldown, 20 ms
// poll) with the given worker count.
func Tuned(workers int) DispatchSettings {
	return DispatchSettings{Workers: workers, FetchCooldown: 2 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond}
}

// DispatchParams configures one end-to-end measurement of oncebox.
type DispatchParams struct {
	// Ops is how many ops are enqueued up front and then dispatched. Required.
	Ops int
	// Settings are the fetch settings and worker count.
	Settings DispatchSettings
	// VendorLatency is how long the fake receiver takes to answer each POST. 0 answers
	// at once.
	VendorLatency time.Duration
	// CompleteInTx turns outbox.Config.BatchedCompletion off (JobCompleteTx in the
	// record's transaction); false measures the default.
	CompleteInTx bool
	// ClaimCommit sets outbox.Config.ClaimCommit (a claim commit before every call, as
	// before clean runs).
	ClaimCommit bool
	// BeforeStart, when set, is called once the ops are in place, just before the
	// measured part starts (BenchmarkDispatchCost reads CPU and WAL there).
	BeforeStart func()
	// TracerProvider sets outbox.Config.TracerProvider (nil: tracing off).
	TracerProvider trace.TracerProvider
}

// succeededCounter is an outbox.Observer that counts ops that reached succeeded (after
// the commit) and closes done at target.
type succeededCounter struct {
	target int64
	n      atomic.Int64
	other  atomic.Int64
	done   chan struct{}
}

func (c *succeededCounter) Enqueued(int64, string, string)           {}
func (c *succeededCounter) Dispatched(string, string, time.Duration) {}
func (c *succeededCounter) Transition(_ string, _, to protocol.Status) {
	switch to {
	case protocol.StatusSucceeded:
		if c.n.Add(1) == c.target {
			close(c.done)
		}
	case protocol.StatusDispatching, protocol.StatusPending:
	default:
		c.other.Add(1)
	}
}

// latencyHandler delays every POST by d before h answers it.
func latencyHandler(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// EndToEnd enqueues p.Ops webhook ops up front (not timed), then starts an Outbox whose
// webhook vendor posts to a fakewebhook receiver over loopback HTTP, and measures the
// time from Start until every op has committed as succeeded. pool must be bound to an
// empty migrated schema (NewSchema): every pending op in it is dispatched.
func EndToEnd(ctx context.Context, pool *pgxpool.Pool, p DispatchParams) (Measure, error) {
	if p.Ops < 1 || p.Settings.Workers < 1 {
		return Measure{}, errors.New("bench: EndToEnd needs Ops and Settings.Workers")
	}
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(latencyHandler(fake, p.VendorLatency))
	defer srv.Close()
	vendor, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{Target: {BaseURL: srv.URL}}})
	if err != nil {
		return Measure{}, fmt.Errorf("bench: webhook vendor: %w", err)
	}
	reg, err := Registry()
	if err != nil {
		return Measure{}, err
	}
	counter := &succeededCounter{target: int64(p.Ops), done: make(chan struct{})}
	batched := !p.CompleteInTx
	ob, err := outbox.New(outbox.Config{
		Pool:              pool,
		Tools:             reg,
		Vendors:           []vendorapi.Vendor{vendor},
		Queues:            map[string]dispatch.QueueConfig{vendor.Name(): {MaxWorkers: p.Settings.Workers}},
		FetchCooldown:     p.Settings.FetchCooldown,
		FetchPollInterval: p.Settings.FetchPollInterval,
		Observer:          counter,
		BatchedCompletion: &batched,
		ClaimCommit:       p.ClaimCommit,
		TracerProvider:    p.TracerProvider,
	})
	if err != nil {
		return Measure{}, fmt.Errorf("bench: outbox: %w", err)
	}
	t, _, err := tenant.NewStore(pool).Create(ctx, "bench")
	if err != nil {
		return Measure{}, fmt.Errorf("bench: tenant: %w", err)
	}
	if err := enqueueBatches(ctx, pool, ob, t.ID, p.Ops); err != nil {
		return Measure{}, err
	}

	if p.BeforeStart != nil {
		p.BeforeStart()
	}
	start := time.Now()
	if err := ob.Start(ctx); err != nil {
		return Measure{}, err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return ob.Stop(sctx)
	}
	defer func() { _ = stop() }()
	if err := waitDone(ctx, counter.done, p.Ops, func() string {
		return fmt.Sprintf("%d of %d ops succeeded, %d in other states", counter.n.Load(), p.Ops, counter.other.Load())
	}); err != nil {
		return Measure{}, err
	}
	m := Measure{Ops: p.Ops, Elapsed: time.Since(start)}
	if err := stop(); err != nil {
		return m, err
	}
	var succeeded int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM oncebox_op WHERE status = 'succeeded'").Scan(&succeeded); err != nil {
		return m, fmt.Errorf("bench: count succeeded ops: %w", err)
	}
	if succeeded != p.Ops || fake.EffectCount() != p.Ops {
		return m, fmt.Errorf("bench: %d ops succeeded and the receiver saw %d effects; want %d of each", succeeded, fake.EffectCount(), p.Ops)
	}
	return m, nil
}

// waitDone waits for done, giving up when no progress is likely (a generous timeout
// proportional to n) or ctx ends.
func waitDone(ctx context.Context, done <-chan struct{}, n int, progress func() string) error {
	timeout := 60*time.Second + time.Duration(n)*5*time.Millisecond
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bench: %s: %w", progress(), ctx.Err())
	case <-timer.C:
		return fmt.Errorf("bench: gave up after %s: %s", timeout, progress())
	}
}

// enqueueBatches enqueues n webhook ops, 100 per transaction from 4 goroutines.
func enqueueBatches(ctx context.Context, pool *pgxpool.Pool, ob *outbox.Outbox, tenantID int64, n int) error {
	const batch = 100
	batches := (n + batch - 1) / batch
	_, err := drive(ctx, 4, Load{Ops: batches}, func(ctx context.Context, _, b int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for i := b * batch; i < min(n, (b+1)*batch); i++ {
				if _, err := ob.EnqueueTx(ctx, tx, outbox.EnqueueParams{
					TenantID: tenantID, Key: "e2e-" + strconv.Itoa(i), Tool: protocol.ToolWebhookPost, Args: opArgs(i),
				}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("bench: enqueue ops up front: %w", err)
	}
	return nil
}

// RiverEndToEnd inserts jobs NoopArgs jobs up front (not timed), then starts a River
// client with the same settings and a worker that does nothing, and measures the time
// from Start until River reports every job completed (its completer has committed).
// pool must be bound to an empty migrated schema.
func RiverEndToEnd(ctx context.Context, pool *pgxpool.Pool, jobs int, s DispatchSettings) (Measure, error) {
	if jobs < 1 || s.Workers < 1 {
		return Measure{}, errors.New("bench: RiverEndToEnd needs jobs and Settings.Workers")
	}
	const queue = "bench"
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, noopWorker{}); err != nil {
		return Measure{}, fmt.Errorf("bench: register no-op worker: %w", err)
	}
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: s.Workers}},
		FetchCooldown:     s.FetchCooldown,
		FetchPollInterval: s.FetchPollInterval,
	})
	if err != nil {
		return Measure{}, fmt.Errorf("bench: river client: %w", err)
	}
	const batch = 1000
	for b := 0; b < jobs; b += batch {
		params := make([]river.InsertManyParams, 0, batch)
		for i := b; i < min(jobs, b+batch); i++ {
			params = append(params, river.InsertManyParams{Args: NoopArgs{N: i},
				InsertOpts: &river.InsertOpts{Queue: queue, MaxAttempts: outboxMaxAttempts + 5}})
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := rc.InsertManyTx(ctx, tx, params)
			return err
		}); err != nil {
			return Measure{}, fmt.Errorf("bench: insert River jobs up front: %w", err)
		}
	}

	events, cancelSub := rc.SubscribeConfig(&river.SubscribeConfig{ChanSize: jobs + 100, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancelSub()
	done := make(chan struct{})
	var completed atomic.Int64
	go func() {
		for range events {
			if completed.Add(1) == int64(jobs) {
				close(done)
				return
			}
		}
	}()

	start := time.Now()
	if err := rc.Start(ctx); err != nil {
		return Measure{}, fmt.Errorf("bench: start River: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = rc.Stop(sctx)
	}()
	if err := waitDone(ctx, done, jobs, func() string {
		return fmt.Sprintf("%d of %d River jobs completed", completed.Load(), jobs)
	}); err != nil {
		return Measure{}, err
	}
	return Measure{Ops: jobs, Elapsed: time.Since(start)}, nil
}
