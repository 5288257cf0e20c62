package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/internal/opstate"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// MaxArgsBytes is the largest args document Enqueue accepts.
const MaxArgsBytes = 256 << 10

// MaxRefBytes bounds an op's conversation_id and tool_call_id.
const MaxRefBytes = 512

// EnqueueParams is one tool call to record as an op.
type EnqueueParams struct {
	// TenantID owns the op. Required.
	TenantID int64
	// Key is the caller's idempotency key; it is normalized with NormalizeKey.
	Key string
	// Tool names a registered tool.
	Tool string
	// Args are the tool's arguments, a JSON object.
	Args json.RawMessage
	// ConversationID and ToolCallID tie the op to the agent's conversation. Optional.
	ConversationID string
	ToolCallID     string
	// SessionConversation is true when ConversationID is not one the client named but
	// the MCP session's (or server instance's) it called in: a conversation-scoped
	// budget counts the op as one without a conversation, per token, so that a new
	// session per call does not escape it. The MCP door sets it.
	SessionConversation bool
	// TokenID is the API token that asked, recorded with the op (its audit log's call
	// entry) and with an op that waits for approval so that approvers see who asked.
	// Optional (0: none).
	TokenID int64
	// ByIdentity says Key was minted from the tool's identity fields (KeyByIdentity),
	// not from the whole payload: an op already under Key whose fingerprint differs is
	// then the same operation asked in other words. Enqueue returns it as a replay with
	// EnqueueResult.Matched set, and records the match, instead of a *KeyConflictError.
	// A caller with a key of its own leaves it false.
	ByIdentity bool
	// step marks the call of a composite op's step (the step runner's): only it may use
	// a key beginning with steps.KeyPrefix.
	step bool
}

// EnqueueResult says what Enqueue did.
type EnqueueResult struct {
	// Op is the stored op: the new one, or the one already stored under the key.
	Op *Op
	// Replayed is true when the key already held an op with the same fingerprint.
	Replayed bool
	// ExpiryCollision is true when the new op's key had been used by an op that has
	// since expired: a sign that the TTL is shorter than the caller's workflow.
	ExpiryCollision bool
	// Why says, in one sentence, why a new op awaits approval ("" otherwise).
	Why string
	// Matched is set, with Replayed, when the call was matched to Op by its tool's
	// identity fields (EnqueueParams.ByIdentity) although other arguments differ: it was
	// not executed.
	Matched *IdentityMatch
	// expired is the expiry this replay made, when it found the op's wait for approval
	// run out (reported once committed).
	expired *opstate.Applied
	// held is the first status a new op got from its gate's hold (Machine.Hold),
	// reported with the enqueue.
	held *opstate.Applied
}

// Enqueue records an op and its dispatch job in a transaction of its own. It is
// Prepare then EnqueuePrepared.
func (ob *Outbox) Enqueue(ctx context.Context, params EnqueueParams) (*EnqueueResult, error) {
	ctx, span := ob.startEnqueue(ctx, params)
	p, err := ob.Prepare(params)
	var res *EnqueueResult
	if err == nil {
		res, err = ob.enqueueOwnTx(ctx, p)
	}
	return ob.endEnqueue(ctx, span, params, res, err, false)
}

// EnqueueTx records an op and its dispatch job inside the caller's transaction, so
// business rows and the op commit (or roll back) together. The same key with the same
// payload returns the stored op and inserts no job; the same key with another payload
// returns a *KeyConflictError and writes nothing. The vendor reads the op's admission
// may need (ObjectArg.Tag, Tool.Price) are made inside tx, while it holds the caller's
// locks and the op's key, each bounded by Config.AdmissionReadTimeout; Enqueue makes
// them before its transaction. It is Prepare then EnqueuePreparedTx.
func (ob *Outbox) EnqueueTx(ctx context.Context, tx pgx.Tx, params EnqueueParams) (*EnqueueResult, error) {
	ctx, span := ob.startEnqueue(ctx, params)
	p, err := ob.Prepare(params)
	var res *EnqueueResult
	if err == nil {
		res, err = ob.enqueueTx(ctx, tx, p, nil)
	}
	return ob.endEnqueue(ctx, span, params, res, err, true)
}

