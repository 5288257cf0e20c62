package reconcile_test

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/oncebox/oncebox/internal/dbtest"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/tools"
)

// Example wires the sweeper into an Outbox: the Reconciler is built first without an
// Outbox, its worker, periodic job and queue go into outbox.Config, and SetOutbox closes
// the circle before the Outbox starts.
func Example() {
	ctx := context.Background()
	pool, drop := dbtest.ForExample() // in production: pgxpool.New(ctx, databaseURL)
	defer drop()
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		panic(err)
	}
	var vendors []outbox.Vendor // the stripe, sendgrid and webhook adapters

	rec, err := reconcile.New(reconcile.Config{Interval: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	ob, err := outbox.New(outbox.Config{
		Pool:         pool,
		Tools:        reg,
		Vendors:      vendors,
		ExtraWorkers: rec.Register,
		ExtraQueues:  map[string]river.QueueConfig{reconcile.QueueName: {MaxWorkers: 2}},
		PeriodicJobs: []*river.PeriodicJob{rec.PeriodicJob()},
	})
	if err != nil {
		panic(err)
	}
	rec.SetOutbox(ob)
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { _ = ob.Stop(context.WithoutCancel(ctx)) }()

	// Or sweep once by hand, as `oncebox reconcile run` does.
	stats, err := rec.SweepOnce(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("looked up %d, resolved %d, resent %d, to review %d\n",
		stats.Looked, stats.Succeeded+stats.Failed, stats.Resent, stats.NeedsReview)
	// Output: looked up 0, resolved 0, resent 0, to review 0
}
