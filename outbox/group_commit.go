package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/groupcommit"
	"github.com/oncebox/oncebox/internal/testsignal"
	"github.com/oncebox/oncebox/protocol"
)

// GroupCommit commits the enqueues that arrive together in one transaction, so that
// concurrent callers share one BEGIN, one COMMIT and one WAL flush (Config.GroupCommit).
// It applies to the enqueues in a transaction of their own (Enqueue, EnqueuePrepared:
// the HTTP and MCP doors); an EnqueueTx commits with its caller's transaction.
//
// A group inserts its new ops together, in one statement, then takes each call through
// admission as EnqueueTx would in a caller's transaction, one after the other, and
// inserts their dispatch jobs together, in one statement, after the last call (a replay,
// a key conflict and a group of one take EnqueueTx's own statements). Each call is
// answered only after the commit that holds it: an answer without an error is
// committed, and an error means nothing was committed for that call (retry it with its
// key). A refusal of one call (a key conflict, a gate's refusal) records nothing, so the
// others commit without it. Any other error, the inserts' included, ends the group's
// transaction: it is rolled back, and each of its calls runs again in a transaction of
// its own, as without group commit. No vendor read is made inside a group's transaction:
// a call whose admission needs one leaves the group, makes the read with no transaction
// open, and joins a later group (enqueueReadingFirst).
type GroupCommit struct {
	// MaxOps bounds the calls committed together. 0 or 1 turns group commit off;
	// oncebox serve sets 32 unless told otherwise (ONCEBOX_GROUP_COMMIT_OPS).
	MaxOps int
	// Committers is how many group transactions may be open at once, each on a pooled
	// connection; the calls that arrive meanwhile wait for the next group. Defaults to 4
	// when MaxOps is set.
	Committers int
}

// on reports whether group commit is on.
func (g GroupCommit) on() bool { return g.MaxOps > 1 }

// call is one enqueue waiting for its group's commit.
type call = groupcommit.Call[*Prepared, *EnqueueResult]

// committer is the Outbox's side of group commit: the group's transaction (commit).
// Package groupcommit gathers the calls into groups and runs each call of a failed
// group alone (enqueueAlone).
type committer struct {
	ob    *Outbox
	calls *groupcommit.Committer[*Prepared, *EnqueueResult]
	// beforeCommit, in tests, runs when a group's calls are done and its COMMIT is
	// about to be sent.
	beforeCommit testsignal.Hook
}

func newCommitter(ob *Outbox, cfg GroupCommit) *committer {
	if cfg.Committers < 1 {
		cfg.Committers = groupcommit.DefaultCommitters
	}
	c := &committer{ob: ob}
	c.calls = groupcommit.New(groupcommit.Config{MaxOps: cfg.MaxOps, Committers: cfg.Committers},
		groupcommit.Deps[*Prepared, *EnqueueResult]{Commit: c.commit, Alone: ob.enqueueAlone})
	return c
}

// enqueue records p with the next group and returns once that group committed (or
// ctx is done: the call may then still commit).
func (c *committer) enqueue(ctx context.Context, p *Prepared) (*EnqueueResult, error) {
	return c.calls.Enqueue(ctx, p)
}

// commit runs the group's calls in one transaction, commits it, and only then answers
// each call: an answer given before the commit could name an op that never commits. An
// error means the transaction was rolled back before any answer: groupcommit then runs
// each call alone.
func (c *committer) commit(group []*call) error {
	// The same order in every group, so that two groups holding the same keys lock them
	// in the same order instead of deadlocking.
	slices.SortFunc(group, func(a, b *call) int {
		return cmp.Or(cmp.Compare(a.In.params.TenantID, b.In.params.TenantID), cmp.Compare(a.In.Key, b.In.Key))
	})
	tx := &lazyTx{pool: c.ob.pool}
	defer func() { _ = tx.Rollback(context.Background()) }()
	inserted, err := c.ob.insertGroupOps(tx, group)
	if err != nil {
		return rollBack(tx, err)
	}
	var results []*EnqueueResult
	var errs []error
	var batch jobBatch
	for i, g := range group {
		if err := g.Ctx.Err(); err != nil && inserted[i] == nil {
			// Its caller left before its turn: nothing is written for it.
			results, errs = append(results, nil), append(errs, err)
			continue
		}
		// A caller that leaves now must not abort the others' transaction.
		ctx := context.WithoutCancel(g.Ctx)
		var res *EnqueueResult
		if inserted[i] != nil {
			res, err = c.ob.admitInserted(ctx, tx, g.In, inserted[i], &batch)
		} else {
			res, err = c.ob.enqueueTx(ctx, tx, g.In, &batch)
		}
		if err != nil && !recordsNothing(err) {
			return rollBack(tx, err)
		}
		results, errs = append(results, res), append(errs, err)
	}
	// The group's jobs, in one statement: River's unique insert skips an op's job when
	// the op has a live one, as it would one at a time.
	if len(batch.jobs) > 0 {
		if _, err := c.ob.river.InsertManyTx(context.Background(), tx, batch.jobs); err != nil {
			return rollBack(tx, err)
		}
	}
	c.beforeCommit.Reached()
	if err := tx.Commit(context.Background()); err != nil {
		for i := range errs {
			if errs[i] == nil {
				// The commit's fate is unknown: the call may be retried with its key.
				results[i], errs[i] = nil, commitError(err)
			}
		}
	}
	for i, g := range group {
		g.Answer(results[i], errs[i])
	}
	return nil
}

