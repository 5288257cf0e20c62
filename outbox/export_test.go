package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// InsertJobTxForTest inserts an op's dispatch job in tx as every resend does, for the
// external tests.
func (ob *Outbox) InsertJobTxForTest(ctx context.Context, tx pgx.Tx, opID, vendor string) error {
	return ob.insertJobTx(ctx, tx, &Op{ID: opID, Vendor: vendor})
}
