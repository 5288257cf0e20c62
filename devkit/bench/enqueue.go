package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/internal/groupcommit"
	"github.com/oncebox/oncebox/internal/pglisten"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/tools"
)

// Target is the webhook target every benchmark op posts to.
const Target = "bench"

// NoopArgs is the trivial River job of the baselines.
type NoopArgs struct {
	// N numbers the job.
	N int `json:"n"`
}

// Kind implements river.JobArgs.
func (NoopArgs) Kind() string { return "bench.noop" }

// noopWorker does nothing.
type noopWorker struct {
	river.WorkerDefaults[NoopArgs]
}

// Work does nothing.
func (noopWorker) Work(context.Context, *river.Job[NoopArgs]) error { return nil }

// outboxMaxAttempts is outbox's default MaxAttempts; its dispatch jobs are inserted
// with five more, and so are the baseline's.
const outboxMaxAttempts = 10

// Registry returns the tools the benchmarks enqueue: the built-in ones, with Target as
// the one webhook target.
func Registry() (*outbox.Registry, error) {
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{WebhookTargets: []string{Target}})...)
	if err != nil {
		return nil, fmt.Errorf("bench: tool registry: %w", err)
	}
	return reg, nil
}

// opArgs returns the webhook.post arguments of the n-th op.
func opArgs(n int) json.RawMessage {
	return json.RawMessage(`{"target":"` + Target + `","path":"/hook","body":{"n":` + strconv.Itoa(n) + `}}`)
}

// Enqueuer runs the enqueue scenarios against one schema: oncebox through the Go API
// and through HTTP, River's bare InsertTx, and replays.
type Enqueuer struct {
	pool  *pgxpool.Pool
	ob    *outbox.Outbox
	river *river.Client[pgx.Tx]
	// srv serves the API as serve does, with group commit; srvAlone commits each
	// request in a transaction of its own.
	srv, srvAlone *httptest.Server
	client        *http.Client
	// stopWatch stops the API's token store's Watch.
	stopWatch func()
	tenantID  int64
	token     string
	seq       atomic.Int64
	// replayKeys are keys already enqueued by Replay, with their args number.
	replayKeys []string
}

// NewEnqueuer builds an insert-only Outbox, an insert-only River client, a tenant with
// a token, and an HTTP API server on loopback, all on pool. Close stops the server.
func NewEnqueuer(ctx context.Context, pool *pgxpool.Pool) (*Enqueuer, error) {
	return NewTracedEnqueuer(ctx, pool, nil)
}

// NewTracedEnqueuer is NewEnqueuer with tracing by tp (nil: off).
func NewTracedEnqueuer(ctx context.Context, pool *pgxpool.Pool, tp trace.TracerProvider) (*Enqueuer, error) {
	reg, err := Registry()
	if err != nil {
		return nil, err
	}
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, TracerProvider: tp})
	if err != nil {
		return nil, fmt.Errorf("bench: outbox: %w", err)
	}
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("bench: river client: %w", err)
	}
	tenants := tenant.NewStore(pool)
	t, token, err := tenants.Create(ctx, "bench")
	if err != nil {
		return nil, fmt.Errorf("bench: tenant: %w", err)
	}
	grouped, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, TracerProvider: tp,
		GroupCommit: outbox.GroupCommit{MaxOps: groupcommit.ServeMaxOps, Committers: groupcommit.DefaultCommitters}})
	if err != nil {
		return nil, fmt.Errorf("bench: outbox: %w", err)
	}
	// The API checks tokens as serve does: remembered while it hears token changes.
	checks := tenant.NewCachingStore(pool, tenant.DefaultCacheTTL)
	var servers [2]*httptest.Server
	for i, o := range []*outbox.Outbox{grouped, ob} {
		handler, err := api.New(api.Config{Outbox: o, Tenants: checks})
		if err != nil {
			return nil, fmt.Errorf("bench: api: %w", err)
		}
		servers[i] = httptest.NewServer(handler)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		l := pglisten.New(pool.Config().ConnConfig.Copy(), nil)
		l.Handle(tenant.AuthChannel, checks, "token checks ask Postgres")
		l.Run(watchCtx)
	}()
	return &Enqueuer{pool: pool, ob: ob, river: rc, srv: servers[0], srvAlone: servers[1], client: client,
		stopWatch: func() { stopWatch(); <-watched }, tenantID: t.ID, token: token}, nil
}

// Close stops the HTTP servers.
func (e *Enqueuer) Close() {
	e.client.CloseIdleConnections()
	e.srv.Close()
	e.srvAlone.Close()
	e.stopWatch()
}

// TenantID returns the tenant the ops are enqueued for.
func (e *Enqueuer) TenantID() int64 { return e.tenantID }

// RiverInsert measures River's bare InsertTx: one NoopArgs job per transaction, into
// oncebox's webhook dispatch queue with the same MaxAttempts.
func (e *Enqueuer) RiverInsert(ctx context.Context, callers int, load Load) (Measure, error) {
	opts := &river.InsertOpts{Queue: dispatch.QueueName(tools.VendorWebhook), MaxAttempts: outboxMaxAttempts + 5}
	return drive(ctx, callers, load, func(ctx context.Context, _, seq int) error {
		return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if _, err := e.river.InsertTx(ctx, tx, NoopArgs{N: seq}, opts); err != nil {
				return fmt.Errorf("bench: river InsertTx: %w", err)
			}
			return nil
		})
	})
}

