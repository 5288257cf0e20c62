package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// ExampleOutbox_EnqueueTx records a refund inside the caller's own transaction, next to
// the business row it belongs to, then shows a replay and a conflict.
func ExampleOutbox_EnqueueTx() {
	ctx := context.Background()
	pool, drop := dbtest.ForExample()
	defer drop()

	var tenantID int64
	if err := pool.QueryRow(ctx, "INSERT INTO oncebox_tenant (name) VALUES ('acme') RETURNING id").Scan(&tenantID); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id text PRIMARY KEY, state text)"); err != nil {
		panic(err)
	}
	// The payment was taken before oncebox: the tenant adopts it (oncebox tenant adopt),
	// or its refund is refused as not one of its objects.
	if _, err := pool.Exec(ctx, "INSERT INTO oncebox_tenant_object (tenant_id, vendor, object_id, adopted_by) VALUES ($1, 'stripe', 'pi_123', 'example')",
		tenantID); err != nil {
		panic(err)
	}
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		panic(err)
	}
	// No vendors: this Outbox only enqueues; `oncebox serve` dispatches.
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg})
	if err != nil {
		panic(err)
	}

	refund := func(amount int) (*outbox.EnqueueResult, error) {
		var res *outbox.EnqueueResult
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o-1', 'refunding') ON CONFLICT (id) DO NOTHING"); err != nil {
				return err
			}
			var err error
			res, err = ob.EnqueueTx(ctx, tx, outbox.EnqueueParams{
				TenantID: tenantID,
				Key:      "refund-o-1",
				Tool:     protocol.ToolRefund,
				Args:     json.RawMessage(fmt.Sprintf(`{"payment_intent":"pi_123","amount":%d}`, amount)),
			})
			return err
		})
		return res, err
	}

	first, err := refund(500)
	if err != nil {
		panic(err)
	}
	fmt.Println("first:", first.Op.Status, "replayed:", first.Replayed)

	again, err := refund(500)
	if err != nil {
		panic(err)
	}
	fmt.Println("again:", again.Op.Status, "replayed:", again.Replayed, "same op:", again.Op.ID == first.Op.ID)

	_, err = refund(900)
	fmt.Println("other amount is a conflict:", errors.Is(err, outbox.ErrKeyConflict))

	// Output:
	// first: pending replayed: false
	// again: pending replayed: true same op: true
	// other amount is a conflict: true
}
