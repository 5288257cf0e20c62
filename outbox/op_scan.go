package outbox

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
)

// rowScanner is what pgx.Row and pgx.Rows have in common.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanDest is where a query's OpColumns are scanned to (opstate.Row, the one scan of
// an op's columns); fromScan fills the op from it.
func (op *Op) scanDest() []any {
	op.scan = &opstate.Row{}
	return op.scan.Dest()
}

func (op *Op) fromScan() {
	r := op.scan
	r.Finish()
	*op = Op{ID: r.ID, TenantID: r.TenantID, Key: r.Key, Tool: r.Tool, Vendor: r.Vendor, Args: r.Args,
		Fingerprint: r.Fingerprint, Status: r.Status, Attempts: r.Attempts, Generation: r.Generation,
		VendorKey: r.VendorKey, VendorRef: r.VendorRef, Result: r.Result, Error: r.Error,
		ConversationID: r.ConversationID, ToolCallID: r.ToolCallID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ExpiresAt: r.ExpiresAt, DispatchStartedAt: r.DispatchStartedAt, TraceParent: r.TraceParent,
		VendorAccount: r.VendorAccount, Steps: op.Steps, actingTrace: op.actingTrace}
}

func scanOp(row rowScanner) (*Op, error) {
	op := &Op{}
	if err := row.Scan(op.scanDest()...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	op.fromScan()
	return op, nil
}