// RiverUniqueInsert measures River's unique insert, what a user reaches for to
// deduplicate enqueues with River alone: InsertTx with UniqueOpts{ByArgs: true}, one
// new NoopArgs job (fresh args, so every insert is a new job) per transaction, into
// oncebox's webhook dispatch queue with the same MaxAttempts.
func (e *Enqueuer) RiverUniqueInsert(ctx context.Context, callers int, load Load) (Measure, error) {
	opts := &river.InsertOpts{Queue: dispatch.QueueName(tools.VendorWebhook), MaxAttempts: outboxMaxAttempts + 5,
		UniqueOpts: river.UniqueOpts{ByArgs: true}}
	return drive(ctx, callers, load, func(ctx context.Context, _, _ int) error {
		n := int(e.seq.Add(1))
		return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			res, err := e.river.InsertTx(ctx, tx, NoopArgs{N: n}, opts)
			if err != nil {
				return fmt.Errorf("bench: river unique InsertTx: %w", err)
			}
			if res.UniqueSkippedAsDuplicate {
				return fmt.Errorf("bench: river unique InsertTx of the new args %d was skipped as a duplicate", n)
			}
			return nil
		})
	})
}

// Go measures Outbox.Enqueue of new ops (a fresh key each).
func (e *Enqueuer) Go(ctx context.Context, callers int, load Load) (Measure, error) {
	return drive(ctx, callers, load, func(ctx context.Context, _, _ int) error {
		n := int(e.seq.Add(1))
		res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{
			TenantID: e.tenantID, Key: "go-" + strconv.Itoa(n), Tool: protocol.ToolWebhookPost, Args: opArgs(n),
		})
		if err != nil {
			return fmt.Errorf("bench: enqueue: %w", err)
		}
		if res.Replayed {
			return fmt.Errorf("bench: enqueue of the new key go-%d was a replay", n)
		}
		return nil
	})
}

// HTTP measures POST /v1/ops of new ops (a fresh Idempotency-Key each) through a
// loopback HTTP server with a real token, client and server in this process, with
// serve's default group commit.
func (e *Enqueuer) HTTP(ctx context.Context, callers int, load Load) (Measure, error) {
	return e.post(ctx, e.srv.URL, callers, load)
}

// HTTPAlone is HTTP with each request committed in a transaction of its own
// (--group-commit-ops 0).
func (e *Enqueuer) HTTPAlone(ctx context.Context, callers int, load Load) (Measure, error) {
	return e.post(ctx, e.srvAlone.URL, callers, load)
}

// post measures POST /v1/ops of new ops against the server at base.
func (e *Enqueuer) post(ctx context.Context, base string, callers int, load Load) (Measure, error) {
	url := base + "/v1/ops"
	return drive(ctx, callers, load, func(ctx context.Context, _, _ int) error {
		n := int(e.seq.Add(1))
		body := []byte(`{"tool":"` + protocol.ToolWebhookPost + `","args":` + string(opArgs(n)) + `}`)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("bench: build request: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "http-"+strconv.Itoa(n))
		resp, err := e.client.Do(req)
		if err != nil {
			return fmt.Errorf("bench: POST /v1/ops: %w", err)
		}
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("bench: POST /v1/ops answered %d: %s", resp.StatusCode, answer)
		}
		return nil
	})
}

// replayKeyCount is how many existing keys Replay cycles through.
const replayKeyCount = 1000

// Replay measures Outbox.Enqueue of keys that already hold an op with the same
// payload. It first enqueues replayKeyCount ops (not timed), then replays them in turn.
func (e *Enqueuer) Replay(ctx context.Context, callers int, load Load) (Measure, error) {
	if e.replayKeys == nil {
		keys := make([]string, replayKeyCount)
		for i := range keys {
			keys[i] = "replay-" + strconv.Itoa(i)
		}
		_, err := drive(ctx, 8, Load{Ops: len(keys)}, func(ctx context.Context, _, seq int) error {
			_, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: e.tenantID, Key: keys[seq], Tool: protocol.ToolWebhookPost, Args: opArgs(seq)})
			return err
		})
		if err != nil {
			return Measure{}, fmt.Errorf("bench: enqueue the ops to replay: %w", err)
		}
		e.replayKeys = keys
	}
	return drive(ctx, callers, load, func(ctx context.Context, _, seq int) error {
		i := seq % len(e.replayKeys)
		res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: e.tenantID, Key: e.replayKeys[i], Tool: protocol.ToolWebhookPost, Args: opArgs(i)})
		if err != nil {
			return fmt.Errorf("bench: replay: %w", err)
		}
		if !res.Replayed {
			return fmt.Errorf("bench: key %s was not replayed", e.replayKeys[i])
		}
		return nil
	})
}
