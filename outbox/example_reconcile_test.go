package outbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// ExampleOutbox_ReconcileOnce runs the reconciler in an Outbox: Config.Reconcile
// configures it, and with Periodic set the Outbox runs it every Interval on its
// maintenance queue from Start to Stop.
func ExampleOutbox_ReconcileOnce() {
	ctx := context.Background()
	pool, drop := dbtest.ForExample() // in production: pgxpool.New(ctx, databaseURL)
	defer drop()
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		panic(err)
	}
	var vendors []vendorapi.Vendor // the stripe, sendgrid and webhook adapters

	ob, err := outbox.New(outbox.Config{
		Pool:      pool,
		Tools:     reg,
		Vendors:   vendors,
		Reconcile: reconcile.Config{Periodic: true, Interval: 30 * time.Second},
	})
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { _ = ob.Stop(context.WithoutCancel(ctx)) }()

	// Or sweep once by hand, as `oncebox reconcile run` does.
	stats, err := ob.ReconcileOnce(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("looked up %d, resolved %d, resent %d, to review %d\n",
		stats.Looked, stats.Succeeded+stats.Failed, stats.Resent, stats.NeedsReview)
	// Output: looked up 0, resolved 0, resent 0, to review 0
}
