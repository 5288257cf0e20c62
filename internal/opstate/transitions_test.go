package opstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// walkEnv is a migrated schema with one tenant and a Machine whose metric and job
// inserts are recorded.
type walkEnv struct {
	pool   *pgxpool.Pool
	m      *Machine
	tenant int64
	mu     sync.Mutex
	seen   []string // observed "vendor from->to"
	jobs   []string // op ids whose dispatch job was inserted
	n      int
}

func newWalkEnv(t *testing.T) *walkEnv {
	t.Helper()
	e := &walkEnv{pool: dbtest.Schema(t)}
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`INSERT INTO oncebox_tenant (name) VALUES ('walk') RETURNING id`).Scan(&e.tenant))
	e.m = New(Config{Pool: e.pool,
		Observe: func(vendor string, from, to protocol.Status) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.seen = append(e.seen, fmt.Sprintf("%s %s->%s", vendor, from, to))
		},
		InsertJob: func(_ context.Context, _ pgx.Tx, opID, _ string) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.jobs = append(e.jobs, opID)
			return nil
		}})
	return e
}

// seedOp inserts an op in status from, with a sealed copy of its args, an attempt token
// and its open attempt row, dispatch started long ago; it returns the op's id
// and its token. Its retention is an hour and its first expiry has passed (it waited
// longer than its TTL), so a change to terminal must restart its retention clock.
func (e *walkEnv) seedOp(t *testing.T, from protocol.Status) (id, token string) {
	t.Helper()
	e.n++
	ctx := context.Background()
	require.NoError(t, e.pool.QueryRow(ctx, `
		INSERT INTO oncebox_op (tenant_id, idempotency_key, tool, vendor, args, fingerprint, status, vendor_key,
			attempt_token, sealed_args, dispatch_started_at, key_first_sent_at, attempts, expires_at, retention)
		VALUES ($1, $2, 'echo', 'fake', '{}', '\x00', $3, 'vk', gen_random_uuid(), '\x01', now() - interval '1 hour',
			now() - interval '1 hour', 1, now() - interval '1 minute', interval '1 hour')
		RETURNING id::text, attempt_token::text`, e.tenant, fmt.Sprintf("k%d", e.n), from).Scan(&id, &token))
	_, err := e.pool.Exec(ctx, `INSERT INTO oncebox_attempt (op_id, attempt, token, vendor_key, started_at)
		VALUES ($1, 1, $2, 'vk', now() - interval '1 hour')`, id, token)
	require.NoError(t, err)
	return id, token
}

// row is what the walk checks of an op after a transition.
type row struct {
	status     protocol.Status
	sealed     bool
	events     int
	lastActor  string
	gone       bool
	generation int
	// kept: its expiry (as readers show it) is in the future.
	kept bool
}

func (e *walkEnv) read(t *testing.T, id string) row {
	t.Helper()
	var r row
	err := e.pool.QueryRow(context.Background(), `SELECT status, sealed_args IS NOT NULL, generation,
		(SELECT count(*) FROM oncebox_op_event WHERE op_id = o.id),
		coalesce((SELECT actor FROM oncebox_op_event WHERE op_id = o.id ORDER BY id DESC LIMIT 1), ''),
		`+expiry+` > now()
		FROM oncebox_op o WHERE id = $1`, id).Scan(&r.status, &r.sealed, &r.generation, &r.events, &r.lastActor, &r.kept)
	if errors.Is(err, pgx.ErrNoRows) {
		return row{gone: true}
	}
	require.NoError(t, err)
	return r
}

// inTx runs fn in a transaction and reports its change once committed.
func (e *walkEnv) inTx(t *testing.T, fn func(tx pgx.Tx) (*Applied, error)) *Applied {
	t.Helper()
	a, err := e.m.withTx(context.Background(), fn)
	require.NoError(t, err)
	return a
}

