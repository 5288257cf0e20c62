package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

// The SQL of the floor and the peer: one table of ops, written by hand the way a user
// would. Both run in a fresh schema of their own (NewSchema), so the table never meets
// oncebox's.
const (
	sqlCreateHandOps = `CREATE TABLE bench_hand_op (
	id     bigint PRIMARY KEY,
	state  text NOT NULL DEFAULT 'pending',
	token  text,
	body   jsonb NOT NULL,
	status int,
	answer jsonb
);
CREATE INDEX bench_hand_op_pending ON bench_hand_op (id) WHERE state = 'pending'`
	sqlInsertHandOps = `INSERT INTO bench_hand_op (id, body)
SELECT g, jsonb_build_object('target', 'bench', 'path', '/hook', 'body', jsonb_build_object('n', g))
FROM generate_series(1, $1::bigint) AS g`
	// sqlFloorClaim is the floor's first commit: take the next pending op and mark it as
	// being sent with a token, in one statement.
	sqlFloorClaim = `UPDATE bench_hand_op SET state = 'sending', token = $1
WHERE id = (SELECT id FROM bench_hand_op WHERE state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, body`
	// sqlPeerClaim is the peer's first commit: mark the job's op as being sent with the
	// job's (id, attempt) as token, unless an earlier attempt already recorded an answer.
	sqlPeerClaim = `UPDATE bench_hand_op SET state = 'sending', token = $2
WHERE id = $1 AND state <> 'done'
RETURNING body`
	// sqlHandRecord records the answer and closes the op, fenced by the token.
	sqlHandRecord = `UPDATE bench_hand_op SET state = 'done', status = $3, answer = $4
WHERE id = $1 AND token = $2 AND state = 'sending'`
	sqlCountHandDone = `SELECT count(*) FROM bench_hand_op WHERE state = 'done'`
)

// handSetup creates and fills the hand-written op table with ops rows, numbered 1..ops.
func handSetup(ctx context.Context, pool *pgxpool.Pool, ops int) error {
	if _, err := pool.Exec(ctx, sqlCreateHandOps); err != nil {
		return fmt.Errorf("bench: create the hand-written op table: %w", err)
	}
	if _, err := pool.Exec(ctx, sqlInsertHandOps, ops); err != nil {
		return fmt.Errorf("bench: fill the hand-written op table: %w", err)
	}
	return nil
}

// handTarget is the zero-latency (or delayed) fake webhook receiver of the floor and the
// peer, called the way oncebox's webhook adapter calls it: a POST with an
// Idempotency-Key on a fresh connection each time (the adapter keeps no connection
// alive), so that the baselines pay the same HTTP cost as oncebox.
type handTarget struct {
	fake   *fakewebhook.Server
	srv    *httptest.Server
	client *http.Client
}

func newHandTarget(latency time.Duration) *handTarget {
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(latencyHandler(fake, latency))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &handTarget{fake: fake, srv: srv, client: &http.Client{Transport: tr, Timeout: time.Minute}}
}

func (h *handTarget) Close() {
	h.client.CloseIdleConnections()
	h.srv.Close()
}

// call posts the op's body and returns the receiver's status and answer.
func (h *handTarget) call(ctx context.Context, id int64, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/hook", bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("bench: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "hand-"+strconv.FormatInt(id, 10))
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("bench: POST: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("bench: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, answer, fmt.Errorf("bench: receiver answered %d: %s", resp.StatusCode, answer)
	}
	return resp.StatusCode, answer, nil
}

// check verifies that every op was recorded once and the receiver saw one effect each.
func (h *handTarget) check(ctx context.Context, pool *pgxpool.Pool, ops int) error {
	var done int
	if err := pool.QueryRow(ctx, sqlCountHandDone).Scan(&done); err != nil {
		return fmt.Errorf("bench: count recorded ops: %w", err)
	}
	if done != ops || h.fake.EffectCount() != ops {
		return fmt.Errorf("bench: %d ops recorded and the receiver saw %d effects; want %d of each", done, h.fake.EffectCount(), ops)
	}
	return nil
}

// Floor measures the bare durable lifecycle of a dispatch written with pgx alone, no
// River and no oncebox: p.Settings.Workers goroutines each loop over one commit that
// takes the next pending op and marks it as being sent with a token, the HTTP call to
// the same fake receiver as EndToEnd, and one commit that records the answer and closes
// the op (the op row is its own job row). It is what the two-commit design costs on
// this machine. pool must be bound to an empty migrated schema (NewSchema).
func Floor(ctx context.Context, pool *pgxpool.Pool, p DispatchParams) (Measure, error) {
	if p.Ops < 1 || p.Settings.Workers < 1 {
		return Measure{}, errors.New("bench: Floor needs Ops and Settings.Workers")
	}
	if err := handSetup(ctx, pool, p.Ops); err != nil {
		return Measure{}, err
	}
	target := newHandTarget(p.VendorLatency)
	defer target.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		tokens   atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	if p.BeforeStart != nil {
		p.BeforeStart()
	}
	start := time.Now()
	for range p.Settings.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				more, err := floorOne(ctx, pool, target, strconv.FormatInt(tokens.Add(1), 10))
				if err != nil {
					fail(err)
					return
				}
				if !more {
					return
				}
			}
		}()
	}
	wg.Wait()
	m := Measure{Ops: p.Ops, Elapsed: time.Since(start)}
	if firstErr != nil {
		return m, firstErr
	}
	if err := ctx.Err(); err != nil {
		return m, err
	}
	return m, target.check(ctx, pool, p.Ops)
}

