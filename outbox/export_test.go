package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/internal/opstate"
)

// InsertJobTxForTest inserts an op's dispatch job in tx as every resend does, for the
// external tests.
func (ob *Outbox) InsertJobTxForTest(ctx context.Context, tx pgx.Tx, opID, vendor string) error {
	return ob.insertJobTx(ctx, tx, &Op{ID: opID, Vendor: vendor})
}

// OpsForTest returns the Outbox's op state machine, for the external tests that make a
// status change the way a person's decision does.
func (ob *Outbox) OpsForTest() *opstate.Machine { return ob.ops }

// HoldGroupCommitsForTest makes every group commit call f when its calls are done and
// before it sends COMMIT, for the tests that look at a group while it is open.
func (ob *Outbox) HoldGroupCommitsForTest(f func()) { ob.group.beforeCommit.Arm(f) }

// GroupWaitingForTest is how many calls wait for a group commit.
func (ob *Outbox) GroupWaitingForTest() int {
	return ob.group.calls.Waiting()
}