// EnqueuePrepared records the prepared call p (see Prepare) as an op, with its dispatch
// job, in a transaction of its own. The call is not validated again.
func (ob *Outbox) EnqueuePrepared(ctx context.Context, p *Prepared) (*EnqueueResult, error) {
	ctx, span := ob.startEnqueue(ctx, p.params)
	res, err := ob.enqueueOwnTx(ctx, p)
	return ob.endEnqueue(ctx, span, p.params, res, err, false)
}

// EnqueuePreparedTx is EnqueuePrepared inside the caller's transaction (see EnqueueTx).
func (ob *Outbox) EnqueuePreparedTx(ctx context.Context, tx pgx.Tx, p *Prepared) (*EnqueueResult, error) {
	ctx, span := ob.startEnqueue(ctx, p.params)
	res, err := ob.enqueueTx(ctx, tx, p, nil)
	return ob.endEnqueue(ctx, span, p.params, res, err, true)
}

// enqueueOwnTx records p in a transaction of its own, or with the calls that arrive
// with it under group commit (Config.GroupCommit). The vendor reads its admission needs
// are made before that transaction (enqueueReadingFirst).
func (ob *Outbox) enqueueOwnTx(ctx context.Context, p *Prepared) (*EnqueueResult, error) {
	return ob.enqueueReadingFirst(ctx, func(ctx context.Context) (*EnqueueResult, error) {
		if ob.group != nil {
			return ob.group.enqueue(ctx, p)
		}
		return ob.enqueueAlone(ctx, p)
	})
}

// enqueueAlone records p in a transaction of its own.
func (ob *Outbox) enqueueAlone(ctx context.Context, p *Prepared) (*EnqueueResult, error) {
	var res *EnqueueResult
	err := inLazyTx(ctx, ob.pool, func(tx pgx.Tx) error {
		var err error
		res, err = ob.enqueueTx(ctx, tx, p, nil)
		return err
	})
	return res, err
}

// endEnqueue ends an enqueue's span, counts and logs it. inCallerTx says the op
// commits with the caller's transaction.
func (ob *Outbox) endEnqueue(ctx context.Context, span trace.Span, params EnqueueParams, res *EnqueueResult, err error,
	inCallerTx bool,
) (*EnqueueResult, error) {
	endEnqueue(span, res, err)
	if err != nil {
		ob.observeError(ctx, params, err)
		return nil, err
	}
	ob.observeEnqueue(params.Tool, res, inCallerTx)
	return res, nil
}

func (ob *Outbox) observeError(ctx context.Context, params EnqueueParams, err error) {
	var (
		kc          *KeyConflictError
		notOwned    *NotOwnedError
		unavailable *ObjectUnavailableError
	)
	switch {
	case errors.As(err, &notOwned):
		ob.logger.Warn("call names an object that is not the tenant's; refused", slog.Int64("tenant", params.TenantID),
			slog.String("tool", params.Tool), slog.String("field", "args."+notOwned.Arg), slog.String("object", notOwned.ID),
			slog.String("conversation_id", params.ConversationID), slog.Group("", tracing.SpanLogAttrs(ctx)...))
	case errors.As(err, &unavailable):
		ob.logger.Warn("the vendor could not be asked whose an object is; call refused", slog.Int64("tenant", params.TenantID),
			slog.String("tool", params.Tool), slog.String("field", "args."+unavailable.Arg), slog.Any("error", unavailable.Err),
			slog.Group("", tracing.SpanLogAttrs(ctx)...))
	case errors.As(err, &kc):
		ob.cfg.Observer.Enqueued(params.TenantID, params.Tool, "conflict")
		ob.logger.Warn("idempotency key reused with another payload; refused", slog.Int64("tenant", params.TenantID),
			slog.String("tool", params.Tool), slog.String("idempotency_key", kc.Key),
			slog.String("conversation_id", params.ConversationID), slog.String("tool_call_id", params.ToolCallID),
			slog.String("stored_fingerprint", kc.Stored.String()), slog.String("given_fingerprint", kc.Given.String()),
			slog.Group("", tracing.SpanLogAttrs(ctx)...))
	}
}

