// Package outboxlink hands oncebox's own packages (reconcile) what they need from an
// Outbox: its op state machine, its vendor adapters, their job timeouts and its logger,
// without widening the outbox's public API. outbox.Outbox.Link returns one; its type is
// internal, so no user of the module depends on it.
//
// Link is generic in the vendor type only to avoid an import cycle: package outbox
// instantiates it with outbox.Vendor.
package outboxlink

import (
	"log/slog"
	"time"

	"github.com/oncebox/oncebox/internal/opstate"
)

// Link is what an Outbox lends to the reconciler.
type Link[V any] struct {
	// Ops makes every status change of an op.
	Ops *opstate.Machine
	// Vendor returns the configured adapter of a vendor.
	Vendor func(name string) (V, bool)
	// JobTimeout returns the dispatch job timeout of a vendor's queue.
	JobTimeout func(vendor string) time.Duration
	// Logger is the Outbox's logger.
	Logger *slog.Logger
}
