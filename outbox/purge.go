package outbox

import (
	"context"
	"fmt"

	"github.com/oncebox/oncebox/purge"
)

// purgeDeps is what the purge (package purge) uses of the Outbox.
func (ob *Outbox) purgeDeps() purge.Deps {
	return purge.Deps{Pool: ob.pool, Ops: ob.ops, Approvals: ob, Logger: ob.logger}
}

// Purge runs one TTL purge with cfg (purge.Purger.Purge): it deletes expired terminal
// ops in batches of cfg.BatchSize, leaving tombstones, and deletes tombstones past their
// own TTL and closed key windows.
func (ob *Outbox) Purge(ctx context.Context, cfg purge.Config) (purge.Stats, error) {
	p, err := purge.New(cfg, ob.purgeDeps())
	if err != nil {
		return purge.Stats{}, fmt.Errorf("outbox: %w", err)
	}
	st, err := p.Purge(ctx)
	if err != nil {
		return st, fmt.Errorf("outbox: %w", err)
	}
	return st, nil
}