// observeEnqueue counts an enqueue and logs a new op. inCallerTx says the op commits
// with the caller's transaction (EnqueueTx), so it may yet be rolled back.
func (ob *Outbox) observeEnqueue(tool string, res *EnqueueResult, inCallerTx bool) {
	switch {
	case res.Replayed:
		ob.cfg.Observer.Enqueued(res.Op.TenantID, tool, "replay")
		res.expired.Report()
		if m := res.Matched; m != nil {
			ob.cfg.Observer.Enqueued(res.Op.TenantID, tool, "identity_match")
			ob.opLogger(res.Op).Info("call matched an op by its tool's identity fields; not executed", slog.String("tool", tool),
				slog.Any("differed", m.Differed), slog.String("given_fingerprint", m.Fingerprint.String()))
		}
	default:
		ob.cfg.Observer.Enqueued(res.Op.TenantID, tool, "new")
		msg := "op state changed"
		if inCallerTx {
			msg = "op state changed (commits with the caller's transaction)"
		}
		if res.held != nil {
			res.held.Report() // the first status from the table's initial row: event, metric, log line
		} else {
			ob.opLogger(res.Op).Info(msg, slog.String("tool", tool), slog.String("from", ""),
				slog.String("to", string(res.Op.Status)), slog.Int("attempt", 0))
		}
		if res.ExpiryCollision {
			ob.cfg.Observer.Enqueued(res.Op.TenantID, tool, "expiry_collision")
			ob.logger.Warn("idempotency key reused after its op expired; the TTL may be shorter than the workflow",
				slog.Int64("tenant", res.Op.TenantID), slog.String("idempotency_key", res.Op.Key),
				slog.String("op_id", res.Op.ID), slog.String("tool", tool), slog.Group("", tracing.LogAttrs(res.Op.TraceParent)...))
		}
	}
}

func (ob *Outbox) enqueueTx(ctx context.Context, tx pgx.Tx, p *Prepared, batch *jobBatch) (*EnqueueResult, error) {
	row, err := ob.newOpRow(ctx, p)
	if err != nil {
		return nil, err
	}
	// The insert tells a new op from a replay before anything else happens: a replay
	// never reaches the gate, so nothing is charged for it.
	ins, err := ob.insertOp(ctx, tx, p, row)
	if err != nil {
		return nil, err
	}
	if !ins.inserted {
		return ob.replay(ctx, tx, p, ins.op)
	}
	return ob.admitInserted(ctx, tx, p, ins, batch)
}

// opRow is what an enqueue stores of its call in the op's row: its args as stored (the
// sealed ones apart, when its tool redacts them), its vendor key at generation 0 and
// its trace.
type opRow struct {
	args      json.RawMessage
	sealed    []byte
	vendorKey string
	trace     string
}

func (ob *Outbox) newOpRow(ctx context.Context, p *Prepared) (*opRow, error) {
	if p.Key == "" {
		return nil, errors.New("outbox: the prepared call has no key: give it one with Prepared.WithKey")
	}
	row := &opRow{args: p.Args, vendorKey: vendorapi.VendorKey(p.params.TenantID, p.Key, p.Tool.Name, 0), trace: tracing.Current(ctx)}
	if p.Tool.Redact != nil && ob.sealer != nil {
		var err error
		if row.sealed, err = ob.sealer.Seal(p.params.TenantID, p.Key, p.Args); err != nil {
			return nil, err
		}
		row.args = p.Tool.Redact(p.Args)
	}
	return row, nil
}

// admitInserted takes a new op on from its insert: past its key's purged generation
// when it reuses a purged op's key, then through admission.
func (ob *Outbox) admitInserted(ctx context.Context, tx pgx.Tx, p *Prepared, ins *insertion, batch *jobBatch) (*EnqueueResult, error) {
	if ins.tombstone != nil && p.params.step {
		// A step's op is never sent again under a new generation: the step runner reads
		// its steps' tombstones first (package steps), so this is a second guard.
		return nil, fmt.Errorf("outbox: step key %s was purged; the step is not sent again: %w", p.Key, ErrWrongState)
	}
	if ins.tombstone != nil {
		// The key was used by an op since purged: this one starts past its last
		// generation, so it never sends the purged op's vendor key again.
		op := ins.op
		op.Generation = *ins.tombstone + 1
		op.VendorKey = vendorapi.VendorKey(p.params.TenantID, p.Key, p.Tool.Name, op.Generation)
		if _, err := tx.Exec(ctx, sqlNextGeneration, op.ID, op.Generation, op.VendorKey); err != nil {
			return nil, fmt.Errorf("outbox: move op past its key's purged generation: %w", err)
		}
	}
	return ob.admit(ctx, tx, p, ins, batch)
}