// insertGroupOps inserts the new ops of a group's calls in one statement
// (sqlEnqueueMany) and returns what each call's insert found, by the call's index: nil
// for a call left to enqueueTx (its key held an op already, an earlier call of the
// group has its key, its caller has left, or its row could not be made: enqueueTx
// then answers it as it would alone), and for the call of a group of one. The calls
// are in key order.
func (ob *Outbox) insertGroupOps(tx pgx.Tx, group []*call) ([]*insertion, error) {
	var (
		tenants, askers                                              []int64
		keys, tools, vendors, args, vendorKeys, convs, calls, traces []string
		fingerprints, sealed                                         [][]byte
		ttls                                                         []float64
		definitions                                                  []*string
		index                                                        []int
	)
	found := make([]*insertion, len(group))
	if len(group) == 1 {
		// A group of one is an enqueue alone: sqlEnqueue is its cheaper statement.
		return found, nil
	}
	for i, g := range group {
		if g.Ctx.Err() != nil || (i > 0 && sameKey(group[i-1].In, g.In)) {
			continue
		}
		row, err := ob.newOpRow(g.Ctx, g.In)
		if err != nil {
			continue
		}
		p := g.In
		tenants, keys, tools, vendors = append(tenants, p.params.TenantID), append(keys, p.Key), append(tools, p.Tool.Name), append(vendors, p.Tool.Vendor)
		args, fingerprints, vendorKeys = append(args, string(row.args)), append(fingerprints, p.Fingerprint[:]), append(vendorKeys, row.vendorKey)
		convs, calls, ttls = append(convs, p.params.ConversationID), append(calls, p.params.ToolCallID), append(ttls, p.Tool.TTL.Seconds())
		sealed, traces = append(sealed, row.sealed), append(traces, row.trace)
		var def *string
		if d := toolDefinition(p.Tool); d != nil {
			def = new(string(d))
		}
		definitions, index, askers = append(definitions, def), append(index, i), append(askers, p.params.TokenID)
	}
	if len(index) == 0 {
		return found, nil
	}
	rows, err := tx.Query(context.Background(), sqlEnqueueMany, tenants, keys, tools, vendors, args, fingerprints, vendorKeys,
		convs, calls, ttls, sealed, traces, definitions, protocol.StatusPending, askers)
	if err != nil {
		return nil, fmt.Errorf("outbox: insert the group's ops: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int
		ins := &insertion{op: &Op{}, inserted: true}
		dest := append([]any{&n, &ins.tombstone, &ins.policyVersion, &ins.budgetVersion, &ins.installationVersion}, ins.op.scanDest()...)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("outbox: insert the group's ops: %w", err)
		}
		ins.op.fromScan()
		found[index[n-1]] = ins
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: insert the group's ops: %w", err)
	}
	return found, nil
}

// sameKey reports whether two calls name the same key of the same tenant.
func sameKey(a, b *Prepared) bool {
	return a.params.TenantID == b.params.TenantID && a.Key == b.Key
}

// rollBack rolls back a group's failed transaction and returns err, so that each of its
// calls runs again in a transaction of its own.
func rollBack(tx pgx.Tx, err error) error {
	_ = tx.Rollback(context.Background())
	return fmt.Errorf("outbox: group commit: %w", err)
}

// recordsNothing reports whether an enqueue's error left its transaction as it found
// it, so that the other calls of its group may still commit: a key conflict writes
// nothing, and a refusal at admission removes the op it had inserted (see admit).
func recordsNothing(err error) bool {
	var refused *admissionRefusal
	return errors.Is(err, ErrKeyConflict) || errors.As(err, &refused)
}

// admissionRefusal is the error of a call refused at admission (its objects or the
// gate) whose inserted op was removed again: its transaction holds nothing of it.
type admissionRefusal struct{ err error }

func (e *admissionRefusal) Error() string { return e.err.Error() }
func (e *admissionRefusal) Unwrap() error { return e.err }

// commitError is the error of a group's failed COMMIT.
func commitError(err error) error {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return errors.New("outbox: the group's transaction was rolled back at commit: retry with the same key")
	}
	return errors.Join(errors.New("outbox: commit of the group: its outcome is unknown: retry with the same key"), err)
}