// makeTransition makes tr with the Machine method that the code uses for it, on a
// fresh op in tr.From, and returns the op id.
func (e *walkEnv) makeTransition(t *testing.T, tr Transition) string {
	t.Helper()
	ctx := context.Background()
	id, token := e.seedOp(t, tr.From)
	var a *Applied
	switch {
	case tr.By == Purge:
		_, err := e.pool.Exec(ctx, `UPDATE oncebox_op SET expires_at = now() - interval '1 minute', updated_at = now() - interval '61 minutes' WHERE id = $1`, id)
		require.NoError(t, err)
		res, err := e.m.Purge(ctx, 100, time.Hour)
		require.NoError(t, err)
		require.Equal(t, 1, res.Ops)
		return id
	case tr.By == Worker && tr.To == protocol.StatusDispatching && tr.From == protocol.StatusPending:
		// The fast path; the locking path is walked for dispatching -> dispatching.
		var err error
		a, err = e.m.ClaimPending(ctx, id, 7, 1, "", func(r pgx.Row) (Ident, error) {
			var skip [27]any
			dest := make([]any, len(skip))
			for i := range dest {
				dest[i] = &skip[i]
			}
			return Ident{ID: id, Vendor: "fake"}, r.Scan(dest...)
		})
		require.NoError(t, err)
	case tr.By == Worker && tr.To == protocol.StatusDispatching:
		a = e.inTx(t, func(tx pgx.Tx) (*Applied, error) {
			if err := e.m.CloseLostAttempts(ctx, tx, id, 7); err != nil {
				return nil, err
			}
			_, a, err := e.m.Claim(ctx, tx, tr.From, Ident{ID: id, Vendor: "fake"}, 7, "")
			return a, err
		})
	case tr.By == Worker && tr.From == protocol.StatusPending && tr.To != protocol.StatusUnknown:
		// A clean run's answer: its River job is running at its first attempt.
		var jobID int64
		require.NoError(t, e.pool.QueryRow(ctx, `INSERT INTO river_job (kind, args, state, attempt, max_attempts, queue, attempted_at)
			VALUES ('oncebox.dispatch', '{}', 'running', 1, 25, 'fake', now()) RETURNING id`).Scan(&jobID))
		var err error
		a, err = e.m.RecordClean(ctx, e.pool, Record{Ident: Ident{ID: id, Vendor: "fake"}, To: tr.To, Outcome: "walk",
			JobID: jobID, JobAttempt: 1, HeardAttempt: 1}, Heard{}, false)
		require.NoError(t, err)
		a.Report()
	case tr.By == Worker && tr.From == protocol.StatusPending:
		// The claiming worker hands an op it may not send to the reconciler.
		a = e.inTx(t, func(tx pgx.Tx) (*Applied, error) {
			return e.m.Apply(ctx, tx, Change{OpID: id, From: tr.From, To: tr.To, By: Worker, Kind: "resend_window_passed"})
		})
	case tr.By == Worker:
		// The vendor's answer to the attempt (from dispatching, or from unknown for a
		// slow worker).
		var err error
		a, err = e.m.RecordAndFinish(ctx, e.pool, Record{Ident: Ident{ID: id, Vendor: "fake", Attempts: 1}, Token: token,
			To: tr.To, Outcome: "walk"}, false)
		require.NoError(t, err)
		a.Report()
	default:
		c := Change{OpID: id, From: tr.From, To: tr.To, By: tr.By, Action: tr.Action, Kind: "walk", Detail: map[string]string{"why": tr.Why}}
		switch {
		case tr.To == protocol.StatusUnknown && tr.From == protocol.StatusUnknown:
			c.NextCheck = time.Now().Add(time.Minute)
		case tr.To == protocol.StatusUnknown:
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT dispatch_started_at FROM oncebox_op WHERE id = $1`, id).Scan(&c.DispatchStartedAt))
		case tr.To == protocol.StatusPending && tr.By == Person:
			c.NewVendorKey = "vk2"
		case tr.To.Terminal():
			c.VendorRef = "obj_1"
		}
		if tr.By == Person {
			c.Actor = "alice"
		}
		a = e.inTx(t, func(tx pgx.Tx) (*Applied, error) { return e.m.Apply(ctx, tx, c) })
	}
	require.NotNil(t, a, "%v did not apply", tr)
	return id
}

// TestEveryTransition walks the transition table against Postgres: each allowed
// transition is made the way the code makes it, and leaves the op in its target status,
// with the sealed args dropped exactly when the target is terminal, its event written
// (for the reconciler's and a person's changes), its job inserted (for a change to
// pending outside the worker) and the metric counted once (for a real change).
func TestEveryTransition(t *testing.T) {
	t.Parallel()
	e := newWalkEnv(t)
	for _, tr := range Transitions() {
		t.Run(fmt.Sprintf("%s->%s_by_%s", tr.From, tr.To, tr.By), func(t *testing.T) {
			e.mu.Lock()
			e.seen, e.jobs = nil, nil
			e.mu.Unlock()
			id := e.makeTransition(t, tr)
			got := e.read(t, id)
			if tr.To == Purged {
				require.True(t, got.gone, "purged op still there")
				return
			}
			require.Equal(t, tr.To, got.status)
			require.Equal(t, !tr.To.Terminal(), got.sealed, "sealed args kept exactly until terminal")
			if tr.To.Terminal() {
				require.True(t, got.kept, "the retention clock starts when the op becomes terminal")
			}
			if tr.By == Reconciler || tr.By == Person || tr.By == Expiry || (tr.By == Worker && tr.From == protocol.StatusPending && tr.To == protocol.StatusUnknown) {
				require.Equal(t, 1, got.events)
				want := string(tr.By)
				if tr.By == Person {
					want = "alice"
				}
				require.Equal(t, want, got.lastActor)
			}
			if tr.To == protocol.StatusPending && tr.By != Worker {
				require.Equal(t, []string{id}, e.jobs, "a release inserts the dispatch job in its transaction")
			}
			if tr.To == protocol.StatusPending && tr.By == Person {
				require.Equal(t, 1, got.generation, "a new vendor key moves the op to its next generation")
			}
			var want []string
			if tr.From != tr.To {
				want = []string{fmt.Sprintf("fake %s->%s", tr.From, tr.To)}
			}
			if tr.By == Worker && tr.From == protocol.StatusUnknown {
				// A worker's answer is counted as leaving dispatching, the status it
				// claimed the op in, also when the op was moved to unknown meanwhile.
				want = []string{fmt.Sprintf("fake %s->%s", protocol.StatusDispatching, tr.To)}
			}
			require.Equal(t, want, e.seen)
		})
	}
}

// TestEveryOtherTransitionIsRefused: every (from, to, actor) the table does not list is
// refused with ErrNotAllowed before anything is written.
func TestEveryOtherTransitionIsRefused(t *testing.T) {
	t.Parallel()
	e := newWalkEnv(t)
	ctx := context.Background()
	statuses := append(Statuses(), Purged)
	actors := []Actor{Worker, Reconciler, Person, Purge, Expiry, Steps}
	refused := 0
	for _, from := range Statuses() {
		id, token := e.seedOp(t, from)
		for _, to := range statuses {
			for _, by := range actors {
				if len(ActionsFor(from, to, by)) > 0 {
					continue
				}
				refused++
				_, err := e.m.withTx(ctx, func(tx pgx.Tx) (*Applied, error) {
					return e.m.Apply(ctx, tx, Change{OpID: id, From: from, To: to, By: by, Kind: "walk"})
				})
				require.ErrorIs(t, err, ErrNotAllowed, "%s -> %s by %s", from, to, by)
				if by == Worker && (from == protocol.StatusDispatching || from == protocol.StatusUnknown) {
					_, err := e.m.RecordAndFinish(ctx, e.pool, Record{Ident: Ident{ID: id}, Token: token, To: to}, false)
					require.ErrorIs(t, err, ErrNotAllowed, "record %s -> %s", from, to)
				}
				if by == Worker && to == protocol.StatusDispatching {
					_, err := e.m.withTx(ctx, func(tx pgx.Tx) (*Applied, error) {
						_, a, err := e.m.Claim(ctx, tx, from, Ident{ID: id}, 7, "")
						return a, err
					})
					require.ErrorIs(t, err, ErrNotAllowed, "claim from %s", from)
				}
				require.Equal(t, from, e.read(t, id).status, "%s -> %s by %s wrote", from, to, by)
			}
		}
		require.Zero(t, e.read(t, id).events)
	}
	require.Equal(t, len(statuses)*len(Statuses())*len(actors)-len(transitions), refused)
}

// TestApplyChecksTheFromStatus: a change whose op is no longer in its from status writes
// nothing and reports nothing (another worker or person moved it meanwhile).
func TestApplyChecksTheFromStatus(t *testing.T) {
	t.Parallel()
	e := newWalkEnv(t)
	id, _ := e.seedOp(t, protocol.StatusSucceeded)
	a := e.inTx(t, func(tx pgx.Tx) (*Applied, error) {
		return e.m.Apply(context.Background(), tx, Change{OpID: id, From: protocol.StatusUnknown, To: protocol.StatusNeedsReview, By: Reconciler, Kind: "walk"})
	})
	require.Nil(t, a)
	got := e.read(t, id)
	require.Equal(t, protocol.StatusSucceeded, got.status)
	require.Zero(t, got.events)
	require.Empty(t, e.seen)
}

// TestPersonsRightDependsOnTheAction: a person's transition is allowed only with the
// action of its row: awaiting_approval -> pending is for "approve" alone, so a
// resolution or release (or no action) of a waiting op is refused before any write.
func TestPersonsRightDependsOnTheAction(t *testing.T) {
	t.Parallel()
	e := newWalkEnv(t)
	ctx := context.Background()
	require.True(t, Allowed(protocol.StatusAwaitingApproval, protocol.StatusPending, Person, Approve))
	id, _ := e.seedOp(t, protocol.StatusAwaitingApproval)
	for _, action := range []Action{Release, Resolve, Reject, ""} {
		require.False(t, Allowed(protocol.StatusAwaitingApproval, protocol.StatusPending, Person, action), action)
		_, err := e.m.withTx(ctx, func(tx pgx.Tx) (*Applied, error) {
			return e.m.Apply(ctx, tx, Change{OpID: id, From: protocol.StatusAwaitingApproval, To: protocol.StatusPending, By: Person, Action: action, Kind: "walk"})
		})
		require.ErrorIs(t, err, ErrNotAllowed, action)
	}
	require.Equal(t, protocol.StatusAwaitingApproval, e.read(t, id).status)
	for _, tr := range transitions {
		if tr.By == Person {
			require.NotEmpty(t, tr.Action, "%s -> %s: every person's row names its action", tr.From, tr.To)
		} else {
			require.Empty(t, tr.Action, "%s -> %s by %s", tr.From, tr.To, tr.By)
		}
	}
}