// insertion is what the enqueue's insert found.
type insertion struct {
	op *Op
	// inserted is false when the key held an op already (op is that one).
	inserted bool
	// tombstone is the last generation of the purged op whose key the new op reuses.
	tombstone *int
	// policyVersion is GateOp.PolicyVersion.
	policyVersion int64
	// budgetVersion is GateOp.BudgetVersion.
	budgetVersion string
	// installationVersion is GateOp.InstallationVersion.
	installationVersion string
}

// insertOp inserts the prepared call as a pending op, or finds the op its key holds.
func (ob *Outbox) insertOp(ctx context.Context, tx pgx.Tx, p *Prepared, row *opRow) (*insertion, error) {
	params := p.params
	rows, err := tx.Query(ctx, sqlEnqueue, params.TenantID, p.Key, p.Tool.Name, p.Tool.Vendor, row.args,
		p.Fingerprint[:], protocol.StatusPending, row.vendorKey, params.ConversationID, params.ToolCallID, p.Tool.TTL.Seconds(),
		row.sealed, row.trace, toolDefinition(p.Tool), params.TokenID)
	if err != nil {
		return nil, fmt.Errorf("outbox: insert op: %w", unknownTenant(err, params.TenantID))
	}
	var ins insertion
	for rows.Next() {
		ins.op = &Op{}
		dest := append([]any{&ins.inserted, &ins.tombstone, &ins.policyVersion, &ins.budgetVersion, &ins.installationVersion}, ins.op.scanDest()...)
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: insert op: %w", err)
		}
		ins.op.fromScan()
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: insert op: %w", unknownTenant(err, params.TenantID))
	}
	if ins.op == nil {
		// The key was committed by a concurrent caller after this statement's snapshot.
		if ins.op, err = scanOp(tx.QueryRow(ctx, sqlOpByKey, params.TenantID, p.Key)); err != nil {
			return nil, fmt.Errorf("outbox: read op after conflict: %w", err)
		}
	}
	return &ins, nil
}

// unknownTenant turns the error of an insert whose tenant does not exist (sqlEnqueue
// leaves its tenant_id NULL) into ErrUnknownTenant, and returns any other as it is.
func unknownTenant(err error, tenantID int64) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.NotNullViolation && pgErr.ColumnName == "tenant_id" {
		return fmt.Errorf("%w: tenant %d", ErrUnknownTenant, tenantID)
	}
	return err
}

// replay answers a call whose key holds op already: the same call is a replay, another
// one a *KeyConflictError, unless the key was minted from the tool's identity fields
// (the call is then matched to op).
func (ob *Outbox) replay(ctx context.Context, tx pgx.Tx, p *Prepared, op *Op) (*EnqueueResult, error) {
	params := p.params
	var (
		matched *IdentityMatch
		err     error
	)
	if op.Fingerprint != p.Fingerprint {
		if !params.ByIdentity {
			return nil, &KeyConflictError{Key: p.Key, Stored: op.Fingerprint, Given: p.Fingerprint}
		}
		if matched, err = ob.matchTx(ctx, tx, params, p, op); err != nil {
			return nil, err
		}
	}
	if op.Status != protocol.StatusAwaitingApproval {
		return &EnqueueResult{Op: op, Replayed: true, Matched: matched}, nil
	}
	// A replay shows an expired wait as the rejection it is.
	cur, expired, err := ob.expireIfDueTx(ctx, tx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("outbox: expire approval: %w", err)
	}
	if cur != nil {
		op = cur
	}
	if expired != nil {
		// The row as the expiry left it.
		if op, err = scanOp(tx.QueryRow(ctx, sqlOpByKey, params.TenantID, p.Key)); err != nil {
			return nil, fmt.Errorf("outbox: read expired op: %w", err)
		}
	}
	return &EnqueueResult{Op: op, Replayed: true, Matched: matched, expired: expired}, nil
}