// floorOne dispatches one op; it reports false when no pending op is left.
func floorOne(ctx context.Context, pool *pgxpool.Pool, target *handTarget, token string) (bool, error) {
	var (
		id   int64
		body []byte
	)
	err := pool.QueryRow(ctx, sqlFloorClaim, token).Scan(&id, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bench: floor claim: %w", err)
	}
	status, answer, err := target.call(ctx, id, body)
	if err != nil {
		return false, err
	}
	tag, err := pool.Exec(ctx, sqlHandRecord, id, token, status, answer)
	if err != nil {
		return false, fmt.Errorf("bench: floor record: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return false, fmt.Errorf("bench: floor record of op %d lost its token", id)
	}
	return true, nil
}

// PeerArgs is the River job of the peer: the hand-written op it dispatches.
type PeerArgs struct {
	// OpID is the op's id in the hand-written op table.
	OpID int64 `json:"op_id"`
}

// Kind implements river.JobArgs.
func (PeerArgs) Kind() string { return "bench.peer" }

// peerWorker is what a user would write instead of oncebox: a River worker that marks
// its op as being sent with the job's (id, attempt) as token and commits, calls the
// receiver, then records the answer and completes the job in one transaction.
type peerWorker struct {
	river.WorkerDefaults[PeerArgs]
	pool   *pgxpool.Pool
	target *handTarget
	done   func()
}

// Work dispatches one op.
func (w *peerWorker) Work(ctx context.Context, job *river.Job[PeerArgs]) error {
	token := strconv.FormatInt(job.ID, 10) + "/" + strconv.Itoa(job.Attempt)
	var body []byte
	err := w.pool.QueryRow(ctx, sqlPeerClaim, job.Args.OpID, token).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // an earlier attempt recorded the answer
	}
	if err != nil {
		return fmt.Errorf("bench: peer claim: %w", err)
	}
	status, answer, err := w.target.call(ctx, job.Args.OpID, body)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlHandRecord, job.Args.OpID, token, status, answer)
		if err != nil {
			return fmt.Errorf("bench: peer record: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("bench: peer record of op %d lost its token", job.Args.OpID)
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	w.done()
	return nil
}

// Peer measures what a user would write instead of oncebox: p.Ops hand-written ops and
// their River jobs inserted up front (not timed), then a River client with the same
// settings as EndToEnd's Outbox whose worker claims with a token (one commit), calls the
// same fake receiver, and records the answer with JobCompleteTx (one commit). It
// measures the time from Start until every op is recorded. pool must be bound to an
// empty migrated schema.
func Peer(ctx context.Context, pool *pgxpool.Pool, p DispatchParams) (Measure, error) {
	if p.Ops < 1 || p.Settings.Workers < 1 {
		return Measure{}, errors.New("bench: Peer needs Ops and Settings.Workers")
	}
	if err := handSetup(ctx, pool, p.Ops); err != nil {
		return Measure{}, err
	}
	target := newHandTarget(p.VendorLatency)
	defer target.Close()

	const queue = "bench"
	done := make(chan struct{})
	var recorded atomic.Int64
	worker := &peerWorker{pool: pool, target: target, done: func() {
		if recorded.Add(1) == int64(p.Ops) {
			close(done)
		}
	}}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely[PeerArgs](workers, worker); err != nil {
		return Measure{}, fmt.Errorf("bench: register peer worker: %w", err)
	}
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: p.Settings.Workers}},
		FetchCooldown:     p.Settings.FetchCooldown,
		FetchPollInterval: p.Settings.FetchPollInterval,
		MaxAttempts:       outboxMaxAttempts + 5,
	})
	if err != nil {
		return Measure{}, fmt.Errorf("bench: river client: %w", err)
	}
	const batch = 1000
	for b := 1; b <= p.Ops; b += batch {
		params := make([]river.InsertManyParams, 0, batch)
		for i := b; i < min(p.Ops+1, b+batch); i++ {
			params = append(params, river.InsertManyParams{Args: PeerArgs{OpID: int64(i)}, InsertOpts: &river.InsertOpts{Queue: queue}})
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := rc.InsertManyTx(ctx, tx, params)
			return err
		}); err != nil {
			return Measure{}, fmt.Errorf("bench: insert peer jobs up front: %w", err)
		}
	}

	if p.BeforeStart != nil {
		p.BeforeStart()
	}
	start := time.Now()
	if err := rc.Start(ctx); err != nil {
		return Measure{}, fmt.Errorf("bench: start River: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = rc.Stop(sctx)
	}()
	if err := waitDone(ctx, done, p.Ops, func() string {
		return fmt.Sprintf("%d of %d peer ops recorded", recorded.Load(), p.Ops)
	}); err != nil {
		return Measure{}, err
	}
	m := Measure{Ops: p.Ops, Elapsed: time.Since(start)}
	return m, target.check(ctx, pool, p.Ops)
}
