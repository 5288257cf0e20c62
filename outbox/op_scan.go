package outbox

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/protocol"
)

// rowScanner is what pgx.Row and pgx.Rows have in common.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanTarget holds the columns of opColumns while they are scanned.
type scanTarget struct {
	fp     []byte
	status string
}

func (op *Op) scanDest() []any {
	op.scan = &scanTarget{}
	return []any{&op.ID, &op.TenantID, &op.Key, &op.Tool, &op.Vendor, &op.Args, &op.scan.fp, &op.scan.status,
		&op.Attempts, &op.Generation, &op.VendorKey, &op.VendorRef, &op.Result, &op.Error,
		&op.ConversationID, &op.ToolCallID, &op.CreatedAt, &op.UpdatedAt, &op.ExpiresAt, &op.DispatchStartedAt, &op.TraceParent,
		&op.VendorAccount}
}

func (op *Op) fromScan() {
	copy(op.Fingerprint[:], op.scan.fp)
	op.Status = protocol.Status(op.scan.status)
	op.scan = nil
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
